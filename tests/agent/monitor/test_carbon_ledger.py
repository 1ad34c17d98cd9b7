"""Grams beside the joules (agent/monitor/carbon_ledger.py): each interval's energy, as the energy
ledger resolved it (`interval_energy`), times the intensity over that interval, for node, pods and
namespaces; an unknown intensity holds the counters and says why, never adds a number."""

from __future__ import annotations

import os

import pytest

from agent.monitor.carbon_ledger import CarbonLedger
from agent.monitor.energy_ledger import ExportLevels, IntervalEnergy, interval_energy
from agent.monitor.snapshot import PodPower, Snapshot
from common.carbon import JOULES_PER_KWH, ConstantIntensity, parse_intensity_csv, parse_time
from common.carbon_file import IntensityFile

T0 = parse_time("2024-03-01T00:00:00Z")
HOUR = 3600.0


def energy(end: float, node_watts: float | None = 100.0, interval: float = 10.0,
             pods: tuple[PodPower, ...] | None = None) -> IntervalEnergy:
    """The interval's energy, as the energy ledger hands it to the carbon ledger."""
    if pods is None:
        pods = (
            PodPower("uid-a", "Burstable", 1.0, None if node_watts is None else 30.0, namespace="shop", name="a"),
            PodPower("uid-b", "Burstable", 1.0, None if node_watts is None else 10.0, namespace="shop", name="b"),
            PodPower("uid-c", "Burstable", 1.0, None if node_watts is None else 20.0, namespace="ml", name="c",
                     gpu=True, gpu_watts=None if node_watts is None else 40.0),
        )
    return interval_energy(Snapshot(
        node="n1", interval_seconds=interval, timestamp=end, source="rapl", node_watts=node_watts, idle_watts=None,
        active_watts=None, idle_source="utilization", cpu_utilization=0.5, busy_cpu_seconds=1.0, pods=pods,
    ), ExportLevels())


def grams(watts: float, seconds: float, g_per_kwh: float) -> float:
    return watts * seconds / JOULES_PER_KWH * g_per_kwh


def test_constant_intensity_grams_for_node_pods_and_namespaces():
    ledger = CarbonLedger(ConstantIntensity(500.0))
    for i in range(1, 4):
        view = ledger.add(energy(T0 + 10 * i))
        assert view.gap is None
    assert view.intensity == 500.0 and view.source == "configured"
    assert view.node == {"rapl": pytest.approx(grams(100.0, 30, 500.0))}
    assert view.pods[("uid-a", "cpu")] == pytest.approx(grams(30.0, 30, 500.0))
    assert view.pods[("uid-c", "gpu")] == pytest.approx(grams(40.0, 30, 500.0))
    assert view.namespaces["shop"] == pytest.approx(grams(40.0, 30, 500.0))
    assert view.namespaces["ml"] == pytest.approx(grams(60.0, 30, 500.0))


def test_an_interval_across_two_hours_is_weighted_by_time():
    series = parse_intensity_csv("timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n2024-03-01T01:00:00Z,400\n")
    ledger = CarbonLedger(series)
    view = ledger.add(energy(T0 + HOUR + 5))  # 5 s at 100, 5 s at 400
    assert view.intensity == pytest.approx(250.0)
    assert view.node["rapl"] == pytest.approx(grams(100.0, 5, 100.0) + grams(100.0, 5, 400.0))


def test_a_gap_in_the_series_holds_every_counter_and_says_why():
    text = "timestamp,g_per_kwh\n2024-03-01T00:00:00Z,200\n2024-03-01T01:00:00Z,-5\n2024-03-01T02:00:00Z,300\n"
    ledger = CarbonLedger(parse_intensity_csv(text, "ci.csv"))
    before = ledger.add(energy(T0 + 60))
    assert before.gap is None
    during = ledger.add(energy(T0 + HOUR + 60))
    reason = during.gap
    assert reason is not None and "negative value -5" in reason and "line 3 of ci.csv" in reason
    assert during.intensity is None
    assert during.node == before.node and dict(during.pods) == dict(before.pods)
    assert dict(during.namespaces) == dict(before.namespaces)
    after = ledger.add(energy(T0 + 2 * HOUR + 60))
    assert after.gap is None  # known again: grams resume
    assert after.node["rapl"] == pytest.approx(grams(100.0, 10, 200.0) + grams(100.0, 10, 300.0))


def test_unknown_energy_adds_nothing_and_is_not_an_intensity_gap():
    ledger = CarbonLedger(ConstantIntensity(100.0))
    view = ledger.add(energy(T0 + 10, node_watts=None))
    assert view.gap is None
    assert view.node == {} and dict(view.pods) == {} and dict(view.namespaces) == {}


def test_namespace_is_the_sum_of_its_pods_including_those_gone():
    ledger = CarbonLedger(ConstantIntensity(300.0))
    ledger.add(energy(T0 + 10))
    only_a = (PodPower("uid-a", "Burstable", 1.0, 50.0, namespace="shop", name="a"),)
    view = ledger.add(energy(T0 + 20, pods=only_a))
    assert ("uid-b", "cpu") not in view.pods  # gone: its series goes with it
    assert view.namespaces["shop"] == pytest.approx(grams(30.0 + 10.0, 10, 300.0) + grams(50.0, 10, 300.0))
    assert "ml" not in view.namespaces  # no pod of it here any more
    view = ledger.add(energy(T0 + 30))  # b and c come back: they resume, never lower
    assert view.pods[("uid-b", "cpu")] == pytest.approx(grams(10.0, 20, 300.0))
    assert view.namespaces["ml"] == pytest.approx(grams(60.0, 20, 300.0))


def test_a_csv_rewritten_in_place_is_used_from_the_next_interval(tmp_path, caplog):
    path = tmp_path / "ci.csv"
    path.write_text("timestamp,g_per_kwh\n2024-03-01T00:00:00Z,200\n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    ledger = CarbonLedger(IntensityFile(path, check_every_s=0.0))
    reason = ledger.add(energy(T0 + HOUR + 60)).gap  # past the file's only hour: a gap
    assert reason is not None and "ends there" in reason
    path.write_text("timestamp,g_per_kwh\n2024-03-01T00:00:00Z,200\n2024-03-01T01:00:00Z,300\n")
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    with caplog.at_level("INFO", logger="kubejoule.agent.carbon"):
        view = ledger.add(energy(T0 + HOUR + 70))
    assert view.gap is None
    assert view.node["rapl"] == pytest.approx(grams(100.0, 10, 300.0))
    assert any("reloaded: 2 rows" in r.getMessage() for r in caplog.records)
