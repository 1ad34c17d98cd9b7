"""Cumulative energy over every Snapshot: each interval's energy added to the running totals,
and each interval's errors counted by kind. The exporter reads a `TotalsView` of it and computes
nothing.

The rules every `_joules_total` series follows (`add_energy`, `EntityTotals`; grams too,
agent/monitor/carbon_ledger.py):

- A counter only grows: each interval adds its measured energy (never a negative one).
- An interval whose energy is unknown (a gap) adds nothing: the counter holds.
- A series that never had a known energy does not exist (no 0 in its place).
- A pod, container, VM or process that is gone takes its series with it; if the same key comes
  back (a pod missing from one cgroup read, a process back in the top N) its counter resumes
  where it stopped — never lower. The last `RETIRED_KEPT` gone keys are remembered for that.

What a series is — its key — is decided here once, for the totals and for the gauges exposed
beside them (`zone_series`, `pod_components`, `one_per_series`), so a counter always belongs
to the series it is exposed with.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from agent.device.energy import zone_kind
from agent.device.gaps import GAP_IMPLAUSIBLE, Gap, Subject
from agent.monitor.gpu_power import GpuPower
from agent.monitor.snapshot import PodPower, Snapshot, VMPower, ZonePower

_Item = TypeVar("_Item")

Key = TypeVar("Key", bound=Hashable)

RETIRED_KEPT = 4096


def add_energy(totals: dict[Key, float], key: Key, joules: float | None) -> None:
    """Add one interval's energy to a series that always exists once known (node, zone, host)."""
    if joules is not None:
        totals[key] = totals.get(key, 0.0) + max(joules, 0.0)


class EntityTotals(Generic[Key]):
    """Energy per entity that comes and goes (pods, containers, VMs, processes)."""

    def __init__(self, retired_kept: int = RETIRED_KEPT) -> None:
        self.live: dict[Key, float] = {}
        self._retired: OrderedDict[Key, float] = OrderedDict()
        self._retired_kept = retired_kept

    def advance(self, present: Iterable[tuple[Key, float | None]], gone: Iterable[Key] | None = None) -> None:
        """One interval: `present` are the entities there now with their energy (None: unknown).
        Entities not in `present` are gone — or, when `gone` is given, only those in it are
        (the others hold: e.g. processes alive but idle this interval)."""
        live: dict[Key, float] = {} if gone is None else dict(self.live)
        for key, joules in present:
            total = self.live.get(key)
            if total is None:
                total = self._retired.pop(key, None)
            if total is None and joules is None:
                continue  # never known: no series
            live[key] = (total or 0.0) + max(joules or 0.0, 0.0)
        if gone is None:
            leaving = {key: total for key, total in self.live.items() if key not in live}
        else:
            leaving = {key: live.pop(key) for key in gone if key in live}
        for key, total in leaving.items():
            self._retired[key] = total
            self._retired.move_to_end(key)
        while len(self._retired) > self._retired_kept:
            self._retired.popitem(last=False)
        self.live = live

    def get(self, key: Key) -> float | None:
        return self.live.get(key)


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
    """A copy taken under the collector's lock, for one scrape to read."""

    node: Mapping[str, float]
    idle: Mapping[tuple[str, str], float]
    active: Mapping[tuple[str, str], float]
    zones: Mapping[tuple[str, str], float]
    host: Mapping[str, float]
    pods: Mapping[tuple[str, str], float]
    containers: Mapping[str, float]
    vms: Mapping[tuple[str, str], float]
    processes: Mapping[tuple[int, str], float]
    gpus: Mapping[tuple[str, str, str], float]
    gpu_unattributed: Mapping[str, float]
    platform_other: Mapping[str, float]
    errors: Mapping[str, float]

    @classmethod
    def of(cls, totals: Totals) -> TotalsView:
        # Entity maps are replaced, never mutated, by EntityTotals.advance: no copy needed.
        return cls(
            dict(totals.node), dict(totals.idle), dict(totals.active), dict(totals.zones), dict(totals.host),
            totals.pods.live, totals.containers.live, totals.vms.live, totals.processes.live, totals.gpus.live,
            dict(totals.gpu_unattributed), dict(totals.platform_other), dict(totals.errors),
        )


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
    return zone_kind(zone.zone), label(zone.socket)


def zone_series(zones: Iterable[ZonePower]) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """(watts, joules) per (zone kind, socket): zones of one kind on one socket (the dies of a
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
    return series


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


class EnergyLedger:
    """The totals over every snapshot added, at the levels exported. Not locked: its owner
    (the collector) adds and reads under one lock, so a scrape sees a snapshot with its totals."""

    def __init__(self, levels: ExportLevels | None = None) -> None:
        self.levels = levels or ExportLevels()
        self.totals = Totals(errors=dict.fromkeys(ERROR_KINDS, 0.0))

    def count_error(self, kind: str, count: int = 1) -> None:
        """Count errors that are not in a snapshot (a failed sample, an unreachable API)."""
        self.totals.errors[kind] = self.totals.errors.get(kind, 0.0) + count

    def view(self) -> TotalsView:
        return TotalsView.of(self.totals)

    def add(self, snapshot: Snapshot) -> None:
        """Add one interval's energy and errors to the totals."""
        interval = snapshot.interval_seconds
        totals = self.totals
        self._add_node_energy(snapshot, totals)
        if self.levels.pods:
            totals.pods.advance(
                ((pod.uid, component), interval_joules(watts, interval))
                for pod in snapshot.pods
                for component, watts in pod_components(pod)
            )
        if self.levels.containers:
            totals.containers.advance(
                (c.id, interval_joules(c.watts, interval)) for pod in snapshot.pods for c in pod.containers
            )
        if self.levels.vms:
            totals.vms.advance(
                (key, interval_joules(vm.watts, interval)) for key, vm in one_per_series(snapshot.vms, vm_key).items()
            )
        if self.levels.process_top > 0:
            live = snapshot.live_pids
            totals.processes.advance(
                (((p.pid, p.comm), interval_joules(p.watts, interval)) for p in snapshot.busy_processes),
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

    @staticmethod
    def _add_node_energy(snapshot: Snapshot, totals: Totals) -> None:
        interval = snapshot.interval_seconds
        add_energy(totals.node, snapshot.source, interval_joules(snapshot.node_watts, interval))
        split = (snapshot.source, snapshot.idle_source)
        add_energy(totals.idle, split, interval_joules(snapshot.idle_watts, interval))
        add_energy(totals.active, split, interval_joules(snapshot.active_watts, interval))
        add_energy(totals.host, "", interval_joules(snapshot.host_watts, interval))
        for key, (_, joules) in zone_series(snapshot.zones).items():
            add_energy(totals.zones, key, joules)
        if snapshot.gpus:
            totals.gpus.advance((gpu_key(g), interval_joules(g.watts, interval)) for g in snapshot.gpus)
            add_energy(totals.gpu_unattributed, "", interval_joules(snapshot.gpu_unattributed_watts, interval))
        if snapshot.platform is not None and snapshot.platform.watts is not None:
            add_energy(totals.platform_other, "", interval_joules(snapshot.platform.other_watts, interval))
