"""Placement policies for the simulator, built on the scheduler's own scoring code.

| name | what it is |
|---|---|
| `default` | kube-scheduler: NodeResourcesFit LeastAllocated + BalancedAllocation, weight 1 each, best total, ties at random (`scheduler.kube_scoring.default_choice`) |
| `mostallocated` | the same with NodeResourcesFit's MostAllocated strategy (bin packing) |
| `roundrobin` | the next feasible node after the last one used, in node order (the old DQN project's baseline) |
| `peaks` | a profile of the PEAKS Score plugin alone (`scheduler.plugins.peaks`, with its NormalizeScore), each node's (k0, k1, k2) fitted to its curve |
| `trimaran` | a profile of the TargetLoadPacking Score plugin alone (`scheduler.plugins.trimaran`), target 40 % |
| `heuristic` | kubejoule's energy scorer (`scheduler.scorer.HeuristicScorer`) |
| `learned:PATH` | a learned model (`.npz`, or a `.pt` with its `.npz` beside it) served by the scheduler's numpy scorer (`scheduler.learned`), feature schema v2 with the simulator's node workloads |
| `py:MODULE:ATTR` | any `Scorer` (a model scorer, say): ATTR is a Scorer or a callable returning one, called with the node list |

Every scorer-based policy picks the highest score, ties at random with kube-scheduler's
reservoir sampling (`scheduler.kube_scoring.select_host`, `scheduler.framework.select_best` for
profiles), using the run's seeded RNG.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Sequence
from typing import Any, cast

from rl.scenario import NodeSpec
from rl.simulator import Policy, PowerOffModel
from scheduler.framework import CandidateBatch, Profile, select_best
from scheduler.kube_scoring import LEAST_ALLOCATED, MOST_ALLOCATED, default_choice, select_host
from scheduler.learned import LearnedScorer, load_numpy_model
from scheduler.model import NodeState, PodInfo, Scorer
from scheduler.plugins.peaks import Peaks, models_from_config
from scheduler.plugins.trimaran import TargetLoadPacking
from scheduler.scorer import HeuristicScorer

BUILTIN_POLICIES = ("default", "roundrobin", "mostallocated", "peaks", "trimaran", "heuristic")


class KubeDefaultPolicy:
    """kube-scheduler's default resource scoring, LeastAllocated or MostAllocated."""

    def __init__(self, strategy: str = LEAST_ALLOCATED, name: str = "default") -> None:
        self.strategy = strategy
        self.name = name
        self._rng = random.Random(0)

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self._rng = rng

    def choose(self, pod: PodInfo, feasible: Sequence[NodeState], now: float) -> str:
        choice = default_choice(pod, feasible, self._rng, self.strategy)
        assert choice is not None  # feasible is never empty
        return choice


class ProfilePolicy:
    """A scheduling profile as a policy: the best weighted total wins, ties at random."""

    def __init__(self, profile: Profile, name: str | None = None) -> None:
        self.profile = profile
        self.name = name or profile.name
        self._rng = random.Random(0)

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self._rng = rng

    def choose(self, pod: PodInfo, feasible: Sequence[NodeState], now: float) -> str:
        # The simulator has already filtered: only the Score half of the profile runs here.
        batch = CandidateBatch.of(feasible, now)
        return batch.names[select_best(self.profile.score(pod, batch).total, self._rng)]


class RoundRobinPolicy:
    """The first feasible node at or after the one following the last choice, in node order."""

    name = "roundrobin"

    def __init__(self) -> None:
        self._order: dict[str, int] = {}
        self._next = 0

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self._order = {n.name: i for i, n in enumerate(nodes)}
        self._next = 0

    def choose(self, pod: PodInfo, feasible: Sequence[NodeState], now: float) -> str:
        count = len(self._order)
        ranked = sorted(feasible, key=lambda s: (self._order[s.info.name] - self._next) % count)
        chosen = ranked[0].info.name
        self._next = (self._order[chosen] + 1) % count
        return chosen


class ScorerPolicy:
    """Any Scorer as a policy: the best score wins, ties broken at random like kube-scheduler."""

    def __init__(self, scorer: Scorer, name: str | None = None) -> None:
        self.scorer = scorer
        self.name = name or scorer.name
        self._rng = random.Random(0)

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self._rng = rng

    def choose(self, pod: PodInfo, feasible: Sequence[NodeState], now: float) -> str:
        results = self.scorer.score(pod, feasible, now)
        pairs = [(r.node, r.score) for r in results]
        # select_host compares with > and ==, which is exact for float scores as well.
        choice = select_host(cast("Sequence[tuple[str, int]]", pairs), self._rng)
        assert choice is not None
        return choice


class LearnedPolicy(ScorerPolicy):
    """A learned model as a policy; `attach(sim)` gives it the simulator's node workloads."""

    def __init__(self, path: str, nodes: Sequence[NodeSpec], power_off: PowerOffModel | None):
        self._sim: Any = None
        scorer = LearnedScorer(
            load_numpy_model(path), heuristic_scorer(nodes, power_off), self._workloads
        )
        super().__init__(scorer, f"learned:{path}")

    def attach(self, sim: Any) -> None:
        self._sim = sim

    def _workloads(self) -> Any:
        return self._sim.workloads() if self._sim is not None else None


def heuristic_scorer(nodes: Sequence[NodeSpec], power_off: PowerOffModel | None) -> HeuristicScorer:
    """The energy scorer as the simulator configures it.

    Consolidation is on exactly when nodes can power off (the scorer's documented switch), at
    the scorer's default reference load (not tuned to any trace).
    ΔP_ref is the largest full-load power in the cluster, so the 0–100 scale does not saturate
    and every candidate's extra watts stay distinguishable.
    """
    reference = max(20.0, max(n.curve.max_watts for n in nodes))
    return HeuristicScorer(delta_p_ref_watts=reference, consolidation=power_off is not None)


def _load_scorer(spec: str, nodes: Sequence[NodeSpec]) -> Scorer:
    parts = spec.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise ValueError(f"model policy must be py:MODULE:ATTR, got {spec!r}")
    _, module_name, attr = parts
    target: Any = getattr(importlib.import_module(module_name), attr)
    scorer = target if hasattr(target, "score") else target(list(nodes))
    if not hasattr(scorer, "score"):
        raise ValueError(f"{spec} did not give a Scorer")
    return cast(Scorer, scorer)


def make_policy(
    name: str, nodes: Sequence[NodeSpec], power_off: PowerOffModel | None = None
) -> Policy:
    """A fresh policy by name (see the module docstring)."""
    if name == "default":
        return KubeDefaultPolicy(LEAST_ALLOCATED, "default")
    if name == "mostallocated":
        return KubeDefaultPolicy(MOST_ALLOCATED, "mostallocated")
    if name == "roundrobin":
        return RoundRobinPolicy()
    if name == "peaks":
        models = models_from_config({}, {n.name: n.curve for n in nodes})
        return ProfilePolicy(Profile("peaks", (), [(Peaks(models), 1)]))
    if name == "trimaran":
        return ProfilePolicy(Profile("trimaran", (), [(TargetLoadPacking(), 1)]))
    if name == "heuristic":
        return ScorerPolicy(heuristic_scorer(nodes, power_off), "heuristic")
    if name.startswith("learned:"):
        return LearnedPolicy(name[len("learned:") :], nodes, power_off)
    if name.startswith("py:"):
        return ScorerPolicy(_load_scorer(name, nodes), name)
    raise ValueError(
        f"unknown policy {name!r}; known: {', '.join(BUILTIN_POLICIES)}, learned:PATH, "
        "py:MODULE:ATTR"
    )
