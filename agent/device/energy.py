"""Energy counter arithmetic, in one place: deltas with wraparound, unit conversion, plausibility.

RAPL counters are microjoules that wrap at `max_energy_range_uj`: the kernel reports the true
energy modulo that range. NVML's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`) is
millijoules in an unsigned 64-bit integer: it wraps at 2^64. Both go through `energy_delta`, in
the counter's own unit; converting to joules happens once, at the reader (`uj_to_joules`,
`mj_to_joules`).

Plausibility is checked here too, before anything is published: a counter reading outside its
range, or an interval's energy that no device of its kind can draw, is `ImplausibleError` — a gap
with kind `implausible`, never a number (DESIGN.md, "Plausibility").
"""

from __future__ import annotations

import re

MICRO = 1e-6
MILLI = 1e-3


# energy_uj is a u64 in the kernel (and the range a u64): anything at or above 2^64 is not a counter.
COUNTER_LIMIT_UJ = 2**64
# A zone's power may exceed its constraint_*_max_power_uw for short bursts (Intel's PL2 is up to
# about 2x the long-term limit on client parts): the bound is this many times that maximum.
MAX_POWER_MARGIN = 3.0
# Where a zone has no constraint_*_max_power_uw: a ceiling per kind of zone, in watts, well above
# any part sold (the largest server sockets draw about 500 W; a fully populated DDR5 socket about
# 400 W of DRAM; psys covers a whole platform). Beyond it the reading cannot be right.
ZONE_CEILING_WATTS = {"package": 1_500.0, "core": 1_500.0, "uncore": 1_000.0, "dram": 1_000.0, "psys": 10_000.0}
DEFAULT_ZONE_CEILING_WATTS = 10_000.0
# The smallest constraint_*_max_power_uw a zone can have: below a watt it is no power bound of any
# part sold (the smallest parts' package limits are a few watts), so it is not used as one.
MIN_MAX_POWER_UW = 1_000_000


class CounterError(ValueError):
    """A delta that cannot be known; the message is the reason recorded in the gap."""


class ImplausibleError(CounterError):
    """A value that was read but cannot be right (out of range, beyond a physical bound)."""


def energy_delta(previous: int, current: int, max_range: int | None) -> int:
    """Energy between two readings of one counter, in the counter's unit (µJ for RAPL, mJ for NVML).

    `current - previous` when the counter did not fall; otherwise the counter wrapped once,
    and the delta is `current + (max_range - previous)` (`max_energy_range_uj` for RAPL, 2^64
    for NVML's u64). With no usable range
    (unreadable, zero, or smaller than the previous reading) a falling counter is an error,
    never a negative or zero reading.
    """
    if previous < 0 or current < 0:
        raise CounterError("negative counter value")
    if current >= previous:
        return current - previous
    if not max_range or max_range <= 0:
        raise CounterError(
            "counter fell (wrapped or reset) and max_energy_range_uj is unreadable or zero, "
            "so the energy in this interval is unknown"
        )
    if previous > max_range:
        raise CounterError(
            f"counter fell from {previous} but its range is {max_range}: "
            "the counter was reset, not wrapped"
        )
    return current + (max_range - previous)


def uj_to_joules(microjoules: int | float) -> float:
    return float(microjoules) * MICRO


def mj_to_joules(millijoules: int | float) -> float:
    return float(millijoules) * MILLI


def wrap_period_seconds(max_energy_range_uj: int | None, max_power_uw: int | None) -> float | None:
    """How long the counter takes to wrap at the device's maximum power (µJ / µW = mJ / mW = s)."""
    if not max_energy_range_uj or not max_power_uw or max_power_uw <= 0:
        return None
    return max_energy_range_uj / max_power_uw


def interval_ceiling_watts(kind_ceiling_watts: float, hint_watts: float | None, counter_fell: bool) -> float:
    """The most an interval may average, in watts, for RAPL zones and GPUs alike.

    A usable hint (a zone's max power, a GPU's enforced limit; `MAX_POWER_MARGIN ×` it: room for
    bursts) bounds only energy the agent infers — across a counter that fell, a wrap or a reset
    taken for one — and only ever tightens the kind's ceiling. A counter that rose, or a power
    reading, is a measurement: it is held to the kind's ceiling alone, so a hint never erases it
    (DESIGN.md, "Plausibility")."""
    if counter_fell and hint_watts is not None:
        return min(kind_ceiling_watts, MAX_POWER_MARGIN * hint_watts)
    return kind_ceiling_watts


# A RAPL package zone's name: `package-0`, `package-1-die-0` (AMD's is plain `package`).
PACKAGE_NAME = re.compile(r"^package-(?P<socket>\d+)(?:-die-\d+)?$")


def zone_kind(name: str) -> str:
    """The kind of a zone for the `zone` label and its ceiling: `package-0`, `package-1-die-0` and
    AMD's `package` are all `package` (the socket is its own label); `core`, `uncore`, `dram`,
    `psys` as named."""
    return "package" if PACKAGE_NAME.match(name) else name


def power_ceiling_watts(kind: str, max_power_uw: int | None, counter_fell: bool = True) -> float:
    """interval_ceiling_watts() of a RAPL zone of this kind (`zone_kind`: package,
    core, uncore, dram, psys) with its usable `max_power_uw` (or None)."""
    hint = uj_to_joules(max_power_uw) if max_power_uw else None
    return interval_ceiling_watts(ZONE_CEILING_WATTS.get(kind, DEFAULT_ZONE_CEILING_WATTS), hint, counter_fell)


def usable_max_power_uw(kind: str, max_power_uw: int | None) -> int | None:
    """A zone's `constraint_*_max_power_uw` as a plausibility hint, or None when it cannot be one.

    A hint never erases a measurement: it only tightens the power ceiling of a wrap (energy the
    agent infers, not reads; interval_ceiling_watts) and allows the wrap-period check. So it is used
    only when it is a bound a zone of this kind could have —
    at least a watt and at most the kind's own ceiling. A zero, a microwatt or 10^18 µW is no
    such bound (it would refuse every reading, or make the wrap period 0 s): it is ignored, and
    the kind's ceiling applies as for a zone without constraints."""
    if max_power_uw is None:
        return None
    ceiling_uw = ZONE_CEILING_WATTS.get(kind, DEFAULT_ZONE_CEILING_WATTS) / MICRO
    return max_power_uw if MIN_MAX_POWER_UW <= max_power_uw <= ceiling_uw else None


def check_counter_uj(value_uj: int, max_energy_range_uj: int | None) -> None:
    """A counter reading the kernel could have given: below 2^64 and within its range."""
    if value_uj >= COUNTER_LIMIT_UJ:
        raise ImplausibleError(f"energy_uj {value_uj} is beyond a 64-bit counter")
    if max_energy_range_uj and value_uj > max_energy_range_uj:
        raise ImplausibleError(
            f"energy_uj {value_uj} is above max_energy_range_uj {max_energy_range_uj} (a counter never exceeds its range)"
        )


def check_power(joules: float, interval_seconds: float, ceiling_watts: float) -> None:
    """An interval's energy that a zone can draw: at most its ceiling on average. A half-written
    counter read as a wrap (a value far below the previous one) lands far above it."""
    watts = joules / interval_seconds
    if not watts <= ceiling_watts:  # also refuses nan
        raise ImplausibleError(
            f"{watts:.6g} W over {interval_seconds:g} s is above the zone's plausible maximum "
            f"{ceiling_watts:g} W (a half-written or corrupt counter, taken for a wrap?)"
        )
