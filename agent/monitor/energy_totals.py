"""The exporter's energy counters: joules summed over intervals, by the rules every
`_joules_total` series follows.

- A counter only grows: each interval adds its measured energy (never a negative one).
- An interval whose energy is unknown (a gap) adds nothing: the counter holds.
- A series that never had a known energy does not exist (no 0 in its place).
- A pod, container, VM or process that is gone takes its series with it; if the same key comes
  back (a pod missing from one cgroup read, a process back in the top N) its counter resumes
  where it stopped — never lower. The last `RETIRED_KEPT` gone keys are remembered for that.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

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
