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
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent.energy_totals import Totals, TotalsView, add_energy
from agent.exporter_sections import (
    gpu_families,
    gpu_key,
    metrics_server_families,
    network_families,
    node_family,
    platform_families,
    power_and_energy,
)
from agent.rapl import zone_kind
from agent.snapshot import (
    GAP_IMPLAUSIBLE,
    SOURCE_ESTIMATED,
    Gap,
    PodPower,
    Snapshot,
    VMPower,
    ZonePower,
)

PREFIX = "kubejoule_"
_Item = TypeVar("_Item")

# errors_total kinds that always exist (at 0 until they happen), so rate() works from the start.
ERROR_KINDS = ("rapl", "procstat", "cgroup", "process", "invariant", "read_skew", "sample")


def error_kind(gap: Gap) -> str | None:
    """The errors_total kind a gap counts as; None for gaps that only follow from another."""
    what = gap.what
    if what in ("node", "rapl") or what.startswith("zone"):
        return "rapl"
    if what.startswith("gpu "):
        return "gpu"
    if what == "platform":
        return "platform"
    if what == "cpu":
        return "procstat"
    if what == "cgroups":
        return "cgroup"
    if what == "processes":
        return "process"
    if what.startswith(("pod ", "container ")):
        # a corrupt value read is an error of its own; an unreadable file is already a cgroups gap
        return "cgroup" if gap.kind == GAP_IMPLAUSIBLE else None
    if what == "host":
        return None  # follows from a pod's gap
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


def _joules(watts: float | None, interval_seconds: float) -> float | None:
    return None if watts is None else watts * interval_seconds


def _label(value: object) -> str:
    return "" if value is None else str(value)


def _zone_key(zone: ZonePower) -> tuple[str, str]:
    return zone_kind(zone.zone), _label(zone.socket)


def _zone_series(zones: Iterable[ZonePower]) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """(watts, joules) per (zone kind, socket): zones of one kind on one socket (the dies of a
    package) add up; one unknown member makes the series' value unknown."""
    series: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for zone in zones:
        key = _zone_key(zone)
        if key not in series:
            series[key] = (zone.watts, zone.energy_joules)
            continue
        watts, joules = series[key]
        series[key] = (
            None if watts is None or zone.watts is None else watts + zone.watts,
            None if joules is None or zone.energy_joules is None else joules + zone.energy_joules,
        )
    return series


def _components(pod: PodPower) -> list[tuple[str, float | None]]:
    """A pod's series: its CPU-side share, and its GPU share when it holds or used a GPU."""
    return [("cpu", pod.watts), ("gpu", pod.gpu_watts)] if pod.gpu else [("cpu", pod.watts)]


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
        model_reading: str = "rapl",
    ) -> None:
        self.levels = levels or ExportLevels()
        self.model_points = tuple(model_points)  # (utilization, watts) of a calibrated curve
        # What the curve measures (the profile's `reading`): `rapl` (the CPU side: GPUs and the
        # rest of the platform are outside it) or `platform` (the BMC's whole-server reading).
        self.model_reading = model_reading
        self._lock = threading.Lock()
        self._latest: Snapshot | None = None
        self._totals = Totals(errors=dict.fromkeys(ERROR_KINDS, 0.0))

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
            self._add_node_energy(snapshot, totals)
            if self.levels.pods:
                totals.pods.advance(
                    ((pod.uid, component), _joules(watts, interval))
                    for pod in snapshot.pods
                    for component, watts in _components(pod)
                )
            if self.levels.containers:
                totals.containers.advance(
                    (c.id, _joules(c.watts, interval)) for pod in snapshot.pods for c in pod.containers
                )
            if self.levels.vms:
                totals.vms.advance(
                    (key, _joules(vm.watts, interval)) for key, vm in _series(snapshot.vms, _vm_key).items()
                )
            if self.levels.process_top > 0:
                live = snapshot.live_pids
                totals.processes.advance(
                    (((p.pid, p.comm), _joules(p.watts, interval)) for p in snapshot.busy_processes),
                    gone=[key for key in totals.processes.live if key[0] not in live],
                )
            for gap in snapshot.gaps:
                kind = error_kind(gap)
                if kind is not None:
                    totals.errors[kind] = totals.errors.get(kind, 0.0) + 1
            if snapshot.invariant_breached:
                totals.errors["invariant"] += 1
            if snapshot.skew_scaled:
                totals.errors["read_skew"] += 1
            self._latest = snapshot

    @staticmethod
    def _add_node_energy(snapshot: Snapshot, totals: Totals) -> None:
        interval = snapshot.interval_seconds
        add_energy(totals.node, snapshot.source, _joules(snapshot.node_watts, interval))
        split = (snapshot.source, snapshot.idle_source)
        add_energy(totals.idle, split, _joules(snapshot.idle_watts, interval))
        add_energy(totals.active, split, _joules(snapshot.active_watts, interval))
        add_energy(totals.host, "", _joules(snapshot.host_watts, interval))
        for key, (_, joules) in _zone_series(snapshot.zones).items():
            add_energy(totals.zones, key, joules)
        if snapshot.gpus:
            totals.gpus.advance((gpu_key(g), _joules(g.watts, interval)) for g in snapshot.gpus)
            add_energy(totals.gpu_unattributed, "", _joules(snapshot.gpu_unattributed_watts, interval))
        if snapshot.platform is not None and snapshot.platform.watts is not None:
            add_energy(totals.platform_other, "", _joules(snapshot.platform.other_watts, interval))

    def describe(self) -> Iterable[Metric]:
        return []  # series depend on the snapshot; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snap = self._latest
            totals = TotalsView.of(self._totals)
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
            yield from self._containers(snap, totals)
        if self.levels.vms:
            yield from self._vms(snap, totals)
        if self.levels.process_top > 0:
            yield from self._processes(snap, totals)
        yield from gpu_families(snap, totals.gpus, totals.gpu_unattributed.get(""))
        yield from platform_families(snap, totals.platform_other.get(""))
        yield from metrics_server_families(snap, self.levels.pods)
        yield from network_families(snap, self.levels.pods)
        yield errors

    def _node(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
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
        for part, totals_of_part in (("idle", totals.idle), ("active", totals.active)):
            part_energy = CounterMetricFamily(
                PREFIX + f"node_{part}_energy_joules", f"{part.capitalize()} part of node energy since the agent "
                "started.", labels=["node", "source", "idle_source"],
            )
            for key, joules in sorted(totals_of_part.items()):
                part_energy.add_metric([node, *key], joules)
            yield part_energy
        zone_power = GaugeMetricFamily(
            PREFIX + "zone_power_watts", "RAPL zone power, by zone kind and socket.", labels=["node", "zone", "socket"]
        )
        for key, (watts, _) in _zone_series(snap.zones).items():
            if watts is not None:
                zone_power.add_metric([node, *key], watts)
        yield zone_power
        zone_energy = CounterMetricFamily(
            PREFIX + "zone_energy_joules", "RAPL zone energy since the agent started, by zone kind and socket.",
            labels=["node", "zone", "socket"],
        )
        for key, joules in sorted(totals.zones.items()):
            zone_energy.add_metric([node, *key], joules)
        yield zone_energy
        yield node_family(
            GaugeMetricFamily, "host_power_watts", "Active power of everything not in a pod.", node, snap.host_watts
        )
        yield node_family(
            CounterMetricFamily, "host_energy_joules",
            "Active energy of everything not in a pod since the agent started.", node, totals.host.get(""),
        )
        yield node_family(
            GaugeMetricFamily, "node_cpu_utilization_ratio", "Busy share of CPU time in the interval.", node,
            snap.cpu_utilization,
        )
        if self.model_points:
            model = GaugeMetricFamily(
                PREFIX + "node_power_model_watts", "Calibrated power curve of the node (reading: what it "
                "measures, rapl = the CPU side, platform = the whole server).",
                labels=["node", "utilization", "reading"],
            )
            for level, watts in self.model_points:
                model.add_metric([node, f"{level:.1f}", self.model_reading], watts)
            yield model
        wall_watts = snap.extra_value("wall_watts")
        if wall_watts is not None:  # only with a power profile's wall correction
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

    def _pods(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            "pod", "Pod power, by component: its share of the CPU side (cpu) and of the GPUs (gpu).",
            "Pod energy since the agent started, by component.",
            ["node", "namespace", "pod", "pod_uid", "component"],
            (
                ([snap.node, _label(pod.namespace), _label(pod.name), pod.uid, component], watts,
                 totals.pods.get((pod.uid, component)))
                for pod in snap.pods
                for component, watts in _components(pod)
            ),
        )

    def _containers(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            "container", "Container power.", "Container energy since the agent started.",
            ["node", "namespace", "pod", "container", "container_id"],
            (
                ([snap.node, _label(pod.namespace), _label(pod.name), _label(container.name), container.id],
                 container.watts, totals.containers.get(container.id))
                for pod in snap.pods
                for container in pod.containers
            ),
        )

    def _vms(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            "vm", "Virtual machine (qemu/KVM) power.", "Virtual machine energy since the agent started.",
            ["node", "vm", "vm_uuid"],
            (([snap.node, *key], vm.watts, totals.vms.get(key)) for key, vm in _series(snap.vms, _vm_key).items()),
        )

    def _processes(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            "process", "Power of the processes using the most.",
            "Energy of the processes using the most power, since the agent started (or the process did).",
            ["node", "pid", "comm"],
            (
                ([snap.node, str(proc.pid), proc.comm], proc.watts, totals.processes.get((proc.pid, proc.comm)))
                for proc in snap.processes[: self.levels.process_top]
            ),
        )
