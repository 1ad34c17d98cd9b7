"""The carbon families in the exposition (agent/exporter/prometheus_carbon.py through the
collector): grams beside the joules, the intensity gauge with its source, nothing without a
configured intensity, and no number while the intensity is unknown."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agent.exporter.prometheus import SnapshotCollector
from agent.monitor.accounts import EnergyAccounts
from agent.monitor.carbon_ledger import CarbonLedger
from agent.monitor.snapshot import PodPower, Snapshot
from common.carbon import JOULES_PER_KWH, ConstantIntensity, parse_intensity_csv, parse_time

T0 = parse_time("2024-03-01T00:00:00Z")
POD = {"node": "n1", "namespace": "shop", "pod": "web-1", "pod_uid": "uid-a", "component": "cpu"}


def snapshot(end: float, interval: float = 5.0) -> Snapshot:
    pods = (PodPower("uid-a", "Burstable", 1.0, 20.0, namespace="shop", name="web-1"),)
    return Snapshot(node="n1", interval_seconds=interval, timestamp=end, source="rapl", node_watts=80.0,
                    idle_watts=40.0, active_watts=40.0, idle_source="utilization", cpu_utilization=0.5,
                    busy_cpu_seconds=1.0, pods=pods)


def registry_with(collector: SnapshotCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    return registry


def test_grams_are_the_energy_counters_times_the_intensity() -> None:
    collector = SnapshotCollector(EnergyAccounts(carbon=CarbonLedger(ConstantIntensity(420.0))))
    registry = registry_with(collector)
    for i in range(1, 5):
        collector.accounts.add(snapshot(T0 + 5 * i))
    get = registry.get_sample_value
    node_j = get("kubejoule_node_energy_joules_total", {"node": "n1", "source": "rapl"})
    pod_j = get("kubejoule_pod_energy_joules_total", POD)
    assert node_j == pytest.approx(80.0 * 20)
    assert get("kubejoule_node_carbon_grams_total", {"node": "n1", "source": "rapl"}) == pytest.approx(
        node_j / JOULES_PER_KWH * 420.0)
    assert get("kubejoule_pod_carbon_grams_total", POD) == pytest.approx(pod_j / JOULES_PER_KWH * 420.0)
    assert get("kubejoule_namespace_carbon_grams_total", {"node": "n1", "namespace": "shop"}) == pytest.approx(
        pod_j / JOULES_PER_KWH * 420.0)
    assert get("kubejoule_carbon_intensity_grams_per_kwh", {"node": "n1", "source": "configured", "zone": ""}) == 420.0
    assert get("kubejoule_agent_errors_total", {"node": "n1", "kind": "carbon"}) == 0.0


def test_no_carbon_families_without_an_intensity() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)
    collector.accounts.add(snapshot(T0 + 5))
    text = generate_latest(registry).decode()
    assert "carbon" not in text


def test_an_unknown_intensity_has_no_gauge_holds_the_counters_and_counts_an_error() -> None:
    series = parse_intensity_csv("timestamp,g_per_kwh\n2024-03-01T00:00:00Z,300\n2024-03-01T01:00:00Z,\n", "ci.csv")
    collector = SnapshotCollector(EnergyAccounts(carbon=CarbonLedger(series)))
    registry = registry_with(collector)
    get = registry.get_sample_value
    node = {"node": "n1", "source": "rapl"}
    collector.accounts.add(snapshot(T0 + 5))
    grams = get("kubejoule_node_carbon_grams_total", node)
    assert grams == pytest.approx(80.0 * 5 / JOULES_PER_KWH * 300.0)
    collector.accounts.add(snapshot(T0 + 3600 + 5))  # the empty row: a gap
    collector.accounts.add(snapshot(T0 + 2 * 3600 + 5))  # past the file's end: a gap
    assert get("kubejoule_node_carbon_grams_total", node) == grams  # held, not a number made up
    assert get("kubejoule_pod_carbon_grams_total", POD) == pytest.approx(20.0 * 5 / JOULES_PER_KWH * 300.0)
    assert get("kubejoule_carbon_intensity_grams_per_kwh", {"node": "n1", "source": "csv", "zone": ""}) is None
    assert get("kubejoule_agent_errors_total", {"node": "n1", "kind": "carbon"}) == 2.0
    # energy kept counting all the while
    assert get("kubejoule_node_energy_joules_total", node) == pytest.approx(80.0 * 15)
