"""The Prometheus collector over Snapshots, in a fresh CollectorRegistry each test."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agent.device.gaps import Gap, Subject
from agent.exporter.prometheus import SnapshotCollector
from agent.monitor.accounts import EnergyAccounts
from agent.monitor.carbon_ledger import CarbonLedger
from agent.monitor.energy_ledger import ERROR_KINDS, ExportLevels
from agent.monitor.gpu_power import GpuPower
from agent.monitor.snapshot import (
    ContainerPower,
    PlatformPower,
    PodPower,
    ProcessPower,
    Snapshot,
    VMPower,
    ZonePower,
)
from common.carbon import ConstantIntensity
from tests.helpers.agent_metrics import documented_metrics, exposed_labels

POD_A = "aaaaaaaa-0000-0000-0000-000000000001"
POD_B = "bbbbbbbb-0000-0000-0000-000000000002"
PROCESSES = (ProcessPower(3001, "qemu-system-x86", 0.5, 3.0), ProcessPower(900, "kubelet", 0.2, 1.2),
             ProcessPower(901, "containerd", 0.1, 0.6))


def snapshot(
    node_watts: float | None = 50.0, interval: float = 2.0, package_joules: float | None = 90.0, **changes: object
) -> Snapshot:
    processes = PROCESSES if node_watts is not None else tuple(replace(p, watts=None) for p in PROCESSES)
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
        processes=processes, busy_processes=processes, live_pids=frozenset(p.pid for p in PROCESSES),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def registry_with(collector: SnapshotCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    return registry


def test_node_pods_and_vms_by_default_containers_and_processes_only_when_asked() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)
    collector.accounts.add(snapshot())
    get = registry.get_sample_value
    assert get("kubejoule_node_power_watts", {"node": "n1", "source": "rapl"}) == 50.0
    assert get("kubejoule_node_idle_power_watts", {"node": "n1", "source": "rapl", "idle_source": "utilization"}) == 20.0
    assert get("kubejoule_pod_power_watts", {"node": "n1", "namespace": "shop", "pod": "web-1", "pod_uid": POD_A, "component": "cpu"}) == 12.0
    # names unknown (no API yet): the uid with empty names, still exported
    assert get("kubejoule_pod_power_watts", {"node": "n1", "namespace": "", "pod": "", "pod_uid": POD_B, "component": "cpu"}) == 6.0
    assert get("kubejoule_vm_power_watts", {"node": "n1", "vm": "win10", "vm_uuid": ""}) == 3.0
    assert get("kubejoule_host_power_watts", {"node": "n1"}) == 12.0
    text = generate_latest(registry).decode()
    assert "kubejoule_container_power_watts{" not in text and "kubejoule_process_power_watts{" not in text

    opted = SnapshotCollector(EnergyAccounts(ExportLevels(containers=True, process_top=2)))
    registry = registry_with(opted)
    opted.accounts.add(snapshot())
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
    package = {"node": "n1", "zone": "package", "socket": "0"}
    pod = {"node": "n1", "namespace": "shop", "pod": "web-1", "pod_uid": POD_A, "component": "cpu"}
    collector.accounts.add(snapshot(50.0, 2.0, 90.0))
    assert get("kubejoule_node_energy_joules_total", node) == 100.0
    assert get("kubejoule_zone_energy_joules_total", package) == 90.0
    assert get("kubejoule_pod_energy_joules_total", pod) == 24.0
    # an interval with a gap on the package zone: its counter holds, the gauge disappears
    collector.accounts.add(snapshot(50.0, 2.0, None))
    assert get("kubejoule_zone_energy_joules_total", package) == 90.0
    assert get("kubejoule_zone_power_watts", package) is None
    collector.accounts.add(snapshot(40.0, 5.0, 150.0))
    assert get("kubejoule_node_energy_joules_total", node) == 100.0 + 100.0 + 200.0
    assert get("kubejoule_zone_energy_joules_total", package) == 240.0
    assert get("kubejoule_pod_energy_joules_total", pod) == 24.0 * 2 + 60.0
    # a zone that never had a known energy has no counter, not a 0
    assert get("kubejoule_zone_energy_joules_total", {"node": "n1", "zone": "psys", "socket": ""}) is None


NEW_COUNTERS = {
    # counter: (its labels in the default snapshot, the gauge beside it)
    "kubejoule_container_energy_joules_total": (
        {"namespace": "shop", "pod": "web-1", "container": "", "container_id": "c" * 64}, "kubejoule_container_power_watts"),
    "kubejoule_process_energy_joules_total": ({"pid": "900", "comm": "kubelet"}, "kubejoule_process_power_watts"),
    "kubejoule_host_energy_joules_total": ({}, "kubejoule_host_power_watts"),
    "kubejoule_node_idle_energy_joules_total": (
        {"source": "rapl", "idle_source": "utilization"}, "kubejoule_node_idle_power_watts"),
    "kubejoule_node_active_energy_joules_total": (
        {"source": "rapl", "idle_source": "utilization"}, "kubejoule_node_active_power_watts"),
}


@pytest.mark.parametrize("counter", sorted(NEW_COUNTERS))
def test_every_power_gauge_has_a_counter_that_sums_intervals_holds_through_gaps_and_never_falls(counter: str) -> None:
    labels, gauge = NEW_COUNTERS[counter]
    labels = {"node": "n1", **labels}
    collector = SnapshotCollector(EnergyAccounts(ExportLevels(containers=True, process_top=3)))
    registry = registry_with(collector)
    get = registry.get_sample_value
    seen: list[float] = []
    # known (2 s), a gap (no node power: every share unknown), known again, known at another
    # length (5 s); RAPL wraps are corrected before this (test_agent_run_http checks them end to end)
    for snap in (snapshot(50.0, 2.0), snapshot(node_watts=None, package_joules=None), snapshot(50.0, 2.0), snapshot(40.0, 5.0)):
        collector.accounts.add(snap)
        watts = get(gauge, labels)
        total = get(counter, labels)
        assert total is not None, (counter, snap.node_watts)
        if snap.node_watts is None:
            assert watts is None and total == seen[-1]  # the gauge goes, the counter holds
        else:
            assert watts is not None and total == pytest.approx((seen[-1] if seen else 0.0) + watts * snap.interval_seconds)
        seen.append(total)
    assert seen == sorted(seen) and seen[-1] > seen[0]


def test_a_process_counter_counts_intervals_outside_the_top_n_and_leaves_with_the_process() -> None:
    collector = SnapshotCollector(EnergyAccounts(ExportLevels(process_top=1)))
    registry = registry_with(collector)
    kubelet = {"node": "n1", "pid": "900", "comm": "kubelet"}

    def total() -> float | None:
        return registry.get_sample_value("kubejoule_process_energy_joules_total", kubelet)

    collector.accounts.add(snapshot())  # qemu is the top 1: kubelet's counter grows but is not exposed
    assert total() is None
    kubelet_first = ProcessPower(900, "kubelet", 0.9, 5.0)
    collector.accounts.add(snapshot(processes=(kubelet_first,), busy_processes=(kubelet_first, *PROCESSES[::2])))
    assert total() == pytest.approx(1.2 * 2 + 5.0 * 2)  # both intervals, though only now in the top 1
    # alive but idle: not in the busy list, the counter holds (and is hidden while not in the top N)
    collector.accounts.add(snapshot(busy_processes=PROCESSES[:1], processes=PROCESSES[:1]))
    collector.accounts.add(snapshot(processes=(kubelet_first,), busy_processes=(kubelet_first,)))
    assert total() == pytest.approx(1.2 * 2 + 5.0 * 4)
    # the process exits: its series goes; the same pid and comm again resumes, never lower
    collector.accounts.add(snapshot(processes=PROCESSES[:1], busy_processes=PROCESSES[:1], live_pids=frozenset({3001, 901})))
    assert total() is None
    collector.accounts.add(snapshot(processes=(kubelet_first,), busy_processes=(kubelet_first,)))
    assert total() == pytest.approx(1.2 * 2 + 5.0 * 6)


@pytest.mark.parametrize("kind", ["pod", "container", "vm", "process"])
def test_an_entity_gone_for_a_while_comes_back_at_its_total_never_lower(kind: str) -> None:
    """A pod missing from one cgroup read (or a process out of the busy list after it died) leaves
    with its series; when the same key is back, its counter resumes where it stopped."""
    collector = SnapshotCollector(EnergyAccounts(ExportLevels(containers=True, process_top=3)))
    registry = registry_with(collector)
    name, labels, without = {
        "pod": ("kubejoule_pod_energy_joules_total", {"namespace": "shop", "pod": "web-1", "pod_uid": POD_A, "component": "cpu"},
                {"pods": snapshot().pods[1:]}),
        "container": ("kubejoule_container_energy_joules_total",
                      {"namespace": "shop", "pod": "web-1", "container": "", "container_id": "c" * 64},
                      {"pods": (replace(snapshot().pods[0], containers=()), *snapshot().pods[1:])}),
        "vm": ("kubejoule_vm_energy_joules_total", {"vm": "win10", "vm_uuid": ""}, {"vms": ()}),
        "process": ("kubejoule_process_energy_joules_total", {"pid": "3001", "comm": "qemu-system-x86"},
                    {"processes": PROCESSES[1:], "busy_processes": PROCESSES[1:], "live_pids": frozenset({900, 901})}),
    }[kind]
    labels = {"node": "n1", **labels}
    collector.accounts.add(snapshot())
    collector.accounts.add(snapshot())
    before = registry.get_sample_value(name, labels)
    assert before is not None and before > 0
    collector.accounts.add(snapshot(**without))
    assert registry.get_sample_value(name, labels) is None  # gone with its entity
    collector.accounts.add(snapshot())
    after = registry.get_sample_value(name, labels)
    assert after is not None and after > before  # resumed, then grew: never lower


def test_unknown_power_has_no_series_and_gone_pods_leave() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)
    get = registry.get_sample_value
    collector.accounts.add(snapshot(node_watts=None, package_joules=None))
    text = generate_latest(registry).decode()
    for name in ("kubejoule_node_power_watts{", "kubejoule_node_energy_joules_total{", "kubejoule_pod_power_watts{",
                 "kubejoule_pod_energy_joules_total{", "kubejoule_host_power_watts{", "kubejoule_vm_power_watts{",
                 "kubejoule_node_idle_power_watts{"):
        assert name not in text
    assert get("kubejoule_node_cpu_utilization_ratio", {"node": "n1"}) == 0.6
    collector.accounts.add(snapshot())
    collector.accounts.add(snapshot(pods=snapshot().pods[1:]))  # pod A deleted
    assert get("kubejoule_pod_energy_joules_total", {"node": "n1", "namespace": "shop", "pod": "web-1", "pod_uid": POD_A, "component": "cpu"}) is None
    assert get("kubejoule_pod_energy_joules_total", {"node": "n1", "namespace": "", "pod": "", "pod_uid": POD_B, "component": "cpu"}) == 24.0


def test_errors_are_counted_by_kind() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)

    def errors(kind: str) -> float | None:
        return registry.get_sample_value("kubejoule_agent_errors_total", {"node": "n1", "kind": kind})

    collector.accounts.add(snapshot())
    assert all(errors(kind) == 0.0 for kind in ERROR_KINDS)  # every kind exists from the start
    collector.accounts.add(snapshot(gaps=(Gap(Subject.ZONE, "permission denied", name="intel-rapl:0 (package-0)"), Gap(Subject.CPU, "x"),
                                    Gap(Subject.IDLE_SPLIT, "follows from cpu"), Gap(Subject.CGROUPS, "y"), Gap(Subject.PROCESSES, "z")),
                              invariant_breached=True, skew_scaled=True))
    collector.accounts.add(snapshot(skew_scaled=True))
    collector.accounts.count_error("sample")
    collector.accounts.count_error("metrics_server", 2)  # later parts count their own kinds
    assert errors("rapl") == 1.0 and errors("procstat") == 1.0 and errors("cgroup") == 1.0
    assert errors("process") == 1.0 and errors("invariant") == 1.0 and errors("read_skew") == 2.0
    assert errors("sample") == 1.0 and errors("metrics_server") == 2.0


def test_before_the_first_sample_only_the_errors_counter_is_exposed() -> None:
    collector = SnapshotCollector()
    registry = registry_with(collector)
    collector.accounts.count_error("sample")
    text = generate_latest(registry).decode()
    assert "kubejoule_node_power_watts{" not in text and "kubejoule_sample_timestamp_seconds{" not in text
    assert registry.get_sample_value("kubejoule_agent_errors_total", {"node": "", "kind": "sample"}) == 1.0


def test_calibrated_curve_points_are_exported_when_given() -> None:
    points = [(i / 10, 100.0 + 10 * i) for i in range(11)]
    collector = SnapshotCollector(model_points=points)
    registry = registry_with(collector)
    collector.accounts.add(snapshot())
    rapl = {"node": "n1", "utilization": "0.3", "reading": "rapl"}  # the default: the CPU side's curve
    assert registry.get_sample_value("kubejoule_node_power_model_watts", rapl) == 130.0
    platform = SnapshotCollector(model_points=points, model_reading="platform")
    platform_registry = registry_with(platform)
    platform.accounts.add(snapshot())
    assert platform_registry.get_sample_value("kubejoule_node_power_model_watts", {**rapl, "reading": "platform"}) == 130.0
    assert platform_registry.get_sample_value("kubejoule_node_power_model_watts", rapl) is None
    assert registry.get_sample_value("kubejoule_sample_timestamp_seconds", {"node": "n1"}) == pytest.approx(1.7e9)


def test_every_documented_metric_is_exposed_with_exactly_its_labels() -> None:
    """With every level on and every later part's section present, the exposition is exactly
    docs/DESIGN.md's metric table: each metric there, with its labels and `node`, nothing else."""
    sections = dict(
        wall_watts=55.0,
        metrics_server={
            "age_seconds": 7.5,
            "node": {"cpu_cores": 2.5, "memory_working_set_bytes": 2**30, "window_seconds": 15.0},
            "pods": [{"uid": POD_A, "namespace": "shop", "name": "web-1", "cpu_cores": 0.5,
                      "memory_working_set_bytes": 2**20}],
        },
        network={
            "interfaces": [{"interface": "eth0", "rx_bytes": 1000, "tx_bytes": 2000}],
            "pods": [{"uid": POD_A, "namespace": "shop", "name": "web-1", "host_network": False,
                      "rx_bytes": 10, "tx_bytes": 20}],
        },
    )
    # a node with a GPU held by pod A and a BMC: 120 W platform = 50 W CPU side + 40 W GPU + 30 W other
    gpu = GpuPower(0, "GPU-1", "NVIDIA H100", 40.0, "energy", "exclusive", ((POD_A, 40.0),))
    pods = (replace(snapshot().pods[0], gpu=True, gpu_watts=40.0), snapshot().pods[1])
    platform = PlatformPower(120.0, 3.0, "EnvironmentMetrics", "/redfish/v1/Chassis/1", 30.0, 50.0, 40.0)
    accounts = EnergyAccounts(ExportLevels(containers=True, process_top=3), carbon=CarbonLedger(ConstantIntensity(300.0)))
    collector = SnapshotCollector(accounts, model_points=[(0.0, 20.0), (1.0, 90.0)])
    registry = registry_with(collector)
    collector.accounts.add(snapshot(**sections, gpus=(gpu,), pods=pods, platform=platform, gpu_unattributed_watts=0.0))
    seen = exposed_labels(generate_latest(registry).decode())
    expected = {name: set(labels) | {"node"} for name, labels in documented_metrics().items()}
    assert seen == expected


def test_vms_sharing_label_values_make_one_series_the_first_for_gauge_and_counter() -> None:
    """Two qemu processes with one name and uuid (a VM restarting within an interval): one series,
    gauge and counter from the same (first) item."""
    twin_vms = (VMPower("win10", "u-1", 3001, None, 0.5, 3.0), VMPower("win10", "u-1", 3002, None, 0.1, 1.0))
    collector = SnapshotCollector()
    registry = registry_with(collector)
    for _ in range(2):
        collector.accounts.add(snapshot(vms=twin_vms))
    get = registry.get_sample_value
    vm = {"node": "n1", "vm": "win10", "vm_uuid": "u-1"}
    assert get("kubejoule_vm_power_watts", vm) == 3.0 and get("kubejoule_vm_energy_joules_total", vm) == 12.0
    text = generate_latest(registry).decode()
    assert text.count("kubejoule_vm_power_watts{") == 1


def zone(name: str, zone_id: str, socket: int | None, joules: float | None, interval: float = 2.0) -> ZonePower:
    return ZonePower(name, zone_id, socket, f"class/powercap/{zone_id}", None if joules is None else joules / interval, joules)


def test_the_zone_label_is_the_zone_kind_and_the_socket_its_own_label() -> None:
    """`sum by (zone)` adds packages over sockets the way it adds cores: the socket is never in
    the zone's value. Zones of one kind on one socket (the dies of a package) add up."""
    zones = (
        zone("package-0-die-0", "intel-rapl:0", 0, 40.0), zone("dram", "intel-rapl:0:0", 0, 4.0),
        zone("package-0-die-1", "intel-rapl:1", 0, 30.0), zone("dram", "intel-rapl:1:0", 0, 6.0),
        zone("package-1", "intel-rapl:2", 1, 50.0), zone("core", "intel-rapl:2:0", 1, 20.0),
        zone("psys", "intel-rapl:3", None, 200.0),
    )
    collector = SnapshotCollector()
    registry = registry_with(collector)
    collector.accounts.add(snapshot(zones=zones))
    get = registry.get_sample_value

    def series(name: str, kind: str, socket: str) -> float | None:
        return get(name, {"node": "n1", "zone": kind, "socket": socket})

    assert series("kubejoule_zone_energy_joules_total", "package", "0") == 70.0
    assert series("kubejoule_zone_power_watts", "package", "0") == 35.0
    assert series("kubejoule_zone_energy_joules_total", "dram", "0") == 10.0
    assert series("kubejoule_zone_energy_joules_total", "package", "1") == 50.0
    assert series("kubejoule_zone_energy_joules_total", "core", "1") == 20.0
    assert series("kubejoule_zone_energy_joules_total", "psys", "") == 200.0
    kinds = {labels["zone"] for labels in exposed_series(registry, "kubejoule_zone_energy_joules_total")}
    assert kinds == {"package", "dram", "core", "psys"}
    # one die unknown: the socket's package gauge goes, its counter holds
    collector.accounts.add(snapshot(zones=(zone("package-0-die-0", "intel-rapl:0", 0, None), *zones[1:])))
    assert series("kubejoule_zone_power_watts", "package", "0") is None
    assert series("kubejoule_zone_energy_joules_total", "package", "0") == 70.0
    assert series("kubejoule_zone_energy_joules_total", "package", "1") == 100.0


def exposed_series(registry: CollectorRegistry, name: str) -> list[dict[str, str]]:
    return [s.labels for family in registry.collect() for s in family.samples if s.name == name]


def test_the_collector_only_reads_scrapes_never_add_and_each_published_snapshot_counts_once() -> None:
    """Cumulative energy lives in the monitor's EnergyAccounts: the sampling loop adds each
    Snapshot once, and any number of scrapes read the same totals (the exporter is a pure reader:
    it has no method that changes them)."""
    accounts = EnergyAccounts()
    collector = SnapshotCollector(accounts)
    registry = registry_with(collector)
    assert not hasattr(collector, "update") and not hasattr(collector, "count_error")
    assert registry.get_sample_value("kubejoule_node_energy_joules_total", {"node": "n1", "source": "rapl"}) is None
    accounts.add(snapshot(node_watts=50.0, interval=2.0))
    for _ in range(3):  # three scrapes of one interval: 100 J, not 300
        assert registry.get_sample_value("kubejoule_node_energy_joules_total", {"node": "n1", "source": "rapl"}) == 100.0
    accounts.add(snapshot(node_watts=30.0, interval=2.0))
    assert registry.get_sample_value("kubejoule_node_energy_joules_total", {"node": "n1", "source": "rapl"}) == 160.0
    assert accounts.read().latest is accounts.latest and accounts.read().latest.node_watts == 30.0
