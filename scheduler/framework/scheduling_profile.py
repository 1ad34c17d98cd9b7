"""A scheduling profile: filters, then Score plugins with weights, combined as kube-scheduler combines them.

kube-scheduler's scheduling cycle (`schedule_one.go`), for the feasible nodes of one pod:

1. every Score plugin scores every node; plugins with a NormalizeScore step normalize their
   scores over those nodes (0–100);
2. each plugin's normalized score is multiplied by the plugin's weight (a weight of 0 in a
   configuration means 1) and the products are summed per node;
3. each extender's 0–10 score enters as `score × weight × MaxNodeScore / MaxExtenderPriority`
   (× 10) — `ExtenderScore` below does that scaling, so an extender is one more weighted entry;
4. the node with the highest total wins; ties are broken uniformly at random (`select_best`).

A profile without Score plugins gives every node the same total (kube-scheduler scores 1 each).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.domain.filters import failure_summary
from scheduler.domain.model import PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.framework.interface import FilterPlugin, ScorePlugin, normalized

# Reservoir sampling draws once per tie, like kube-scheduler's selectHost; beyond this many
# ties one uniform draw gives the same distribution without thousands of RNG calls (all nodes
# tie when no telemetry has arrived yet).
RESERVOIR_TIES_LIMIT = 64


def select_best(totals: np.ndarray, rng: random.Random) -> int:
    """Index of the highest total; among equal best totals each is equally likely.

    Up to RESERVOIR_TIES_LIMIT ties, kube-scheduler's selectHost reservoir sampling, drawing
    `rng.randrange(k)` for the k-th tie (so a seeded run repeats); above it, one draw."""
    if len(totals) == 0:
        raise ValueError("no candidate to select from")
    best = totals.max()
    ties = np.flatnonzero(totals == best)
    if len(ties) == 1:
        return int(ties[0])
    if len(ties) > RESERVOIR_TIES_LIMIT:
        return int(ties[rng.randrange(len(ties))])
    chosen = int(ties[0])
    for seen, row in enumerate(ties[1:].tolist(), start=2):
        if rng.randrange(seen) == 0:
            chosen = row
    return chosen


def plugin_weight(weight: object) -> int:
    """A configured weight as kube-scheduler uses it: 0 means 1; negative is an error."""
    if isinstance(weight, bool) or not isinstance(weight, int | np.integer):
        raise ValueError(f"a plugin weight must be an integer, got {weight!r}")
    if weight < 0:
        raise ValueError(f"a plugin weight must be >= 0, got {weight}")
    return int(weight) or 1


@dataclass(frozen=True)
class Scored:
    """One pod's scores over a batch: each plugin's normalized scores and the weighted total."""

    names: tuple[str, ...]  # plugin names, in profile order
    weights: tuple[int, ...]
    plugin_scores: tuple[np.ndarray, ...]  # normalized, one array per plugin
    total: np.ndarray

    def of(self, plugin_name: str) -> np.ndarray:
        return self.plugin_scores[self.names.index(plugin_name)]


@dataclass
class SchedulingProfile:
    """Filters and weighted Score plugins (see the module docstring). Plugins run in order."""

    name: str
    filters: Sequence[FilterPlugin] = ()
    scores: Sequence[tuple[ScorePlugin, int]] = ()
    _weights: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.filters = tuple(self.filters)
        self.scores = tuple((plugin, plugin_weight(w)) for plugin, w in self.scores)
        self._weights = tuple(w for _, w in self.scores)
        names = [plugin.name for plugin, _ in self.scores]
        if len(set(names)) != len(names):
            raise ValueError(f"profile {self.name!r} lists a Score plugin twice: {names}")

    def plugin(self, name: str) -> ScorePlugin:
        for plugin, _ in self.scores:
            if plugin.name == name:
                return plugin
        raise KeyError(name)

    def feasible(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        """The rows every filter passes."""
        mask = np.ones(len(batch), dtype=bool)
        for plugin in self.filters:
            mask &= plugin.filter(pod, batch)
        return mask

    def failure_summary(self, pod: PodInfo, batch: CandidateBatch) -> str:
        """kube-scheduler's "0/N nodes are available: …" for a pod no node fits (each node's
        reasons from the first filter it fails, as the framework stops there)."""
        failures: dict[str, tuple[str, ...]] = {}
        masks = [plugin.filter(pod, batch) for plugin in self.filters]
        for row, state in enumerate(batch.states):
            for plugin, mask in zip(self.filters, masks, strict=True):
                if not mask[row]:
                    failures[state.info.name] = plugin.reasons(pod, state)
                    break
        return failure_summary(len(batch), failures)

    def score(
        self,
        pod: PodInfo,
        batch: CandidateBatch,
        given: Mapping[str, np.ndarray] | None = None,
    ) -> Scored:
        """Every plugin's normalized scores over the (feasible) batch and the weighted sum.
        `given`: normalized scores already computed for this pod and batch, by plugin name
        (the caller evaluated that plugin anyway, or another profile ran the same plugin)."""
        known = given or {}
        plugin_scores = tuple(
            known[plugin.name] if plugin.name in known else normalized(plugin, pod, batch)
            for plugin, _ in self.scores
        )
        if not plugin_scores:
            total = np.ones(len(batch), dtype=np.int64)
        else:
            total = plugin_scores[0] * self._weights[0]
            for scores, weight in zip(plugin_scores[1:], self._weights[1:], strict=True):
                total = total + scores * weight
        names = tuple(plugin.name for plugin, _ in self.scores)
        return Scored(names, self._weights, plugin_scores, np.asarray(total))
