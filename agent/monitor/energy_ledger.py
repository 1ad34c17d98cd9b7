"""Cumulative energy over every Snapshot. Each interval is resolved once into its series
(`interval_energy`: which series each part of the Snapshot belongs to — its key and its label
values — with its watts and joules), added to the running totals by the counters' rules
(agent/monitor/counters.py), and its errors are counted by kind. `EnergyLedger.add` returns the
`TotalsView` it publishes: the interval's series beside the joules so far, which the exporter
reads and computes nothing from, and whose interval the carbon ledger turns into grams
(agent/monitor/carbon_ledger.py) without coming back here.

What a series is is decided here once (`zone_series`, `pod_components`, `one_per_series`), for
the totals, the grams and the gauges exposed beside them, so a counter always belongs to the
series it is exposed with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from agent.device.gaps import GAP_IMPLAUSIBLE, Gap, Subject
from agent.monitor.counters import EntityTotals, Key, add_energy
from agent.monitor.gpu_power import GpuPower
from agent.monitor.snapshot import PodPower, Snapshot, VMPower, ZonePower

_Item = TypeVar("_Item")

Labels = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Series(Generic[Key]):
    """One series in one interval: what its counter is kept by (`key`), its label values (the
    node's left out), the interval's watts and joules (None: unknown)."""

    key: Key
    labels: Labels
    watts: float | None
    joules: float | None


@dataclass(frozen=True, slots=True)
class PodSeries(Series[tuple[str, str]]):
    """A pod's series, one per component (`pod_components`): kept by (uid, component), labelled
    (namespace, pod, uid, component); its grams add up by namespace."""

    namespace: str


@dataclass(frozen=True, slots=True)
class GpuSeries(Series[tuple[str, str, str]]):
    """A GPU's series, kept by and labelled (index, uuid, name), with how it is measured."""

    method: str
    mode: str


@dataclass(frozen=True)
class IntervalEnergy:
    """One interval's energy, every series resolved once: what the ledger adds to its totals, the
    carbon ledger turns into grams, and the exporter shows as gauges beside their counters. Joules
    of the node's parts (node, idle, active, host, ...); None: unknown."""

    timestamp: float  # the interval's end, wall clock
    seconds: float
    source: str  # of node power
    node: float | None
    split: tuple[str, str]  # (source, idle source): the idle and active series' key
    idle: float | None
    active: float | None
    host: float | None
    zones: tuple[Series[tuple[str, str]], ...]  # by (zone kind, socket): the dies of a package add up
    pods: tuple[PodSeries, ...]
    containers: tuple[Series[str], ...]  # with the container level; by container id
    vms: tuple[Series[tuple[str, str]], ...]  # with the VM level; one per (name, uuid)
    # with a process level: every busy process's joules by (pid, comm), for the counters (the
    # gauges are the Snapshot's top N, labelled by pid and comm as they are)
    processes: tuple[tuple[tuple[int, str], float | None], ...]
    gpus: tuple[GpuSeries, ...]
    gpu_unattributed: float | None
    platform_other: float | None  # None also without a platform reading


@dataclass
class Totals:
    """Every counter the collector exposes, in joules (errors in counts)."""

    node: dict[str, float] = field(default_factory=dict)  # by source
    idle: dict[tuple[str, str], float] = field(default_factory=dict)  # by (source, idle_source)
    active: dict[tuple[str, str], float] = field(default_factory=dict)  # by (source, idle_source)
    zones: dict[tuple[str, str], float] = field(default_factory=dict)  # by (zone kind, socket)
    host: dict[str, float] = field(default_factory=dict)  # one series: key ""
    pods: EntityTotals[tuple[str, str]] = field(default_factory=EntityTotals)  # by (uid, component)
    containers: EntityTotals[str] = field(default_factory=EntityTotals)  # by container id
    vms: EntityTotals[tuple[str, str]] = field(default_factory=EntityTotals)  # by (name, uuid)
    processes: EntityTotals[tuple[int, str]] = field(default_factory=EntityTotals)  # by (pid, comm)
    gpus: EntityTotals[tuple[str, str, str]] = field(default_factory=EntityTotals)  # by (index, uuid, name)
    gpu_unattributed: dict[str, float] = field(default_factory=dict)  # one series: key ""
    platform_other: dict[str, float] = field(default_factory=dict)  # one series: key ""
    errors: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TotalsView:
    """What the ledger publishes after each interval, for readers to read and compute nothing from:
    the interval's series (the gauges, labels resolved) and the joules so far (the counters), by
    series key. Copied once, as published: the sampling thread never changes it afterwards."""

    interval: IntervalEnergy
    node: Mapping[str, float]
    idle: Mapping[tuple[str, str], float]
    active: Mapping[tuple[str, str], float]
    zones: Mapping[tuple[str, str], float]
    host: float | None
    pods: Mapping[tuple[str, str], float]
    containers: Mapping[str, float]
    vms: Mapping[tuple[str, str], float]
    processes: Mapping[tuple[int, str], float]
    gpus: Mapping[tuple[str, str, str], float]
    gpu_unattributed: float | None
    platform_other: float | None


# errors_total kinds that always exist (at 0 until they happen), so rate() works from the start.
ERROR_KINDS = ("rapl", "procstat", "cgroup", "process", "invariant", "read_skew", "sample")


# errors_total kind per gap subject; None for gaps that only follow from another (a pod's and a
# container's depend on the gap's kind: error_kind)
_ERROR_KIND: dict[Subject, str | None] = {
    Subject.NODE: "rapl", Subject.RAPL: "rapl", Subject.ZONE: "rapl",
    Subject.GPU: "gpu",
    Subject.PLATFORM: "platform",
    Subject.CPU: "procstat",
    Subject.CGROUPS: "cgroup",
    Subject.PROCESSES: "process",
    Subject.HOST: None,  # follows from a pod's gap
    Subject.IDLE_SPLIT: None,  # a consequence of a cpu or rapl gap, already counted
    Subject.ATTRIBUTION: None,
    Subject.HOST_ENERGY: None,  # the host's counter not written since the last read: its energy comes next
    Subject.NETWORK: "network", Subject.POD_NETWORK: "network",
}


def error_kind(gap: Gap) -> str | None:
    """The errors_total kind a gap counts as; None for gaps that only follow from another."""
    if gap.subject in (Subject.POD, Subject.CONTAINER):
        # a corrupt value read is an error of its own; an unreadable file is already a cgroups gap
        return "cgroup" if gap.kind == GAP_IMPLAUSIBLE else None
    return _ERROR_KIND.get(gap.subject, "other")


@dataclass(frozen=True)
class ExportLevels:
    pods: bool = True
    vms: bool = True
    containers: bool = False
    process_top: int = 0


def interval_joules(watts: float | None, interval_seconds: float) -> float | None:
    return None if watts is None else watts * interval_seconds


def label(value: object) -> str:
    return "" if value is None else str(value)


def zone_key(zone: ZonePower) -> tuple[str, str]:
    return zone.kind, label(zone.socket)


def zone_series(zones: Iterable[ZonePower]) -> tuple[Series[tuple[str, str]], ...]:
    """One series per (zone kind, socket): zones of one kind on one socket (the dies of a
    package) add up; one unknown member makes the series' value unknown."""
    series: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for zone in zones:
        key = zone_key(zone)
        if key not in series:
            series[key] = (zone.watts, zone.energy_joules)
            continue
        watts, joules = series[key]
        series[key] = (
            None if watts is None or zone.watts is None else watts + zone.watts,
            None if joules is None or zone.energy_joules is None else joules + zone.energy_joules,
        )
    return tuple(Series(key, key, watts, joules) for key, (watts, joules) in series.items())


def pod_components(pod: PodPower) -> list[tuple[str, float | None]]:
    """A pod's series: its CPU-side share, and its GPU share when it holds or used a GPU."""
    return [("cpu", pod.watts), ("gpu", pod.gpu_watts)] if pod.gpu else [("cpu", pod.watts)]


def vm_key(vm: VMPower) -> tuple[str, str]:
    return vm.name, label(vm.uuid)


def gpu_key(gpu: GpuPower) -> tuple[str, str, str]:
    """A GPU's series labels (besides the node): its index, UUID and name."""
    return str(gpu.index), gpu.uuid, gpu.name


def one_per_series(items: Iterable[_Item], key: Callable[[_Item], tuple[str, str]]) -> dict[tuple[str, str], _Item]:
    """One item per series (label values): the first, where two share them (two zones with one
    name on one socket, two qemu processes with one name and uuid). Totals and gauges use the
    same choice, so a counter always belongs to the series it is exposed with."""
    series: dict[tuple[str, str], _Item] = {}
    for item in items:
        series.setdefault(key(item), item)
    return series


def interval_energy(snapshot: Snapshot, levels: ExportLevels) -> IntervalEnergy:
    """The Snapshot's series and their energy in its interval, at the levels exported (pods
    always: their grams are counted whatever is exported)."""
    seconds = snapshot.interval_seconds
    platform = snapshot.platform
    pods = tuple(
        PodSeries((pod.uid, component), (label(pod.namespace), label(pod.name), pod.uid, component), watts,
                  interval_joules(watts, seconds), label(pod.namespace))
        for pod in snapshot.pods
        for component, watts in pod_components(pod)
    )
    containers = tuple(
        Series(c.id, (label(pod.namespace), label(pod.name), label(c.name), c.id), c.watts,
               interval_joules(c.watts, seconds))
        for pod in snapshot.pods
        for c in pod.containers
    ) if levels.containers else ()
    vms = tuple(
        Series(key, key, vm.watts, interval_joules(vm.watts, seconds))
        for key, vm in one_per_series(snapshot.vms, vm_key).items()
    ) if levels.vms else ()
    processes = tuple(
        ((p.pid, p.comm), interval_joules(p.watts, seconds)) for p in snapshot.busy_processes
    ) if levels.process_top > 0 else ()
    gpus = tuple(
        GpuSeries(gpu_key(g), gpu_key(g), g.watts, interval_joules(g.watts, seconds), g.method or "", g.mode)
        for g in snapshot.gpus
    )
    return IntervalEnergy(
        timestamp=snapshot.timestamp, seconds=seconds, source=snapshot.source,
        node=interval_joules(snapshot.node_watts, seconds), split=(snapshot.source, snapshot.idle_source),
        idle=interval_joules(snapshot.idle_watts, seconds), active=interval_joules(snapshot.active_watts, seconds),
        host=interval_joules(snapshot.host_watts, seconds), zones=zone_series(snapshot.zones), pods=pods,
        containers=containers, vms=vms, processes=processes, gpus=gpus,
        gpu_unattributed=interval_joules(snapshot.gpu_unattributed_watts, seconds) if gpus else None,
        platform_other=(interval_joules(platform.other_watts, seconds)
                        if platform is not None and platform.watts is not None else None),
    )


class EnergyLedger:
    """The totals over every snapshot added, at the levels exported. Not locked: its owner
    (agent/monitor/accounts.py) adds under its lock and publishes what `add` returns."""

    def __init__(self, levels: ExportLevels | None = None) -> None:
        self.levels = levels or ExportLevels()
        self.totals = Totals(errors=dict.fromkeys(ERROR_KINDS, 0.0))

    def count_error(self, kind: str, count: int = 1) -> None:
        """Count errors that are not in a snapshot (a failed sample, an unreachable API)."""
        self.totals.errors[kind] = self.totals.errors.get(kind, 0.0) + count

    def errors(self) -> dict[str, float]:
        """A copy of the error counts by kind."""
        return dict(self.totals.errors)

    def add(self, snapshot: Snapshot) -> TotalsView:
        """Add one interval's energy and errors to the totals; what readers see of them now."""
        self._count_errors(snapshot)
        interval = interval_energy(snapshot, self.levels)
        totals = self.totals
        add_energy(totals.node, interval.source, interval.node)
        add_energy(totals.idle, interval.split, interval.idle)
        add_energy(totals.active, interval.split, interval.active)
        add_energy(totals.host, "", interval.host)
        for zone in interval.zones:
            add_energy(totals.zones, zone.key, zone.joules)
        if interval.gpus:
            totals.gpus.advance((gpu.key, gpu.joules) for gpu in interval.gpus)
            add_energy(totals.gpu_unattributed, "", interval.gpu_unattributed)
        add_energy(totals.platform_other, "", interval.platform_other)
        if self.levels.pods:
            totals.pods.advance((pod.key, pod.joules) for pod in interval.pods)
        if self.levels.containers:
            totals.containers.advance((c.key, c.joules) for c in interval.containers)
        if self.levels.vms:
            totals.vms.advance((vm.key, vm.joules) for vm in interval.vms)
        if self.levels.process_top > 0:
            live = snapshot.live_pids
            totals.processes.advance(
                interval.processes,
                gone=[key for key in totals.processes.live if key[0] not in live],
            )
        # Entity maps are replaced, never changed, by EntityTotals.advance: no copy needed.
        return TotalsView(
            interval, dict(totals.node), dict(totals.idle), dict(totals.active), dict(totals.zones),
            totals.host.get(""), totals.pods.live, totals.containers.live, totals.vms.live, totals.processes.live,
            totals.gpus.live, totals.gpu_unattributed.get(""), totals.platform_other.get(""),
        )

    def _count_errors(self, snapshot: Snapshot) -> None:
        errors = self.totals.errors
        for gap in snapshot.gaps:
            kind = error_kind(gap)
            if kind is not None:
                errors[kind] = errors.get(kind, 0.0) + 1
        if snapshot.invariant_breached:
            errors["invariant"] += 1
        if snapshot.skew_scaled:
            errors["read_skew"] += 1
