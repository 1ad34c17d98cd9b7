"""The heuristic energy scorer: kubejoule's energy plugin (`scheduler.plugins.energy`, where
the formula and its reasoning live) behind the `Scorer` protocol — a list of ScoreResults for
one pod over some nodes — and the prepared node batches the extender and the standalone
scheduler score many pods against. There is no second formula here: every score is the
plugin's, computed over a `CandidateBatch` (a single node is a batch of one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat

import numpy as np

from agent.curves import PowerCurve
from scheduler.framework.batch import CandidateBatch
from scheduler.model import (
    NEUTRAL_SCORE,
    REASON_MISSING,
    REASON_NO_CURVE,
    REASON_OK,
    REASON_STALE,
    REASONS,
    NodeInfo,
    NodeState,
    NodeTelemetry,
    PodInfo,
    Resources,
    ScoreResult,
)
from scheduler.plugins.energy import (
    DEFAULT_CONSOLIDATION_UTILIZATION,
    EnergyPlugin,
    EnergyScores,
    LinearFit,
    NodeHistory,
)

__all__ = [
    "DEFAULT_CONSOLIDATION_UTILIZATION", "NAME", "NEUTRAL_SCORE", "REASONS", "REASON_MISSING",
    "REASON_NO_CURVE", "REASON_OK", "REASON_STALE", "BatchScores", "HeuristicScorer",
    "LinearFit", "NodeBatch", "NodeHistory",
]

NAME = "heuristic"

BatchScores = EnergyScores  # the scores of one pod over a NodeBatch


class NodeBatch:
    """Many nodes prepared for scoring (their energy columns computed once), with a name index.

    `rows(names)` maps names to rows; a name the batch does not know maps to a sentinel row
    past the nodes: a node without telemetry, spec or history, scored as the kernel scores any
    such node. Callers that know more of a node (its spec) score its own state instead."""

    def __init__(self, candidates: CandidateBatch) -> None:
        self.candidates = candidates  # the nodes and, as its last row, the sentinel
        self.names: list[str] = candidates.names[:-1]
        self.index = {name: i for i, name in enumerate(self.names)}

    def rows(self, names: Sequence[str]) -> np.ndarray:
        """Row of each name; unknown names get the sentinel row (len(self.names))."""
        found = list(map(self.index.get, names, repeat(len(self.names), len(names))))
        return np.array(found, dtype=np.intp)

    def state(self, row: int) -> NodeState:
        return self.candidates.states[row]


_SENTINEL = NodeState(NodeInfo("", Resources()))


class HeuristicScorer:
    """The energy plugin as a `Scorer` (module docstring). `energy` is the plugin itself: a
    profile and this scorer can share it (and its node histories)."""

    name = NAME

    def __init__(
        self,
        delta_p_ref_watts: float = 20.0,
        consolidation: bool = False,
        max_staleness_seconds: float = 30.0,
        curves: Mapping[str, PowerCurve] | None = None,
        history_size: int = 64,
        consolidation_utilization: float = DEFAULT_CONSOLIDATION_UTILIZATION,
    ) -> None:
        self.energy = EnergyPlugin(
            delta_p_ref_watts=delta_p_ref_watts,
            consolidation=consolidation,
            max_staleness_seconds=max_staleness_seconds,
            curves=curves,
            history_size=history_size,
            consolidation_utilization=consolidation_utilization,
        )

    # -- the plugin's settings and node knowledge ----------------------------------------------

    @property
    def max_staleness_seconds(self) -> float:
        return self.energy.max_staleness_seconds

    def observe(self, telemetry: NodeTelemetry) -> None:
        self.energy.observe(telemetry)

    def curve_for(self, node: str, telemetry: NodeTelemetry | None) -> tuple[PowerCurve, str] | None:
        return self.energy.curve_for(node, telemetry)

    utilization_with_assumed = staticmethod(EnergyPlugin.utilization_with_assumed)

    def delta_watts(
        self, pod: PodInfo, node: NodeState, now: float, with_idle: bool = True
    ) -> tuple[float | None, str]:
        return self.energy.delta_watts(pod, node, now, with_idle)

    # -- scoring ----------------------------------------------------------------------------------

    def score(self, pod: PodInfo, nodes: Sequence[NodeState], now: float) -> list[ScoreResult]:
        return self.energy.results(pod, nodes, now)

    def prepare_batch(self, nodes: Sequence[NodeState]) -> NodeBatch:
        """`nodes` prepared for scoring many pods (the pod-independent work done here)."""
        candidates = CandidateBatch.of([*nodes, _SENTINEL])
        self.energy.columns(candidates)
        return NodeBatch(candidates)

    def score_batch(
        self, pod: PodInfo, batch: NodeBatch, now: float, rows: np.ndarray | None = None
    ) -> EnergyScores:
        """Scores of the batch's nodes (or of `rows` of it) for one pod at `now`."""
        if rows is None:
            rows = np.arange(len(batch.names), dtype=np.intp)
        return self.energy.evaluate(pod, batch.candidates.at(now), rows=rows)

    def knows(self, node: str) -> bool:
        return self.energy.knows(node)
