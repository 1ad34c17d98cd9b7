"""The rules every `_total` series follows, joules (agent/monitor/energy_ledger.py) and grams
(agent/monitor/carbon_ledger.py) alike, in one place (`add_energy`, `EntityTotals`):

- A counter only grows: each interval adds its measured amount (never a negative one).
- An interval whose amount is unknown (a gap) adds nothing: the counter holds.
- A series that never had a known amount does not exist (no 0 in its place).
- A pod, container, VM or process that is gone takes its series with it; if the same key comes
  back (a pod missing from one cgroup read, a process back in the top N) its counter resumes
  where it stopped — never lower. The last `RETIRED_KEPT` gone keys are remembered for that.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
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
