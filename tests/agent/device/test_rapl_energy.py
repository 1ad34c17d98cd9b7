"""The one function that turns two counter readings into energy, wraps included."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.device.energy import (
    CounterError,
    energy_delta,
    power_ceiling_watts,
    uj_to_joules,
    wrap_period_seconds,
    zone_kind,
)
from agent.device.rapl import RaplReading, Zone
from agent.monitor.rapl_power import compute_power


@pytest.mark.parametrize(
    ("previous", "current", "max_range", "expected"),
    [
        (100, 250, 1000, 150),
        (100, 100, 1000, 0),
        (900, 50, 1000, 150),  # wrapped once: 100 to the top, 50 after
        (1000, 0, 1000, 0),
        (5, 10, None, 5),  # rising counters need no range
        (5, 10, 0, 5),
    ],
)
def test_delta_table(previous: int, current: int, max_range: int | None, expected: int) -> None:
    assert energy_delta(previous, current, max_range) == expected


@pytest.mark.parametrize("max_range", [None, 0, -1])
def test_falling_counter_without_range_is_an_error_not_a_number(max_range: int | None) -> None:
    with pytest.raises(CounterError, match="max_energy_range_uj"):
        energy_delta(900, 50, max_range)


def test_counter_above_its_range_was_reset_not_wrapped() -> None:
    with pytest.raises(CounterError, match="reset"):
        energy_delta(5000, 10, 1000)


@given(
    max_range=st.integers(min_value=1, max_value=2**40),
    start=st.integers(min_value=0, max_value=2**62),
    data=st.data(),
)
@settings(max_examples=300, deadline=None)  # no per-example deadline: CI shares 2 cores with ~800 tests
def test_delta_recovers_true_energy_modulo_one_wrap(max_range: int, start: int, data: st.DataObject) -> None:
    """The kernel reports true energy modulo the range; with less than one range of energy
    between reads, the delta is exactly the true energy, wrapped or not."""
    energy = data.draw(st.integers(min_value=0, max_value=max_range - 1))
    previous = start % max_range
    current = (start + energy) % max_range
    assert energy_delta(previous, current, max_range) == energy


def test_units_and_wrap_period() -> None:
    assert uj_to_joules(1_500_000) == pytest.approx(1.5)
    # 262 kJ range at 150 W wraps after about 29 minutes
    assert wrap_period_seconds(262_143_328_850, 150_000_000) == pytest.approx(1747.6, abs=0.1)
    assert wrap_period_seconds(None, 150_000_000) is None
    assert wrap_period_seconds(1000, None) is None


PACKAGE = Zone("intel-rapl:0", "intel-rapl", (0,), "package-0", 0, None, None)
DRAM = Zone("intel-rapl:0:0", "intel-rapl", (0, 0), "dram", 0, None, None)


@given(
    ranges=st.tuples(st.integers(min_value=1_000, max_value=2**38), st.integers(min_value=1_000, max_value=2**36)),
    starts=st.tuples(st.integers(min_value=0, max_value=2**40), st.integers(min_value=0, max_value=2**40)),
    fractions=st.tuples(st.floats(min_value=0, max_value=0.999), st.floats(min_value=0, max_value=0.999)),
    interval=st.floats(min_value=0.01, max_value=1000.0),
)
@settings(max_examples=300, deadline=None)
def test_node_power_is_the_true_energy_over_the_interval_wrapped_or_not(
    ranges: tuple[int, int], starts: tuple[int, int], fractions: tuple[float, float], interval: float
) -> None:
    """Through compute_power: package + dram, each counter possibly wrapping once, gives node
    watts = true energy / interval (to 1e-9), and each zone its own share, never a gap."""
    zones = {z.zone_id: replace(z, max_energy_range_uj=r) for z, r in zip((PACKAGE, DRAM), ranges, strict=True)}
    energy = [int(f * r) for f, r in zip(fractions, ranges, strict=True)]
    before = RaplReading(True, zones, {z: s % r for z, s, r in zip(zones, starts, ranges, strict=True)})
    after = RaplReading(
        True, zones, {z: (s + e) % r for z, s, e, r in zip(zones, starts, energy, ranges, strict=True)}
    )
    power = compute_power(before, after, interval)
    # above what the zone can draw (no constraint here: the per-kind ceiling), an implausible gap
    beyond = {
        z.zone_id for z, e in zip(zones.values(), energy, strict=True)
        if e / 1e6 / interval > power_ceiling_watts(zone_kind(z.name), z.max_power_uw)
    }
    assert {g.what.split()[1] for g in power.gaps if g.kind == "implausible"} == beyond
    if beyond:
        assert power.watts is None and {z.zone_id for z in power.zones if z.watts is None} == beyond
        return
    assert power.gaps == ()
    assert power.watts == pytest.approx(sum(energy) / 1e6 / interval, rel=1e-9, abs=1e-15)
    watts = {z.zone_id: z.watts for z in power.zones}
    assert watts == pytest.approx({z: e / 1e6 / interval for z, e in zip(zones, energy, strict=True)}, rel=1e-9, abs=1e-15)
