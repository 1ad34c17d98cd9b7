"""Prometheus exposition of the latest Snapshot: a custom collector, built per scrape.

The sampler hands each new Snapshot to `SnapshotCollector.update()`, which also adds the
interval's energy to the running totals (so `_joules_total` counters are sums of measured,
wrap-corrected interval energies: monotonic whatever the RAPL counters did). `collect()` only
reads; it never touches the host. Tests register the collector in a fresh `CollectorRegistry`.

Levels keep cardinality low by default: node series always; pods and VMs by default;
containers (`containers=True`) and the top N processes (`process_top=N`) only when asked. A
value that is unknown has no series — never a 0 in its place. Labels never carry a command
line: processes are labelled with `pid` and `comm` only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent.snapshot import SOURCE_ESTIMATED, Gap, Snapshot, VMPower, ZonePower

PREFIX = "kubejoule_"
_Item = TypeVar("_Item")

# errors_total kinds that always exist (at 0 until they happen), so rate() works from the start.
ERROR_KINDS = ("rapl", "procstat", "cgroup", "process", "invariant", "read_skew", "sample")


def error_kind(gap: Gap) -> str | None:
    """The errors_total kind a gap counts as; None for gaps that only follow from another."""
    what = gap.what
    if what == "node" or what.startswith("zone"):
        return "rapl"
    if what == "cpu":
        return "procstat"
    if what == "cgroups":
        return "cgroup"
    if what == "processes":
        return "process"
    if what in ("idle split", "attribution"):
        return None  # a consequence of a cpu or rapl gap, already counted
    if what in ("network", "pod network"):
        return "network"
    return "other"


@dataclass(frozen=True)
class ExportLevels:
    pods: bool = True
    vms: bool = True
    containers: bool = False
    process_top: int = 0


@dataclass
class _Totals:
    """Energy summed over intervals, in joules, per series key; and error counts."""

    node: dict[str, float] = field(default_factory=dict)  # by source
    zones: dict[tuple[str, str], float] = field(default_factory=dict)  # by (zone, socket)
    pods: dict[str, float] = field(default_factory=dict)  # by uid
    vms: dict[tuple[str, str], float] = field(default_factory=dict)  # by (name, uuid)
    errors: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ERROR_KINDS, 0.0))


def _label(value: object) -> str:
    return "" if value is None else str(value)


def _zone_key(zone: ZonePower) -> tuple[str, str]:
    return zone.zone, _label(zone.socket)


def _vm_key(vm: VMPower) -> tuple[str, str]:
    return vm.name, _label(vm.uuid)


def _series(items: Iterable[_Item], key: Callable[[_Item], tuple[str, str]]) -> dict[tuple[str, str], _Item]:
    """One item per series (label values): the first, where two share them (two zones with one
    name on one socket, two qemu processes with one name and uuid). Totals and gauges use the
    same choice, so a counter always belongs to the series it is exposed with."""
    series: dict[tuple[str, str], _Item] = {}
    for item in items:
        series.setdefault(key(item), item)
    return series


class SnapshotCollector(Collector):
    """Exposes the latest Snapshot and the energy totals over all snapshots seen."""

    def __init__(
        self,
        levels: ExportLevels | None = None,
        model_points: Iterable[tuple[float, float]] = (),
    ) -> None:
        self.levels = levels or ExportLevels()
        self.model_points = tuple(model_points)  # (utilization, watts) of a calibrated curve
        self._lock = threading.Lock()
        self._latest: Snapshot | None = None
        self._totals = _Totals()

    @property
    def latest(self) -> Snapshot | None:
        return self._latest

    def count_error(self, kind: str, count: int = 1) -> None:
        """Count errors that are not in a snapshot (a failed sample, an unreachable API)."""
        with self._lock:
            self._totals.errors[kind] = self._totals.errors.get(kind, 0.0) + count

    def update(self, snapshot: Snapshot) -> None:
        """Publish a new snapshot and add its interval's energy to the totals."""
        interval = snapshot.interval_seconds
        with self._lock:
            totals = self._totals
            if snapshot.node_watts is not None:
                totals.node[snapshot.source] = totals.node.get(snapshot.source, 0.0) + max(
                    snapshot.node_watts * interval, 0.0
                )
            for key, zone in _series(snapshot.zones, _zone_key).items():
                if zone.energy_joules is not None:
                    totals.zones[key] = totals.zones.get(key, 0.0) + max(zone.energy_joules, 0.0)
            totals.pods = {
                pod.uid: totals.pods.get(pod.uid, 0.0) + max((pod.watts or 0.0) * interval, 0.0)
                for pod in snapshot.pods
                if pod.watts is not None or pod.uid in totals.pods
            }
            totals.vms = {
                key: totals.vms.get(key, 0.0) + max((vm.watts or 0.0) * interval, 0.0)
                for key, vm in _series(snapshot.vms, _vm_key).items()
                if vm.watts is not None or key in totals.vms
            }
            for gap in snapshot.gaps:
                kind = error_kind(gap)
                if kind is not None:
                    totals.errors[kind] = totals.errors.get(kind, 0.0) + 1
            if snapshot.invariant_breached:
                totals.errors["invariant"] += 1
            if snapshot.skew_scaled:
                totals.errors["read_skew"] += 1
            self._latest = snapshot

    def describe(self) -> Iterable[Metric]:
        return []  # series depend on the snapshot; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snap = self._latest
            totals = _Totals(
                dict(self._totals.node), dict(self._totals.zones), dict(self._totals.pods),
                dict(self._totals.vms), dict(self._totals.errors),
            )
        node = snap.node if snap is not None else ""
        errors = CounterMetricFamily(
            PREFIX + "agent_errors", "Errors by kind: gaps in samples, failed samples, invariant breaches, "
            "read-skew scaling.", labels=["node", "kind"],
        )
        for kind, count in sorted(totals.errors.items()):
            errors.add_metric([node, kind], count)
        if snap is None:
            yield errors
            return
        yield from self._node(snap, totals)
        if self.levels.pods:
            yield from self._pods(snap, totals)
        if self.levels.containers:
            yield from self._containers(snap)
        if self.levels.vms:
            yield from self._vms(snap, totals)
        if self.levels.process_top > 0:
            yield from self._processes(snap)
        yield from self._metrics_server(snap)
        yield from self._network(snap)
        yield errors

    def _node(self, snap: Snapshot, totals: _Totals) -> Iterator[Metric]:
        node = snap.node
        power = GaugeMetricFamily(PREFIX + "node_power_watts", "Node power.", labels=["node", "source"])
        if snap.node_watts is not None:
            power.add_metric([node, snap.source], snap.node_watts)
        yield power
        energy = CounterMetricFamily(
            PREFIX + "node_energy_joules", "Node energy since the agent started.", labels=["node", "source"]
        )
        for source, joules in sorted(totals.node.items()):
            energy.add_metric([node, source], joules)
        yield energy
        idle = GaugeMetricFamily(
            PREFIX + "node_idle_power_watts", "Idle (static) part of node power.",
            labels=["node", "source", "idle_source"],
        )
        active = GaugeMetricFamily(
            PREFIX + "node_active_power_watts", "Active (dynamic) part of node power.",
            labels=["node", "source", "idle_source"],
        )
        if snap.idle_watts is not None:
            idle.add_metric([node, snap.source, snap.idle_source], snap.idle_watts)
        if snap.active_watts is not None:
            active.add_metric([node, snap.source, snap.idle_source], snap.active_watts)
        yield idle
        yield active
        zone_power = GaugeMetricFamily(
            PREFIX + "zone_power_watts", "RAPL zone power.", labels=["node", "zone", "socket"]
        )
        for key, zone in _series(snap.zones, _zone_key).items():
            if zone.watts is not None:
                zone_power.add_metric([node, *key], zone.watts)
        yield zone_power
        zone_energy = CounterMetricFamily(
            PREFIX + "zone_energy_joules", "RAPL zone energy since the agent started.",
            labels=["node", "zone", "socket"],
        )
        for key, joules in sorted(totals.zones.items()):
            zone_energy.add_metric([node, *key], joules)
        yield zone_energy
        host = GaugeMetricFamily(
            PREFIX + "host_power_watts", "Active power of everything not in a pod.", labels=["node"]
        )
        if snap.host_watts is not None:
            host.add_metric([node], snap.host_watts)
        yield host
        utilization = GaugeMetricFamily(
            PREFIX + "node_cpu_utilization_ratio", "Busy share of CPU time in the interval.", labels=["node"]
        )
        if snap.cpu_utilization is not None:
            utilization.add_metric([node], snap.cpu_utilization)
        yield utilization
        if self.model_points:
            model = GaugeMetricFamily(
                PREFIX + "node_power_model_watts", "Calibrated power curve of the node.",
                labels=["node", "utilization"],
            )
            for level, watts in self.model_points:
                model.add_metric([node, f"{level:.1f}"], watts)
            yield model
        wall_watts = snap.extra_value("wall_watts")
        if wall_watts is not None:  # only with a calibration profile's wall correction
            wall = GaugeMetricFamily(
                PREFIX + "node_wall_power_watts",
                "Node power at the wall: node power through the calibrated RAPL-to-wall correction.",
                labels=["node", "source"],
            )
            wall.add_metric([node, SOURCE_ESTIMATED], wall_watts)
            yield wall
        timestamp = GaugeMetricFamily(
            PREFIX + "sample_timestamp_seconds", "Wall-clock time of the latest sample.", labels=["node"]
        )
        timestamp.add_metric([node], snap.timestamp)
        yield timestamp

    def _pods(self, snap: Snapshot, totals: _Totals) -> Iterator[Metric]:
        labels = ["node", "namespace", "pod", "pod_uid"]
        power = GaugeMetricFamily(PREFIX + "pod_power_watts", "Pod power.", labels=labels)
        energy = CounterMetricFamily(PREFIX + "pod_energy_joules", "Pod energy since the agent started.", labels=labels)
        for pod in snap.pods:
            values = [snap.node, _label(pod.namespace), _label(pod.name), pod.uid]
            if pod.watts is not None:
                power.add_metric(values, pod.watts)
            if pod.uid in totals.pods:
                energy.add_metric(values, totals.pods[pod.uid])
        yield power
        yield energy

    def _containers(self, snap: Snapshot) -> Iterator[Metric]:
        power = GaugeMetricFamily(
            PREFIX + "container_power_watts", "Container power.",
            labels=["node", "namespace", "pod", "container", "container_id"],
        )
        for pod in snap.pods:
            for container in pod.containers:
                if container.watts is not None:
                    power.add_metric(
                        [snap.node, _label(pod.namespace), _label(pod.name), _label(container.name), container.id],
                        container.watts,
                    )
        yield power

    def _vms(self, snap: Snapshot, totals: _Totals) -> Iterator[Metric]:
        labels = ["node", "vm", "vm_uuid"]
        power = GaugeMetricFamily(PREFIX + "vm_power_watts", "Virtual machine (qemu/KVM) power.", labels=labels)
        energy = CounterMetricFamily(
            PREFIX + "vm_energy_joules", "Virtual machine energy since the agent started.", labels=labels
        )
        for key, vm in _series(snap.vms, _vm_key).items():
            if vm.watts is not None:
                power.add_metric([snap.node, *key], vm.watts)
            if key in totals.vms:
                energy.add_metric([snap.node, *key], totals.vms[key])
        yield power
        yield energy

    def _processes(self, snap: Snapshot) -> Iterator[Metric]:
        power = GaugeMetricFamily(
            PREFIX + "process_power_watts", "Power of the processes using the most.", labels=["node", "pid", "comm"]
        )
        for proc in snap.processes[: self.levels.process_top]:
            if proc.watts is not None:
                power.add_metric([snap.node, str(proc.pid), proc.comm], proc.watts)
        yield power

    # Sections added by agent/metrics_server.py and agent/network.py (plain record data in
    # Snapshot.extra); absent sections give empty families, never zeros.

    def _metrics_server(self, snap: Snapshot) -> Iterator[Metric]:
        section = snap.extra_value("metrics_server") or {}
        node_usage = section.get("node") or {}
        pod_labels = ["node", "namespace", "pod", "pod_uid"]
        families = {
            "node_cpu_usage_cores": ("Node CPU usage from Metrics Server (metrics.k8s.io), in cores.", ["node"]),
            "node_memory_working_set_bytes": ("Node memory working set from Metrics Server.", ["node"]),
            "pod_cpu_usage_cores": ("Pod CPU usage from Metrics Server, in cores.", pod_labels),
            "pod_memory_working_set_bytes": ("Pod memory working set from Metrics Server.", pod_labels),
            "metrics_server_age_seconds": ("Age of the Metrics Server data: sample time minus its timestamp.", ["node"]),
        }
        out = {name: GaugeMetricFamily(PREFIX + name, text, labels=labels) for name, (text, labels) in families.items()}
        if section:
            out["metrics_server_age_seconds"].add_metric([snap.node], section["age_seconds"])
        for key, name in (("cpu_cores", "node_cpu_usage_cores"), ("memory_working_set_bytes", "node_memory_working_set_bytes")):
            if node_usage.get(key) is not None:
                out[name].add_metric([snap.node], node_usage[key])
        if self.levels.pods:
            for pod in section.get("pods") or []:
                values = [snap.node, _label(pod["namespace"]), _label(pod["name"]), pod["uid"]]
                if pod.get("cpu_cores") is not None:
                    out["pod_cpu_usage_cores"].add_metric(values, pod["cpu_cores"])
                if pod.get("memory_working_set_bytes") is not None:
                    out["pod_memory_working_set_bytes"].add_metric(values, pod["memory_working_set_bytes"])
        yield from out.values()

    def _network(self, snap: Snapshot) -> Iterator[Metric]:
        section = snap.extra_value("network") or {}
        node_bytes = CounterMetricFamily(
            PREFIX + "node_network_bytes", "Bytes through the node's network interfaces (kernel counters; "
            "loopback and veth left out).", labels=["node", "interface", "direction"],
        )
        for interface in section.get("interfaces") or []:
            for direction in ("rx", "tx"):
                node_bytes.add_metric([snap.node, interface["interface"], direction], interface[f"{direction}_bytes"])
        yield node_bytes
        if not self.levels.pods:
            return
        pod_bytes = CounterMetricFamily(
            PREFIX + "pod_network_bytes", "Bytes through a pod's own interfaces, loopback left out (none for "
            "host-network pods: theirs are the node's).", labels=["node", "namespace", "pod", "pod_uid", "direction"],
        )
        for pod in section.get("pods") or []:
            if pod.get("host_network"):
                continue
            for direction in ("rx", "tx"):
                value = pod.get(f"{direction}_bytes")
                if value is not None:
                    pod_bytes.add_metric(
                        [snap.node, _label(pod.get("namespace")), _label(pod.get("name")), pod["uid"], direction], value
                    )
        yield pod_bytes
