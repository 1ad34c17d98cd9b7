"""The Prometheus collector over Snapshots, in a fresh CollectorRegistry each test."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agent.exporter import ERROR_KINDS, ExportLevels, SnapshotCollector
from agent.snapshot import ContainerPower, Gap, PodPower, ProcessPower, Snapshot, VMPower, ZonePower
from tests.helpers.agent_metrics import documented_metrics, exposed_labels

POD_A = "aaaaaaaa-0000-0000-0000-000000000001"
POD_B = "bbbbbbbb-0000-0000-0000-000000000002"


def snapshot(
    node_watts: float | None = 50.0, interval: float = 2.0, package_joules: float | None = 90.0, **changes: object
) -> Snapshot:
    base = Snapshot(
        node="n1", interval_seconds=interval, timestamp=1_700_000_000.0, source="rapl" if node_watts is not None else "none",
        node_watts=node_watts, idle_watts=None if node_watts is None else 20.0,
        active_watts=None if node_watts is None else node_watts - 20.0, idle_source="utilization",
        cpu_utilization=0.6, busy_cpu_seconds=4.8,
        zones=(
            ZonePower("package-0", "intel-rapl:0", 0, "class/powercap/intel-rapl:0",
                      None if package_joules is None else package_joules / interval, package_joules),
            ZonePower("psys", "intel-rapl:1", None, "class/powercap/intel-rapl:1", None, None),
        ),
        pods=(
            PodPower(POD_A, "Burstable", 2.0, None if node_watts is None else 12.0,
                     (ContainerPower("c" * 64, 1.5, None if node_watts is None else 9.0),), namespace="shop", name="web-1"),
            PodPower(POD_B, "BestEffort", 1.0, None if node_watts is None else 6.0),
        ),
        host_watts=None if node_watts is None else 12.0,
        vms=(VMPower("win10", None, 3001, None, 0.5, None if node_watts is None else 3.0),),
        processes=(ProcessPower(3001, "qemu-system-x86", 0.5, 3.0), ProcessPower(900, "kubelet", 0.2, 1.2),
                   ProcessPower(901, "containerd", 0.1, 0.6)),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def registry_with(collector: SnapshotCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    return registry


def test_node_pods_and_vms_by_default_containers_and_processes_only_when_asked() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)
    collector.update(snapshot())
    get = registry.get_sample_value
    assert get("kubejoule_node_power_watts", {"node": "n1", "source": "rapl"}) == 50.0
    assert get("kubejoule_node_idle_power_watts", {"node": "n1", "source": "rapl", "idle_source": "utilization"}) == 20.0
    assert get("kubejoule_pod_power_watts", {"node": "n1", "namespace": "shop", "pod": "web-1", "pod_uid": POD_A}) == 12.0
    # names unknown (no API yet): the uid with empty names, still exported
    assert get("kubejoule_pod_power_watts", {"node": "n1", "namespace": "", "pod": "", "pod_uid": POD_B}) == 6.0
    assert get("kubejoule_vm_power_watts", {"node": "n1", "vm": "win10", "vm_uuid": ""}) == 3.0
    assert get("kubejoule_host_power_watts", {"node": "n1"}) == 12.0
    text = generate_latest(registry).decode()
    assert "kubejoule_container_power_watts{" not in text and "kubejoule_process_power_watts{" not in text

    opted = SnapshotCollector(ExportLevels(containers=True, process_top=2))
    registry = registry_with(opted)
    opted.update(snapshot())
    get = registry.get_sample_value
    assert get("kubejoule_container_power_watts", {"node": "n1", "namespace": "shop", "pod": "web-1",
                                                     "container": "", "container_id": "c" * 64}) == 9.0
    assert get("kubejoule_process_power_watts", {"node": "n1", "pid": "3001", "comm": "qemu-system-x86"}) == 3.0
    assert get("kubejoule_process_power_watts", {"node": "n1", "pid": "901", "comm": "containerd"}) is None  # top 2 only


def test_energy_counters_sum_intervals_skip_gaps_and_never_fall() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)
    get = registry.get_sample_value
    node = {"node": "n1", "source": "rapl"}
    package = {"node": "n1", "zone": "package-0", "socket": "0"}
    pod = {"node": "n1", "namespace": "shop", "pod": "web-1", "pod_uid": POD_A}
    collector.update(snapshot(50.0, 2.0, 90.0))
    assert get("kubejoule_node_energy_joules_total", node) == 100.0
    assert get("kubejoule_zone_energy_joules_total", package) == 90.0
    assert get("kubejoule_pod_energy_joules_total", pod) == 24.0
    # an interval with a gap on the package zone: its counter holds, the gauge disappears
    collector.update(snapshot(50.0, 2.0, None))
    assert get("kubejoule_zone_energy_joules_total", package) == 90.0
    assert get("kubejoule_zone_power_watts", package) is None
    collector.update(snapshot(40.0, 5.0, 150.0))
    assert get("kubejoule_node_energy_joules_total", node) == 100.0 + 100.0 + 200.0
    assert get("kubejoule_zone_energy_joules_total", package) == 240.0
    assert get("kubejoule_pod_energy_joules_total", pod) == 24.0 * 2 + 60.0
    # a zone that never had a known energy has no counter, not a 0
    assert get("kubejoule_zone_energy_joules_total", {"node": "n1", "zone": "psys", "socket": ""}) is None


def test_unknown_power_has_no_series_and_gone_pods_leave() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)
    get = registry.get_sample_value
    collector.update(snapshot(node_watts=None, package_joules=None))
    text = generate_latest(registry).decode()
    for name in ("kubejoule_node_power_watts{", "kubejoule_node_energy_joules_total{", "kubejoule_pod_power_watts{",
                 "kubejoule_pod_energy_joules_total{", "kubejoule_host_power_watts{", "kubejoule_vm_power_watts{",
                 "kubejoule_node_idle_power_watts{"):
        assert name not in text
    assert get("kubejoule_node_cpu_utilization_ratio", {"node": "n1"}) == 0.6
    collector.update(snapshot())
    collector.update(snapshot(pods=snapshot().pods[1:]))  # pod A deleted
    assert get("kubejoule_pod_energy_joules_total", {"node": "n1", "namespace": "shop", "pod": "web-1", "pod_uid": POD_A}) is None
    assert get("kubejoule_pod_energy_joules_total", {"node": "n1", "namespace": "", "pod": "", "pod_uid": POD_B}) == 24.0


def test_errors_are_counted_by_kind() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)

    def errors(kind: str) -> float | None:
        return registry.get_sample_value("kubejoule_agent_errors_total", {"node": "n1", "kind": kind})

    collector.update(snapshot())
    assert all(errors(kind) == 0.0 for kind in ERROR_KINDS)  # every kind exists from the start
    collector.update(snapshot(gaps=(Gap("zone intel-rapl:0 (package-0)", "permission denied"), Gap("cpu", "x"),
                                    Gap("idle split", "follows from cpu"), Gap("cgroups", "y"), Gap("processes", "z")),
                              invariant_breached=True, skew_scaled=True))
    collector.update(snapshot(skew_scaled=True))
    collector.count_error("sample")
    collector.count_error("metrics_server", 2)  # later parts count their own kinds
    assert errors("rapl") == 1.0 and errors("procstat") == 1.0 and errors("cgroup") == 1.0
    assert errors("process") == 1.0 and errors("invariant") == 1.0 and errors("read_skew") == 2.0
    assert errors("sample") == 1.0 and errors("metrics_server") == 2.0


def test_before_the_first_sample_only_the_errors_counter_is_exposed() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)
    collector.count_error("sample")
    text = generate_latest(registry).decode()
    assert "kubejoule_node_power_watts{" not in text and "kubejoule_sample_timestamp_seconds{" not in text
    assert registry.get_sample_value("kubejoule_agent_errors_total", {"node": "", "kind": "sample"}) == 1.0


def test_calibrated_curve_points_are_exported_when_given() -> None:
    points = [(i / 10, 100.0 + 10 * i) for i in range(11)]
    collector = SnapshotCollector(model_points=points)
    registry = registry_with(collector)
    collector.update(snapshot())
    assert registry.get_sample_value("kubejoule_node_power_model_watts", {"node": "n1", "utilization": "0.3"}) == 130.0
    assert registry.get_sample_value("kubejoule_sample_timestamp_seconds", {"node": "n1"}) == pytest.approx(1.7e9)


def test_every_documented_metric_is_exposed_with_exactly_its_labels() -> None:
    """With every level on and every later part's section present, the exposition is exactly
    docs/DESIGN.md's metric table: each metric there, with its labels and `node`, nothing else."""
    extra = (
        ("wall_watts", 55.0),
        ("metrics_server", {
            "age_seconds": 7.5,
            "node": {"cpu_cores": 2.5, "memory_working_set_bytes": 2**30, "window_seconds": 15.0},
            "pods": [{"uid": POD_A, "namespace": "shop", "name": "web-1", "cpu_cores": 0.5,
                      "memory_working_set_bytes": 2**20}],
        }),
        ("network", {
            "interfaces": [{"interface": "eth0", "rx_bytes": 1000, "tx_bytes": 2000}],
            "pods": [{"uid": POD_A, "namespace": "shop", "name": "web-1", "host_network": False,
                      "rx_bytes": 10, "tx_bytes": 20}],
        }),
    )
    collector = SnapshotCollector(ExportLevels(containers=True, process_top=3), model_points=[(0.0, 20.0), (1.0, 90.0)])
    registry = registry_with(collector)
    collector.update(snapshot(extra=extra))
    seen = exposed_labels(generate_latest(registry).decode())
    expected = {name: set(labels) | {"node"} for name, labels in documented_metrics().items()}
    assert seen == expected


def test_items_sharing_label_values_make_one_series_the_first_for_gauge_and_counter() -> None:
    """Two qemu processes with one name and uuid (a VM restarting within an interval), two zones
    with one name on one socket: one series each, gauge and counter from the same (first) item."""
    twin_vms = (VMPower("win10", "u-1", 3001, None, 0.5, 3.0), VMPower("win10", "u-1", 3002, None, 0.1, 1.0))
    twin_zones = (ZonePower("dram", "intel-rapl:0:2", 0, "class/powercap/intel-rapl:0:2", 2.0, 4.0),
                  ZonePower("dram", "intel-rapl-mmio:0:0", 0, "class/powercap/intel-rapl-mmio:0:0", 9.0, 18.0))
    collector = SnapshotCollector()
    registry = registry_with(collector)
    for _ in range(2):
        collector.update(snapshot(vms=twin_vms, zones=twin_zones))
    get = registry.get_sample_value
    vm = {"node": "n1", "vm": "win10", "vm_uuid": "u-1"}
    dram = {"node": "n1", "zone": "dram", "socket": "0"}
    assert get("kubejoule_vm_power_watts", vm) == 3.0 and get("kubejoule_vm_energy_joules_total", vm) == 12.0
    assert get("kubejoule_zone_power_watts", dram) == 2.0 and get("kubejoule_zone_energy_joules_total", dram) == 8.0
    text = generate_latest(registry).decode()
    assert text.count("kubejoule_vm_power_watts{") == 1 and text.count('kubejoule_zone_power_watts{') == 1
