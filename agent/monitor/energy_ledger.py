"""Cumulative energy over every Snapshot: each interval's energy added to the running totals
(agent/monitor/energy_totals.py's rules), and each interval's errors counted by kind. The
exporter reads a `TotalsView` of it and computes nothing.

What a series is — its key — is decided here once, for the totals and for the gauges exposed
beside them (`zone_series`, `pod_components`, `one_per_series`), so a counter always belongs
to the series it is exposed with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from agent.device.energy import zone_kind
from agent.device.gaps import GAP_IMPLAUSIBLE, Gap, Subject
from agent.monitor.energy_totals import Totals, TotalsView, add_energy
from agent.monitor.gpu_power import GpuPower
from agent.monitor.snapshot import PodPower, Snapshot, VMPower, ZonePower

_Item = TypeVar("_Item")

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
