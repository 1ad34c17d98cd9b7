"""kube-scheduler's TaintToleration (`framework/plugins/tainttoleration`).

Filter: the first NoSchedule/NoExecute taint no toleration matches fails the node
(`scheduler.domain.filters.untolerated_taint`, with the not-ready taint a real cluster puts on a node
that is not Ready).

Score: the number of the node's PreferNoSchedule taints the pod does not tolerate, counting
only tolerations whose effect is PreferNoSchedule or empty. NormalizeScore is
DefaultNormalizeScore with `reverse`: `100 − 100 × count // max count` (every node 100 when no
node has such a taint), so the fewest intolerable taints score best.
"""

from __future__ import annotations

import numpy as np

from scheduler.domain.filters import (
    effective_taints,
    is_tolerated,
    reason_untolerated_taint,
    untolerated_taint,
)
from scheduler.domain.model import NodeInfo, NodeState, PodInfo, Toleration
from scheduler.framework.batch import CandidateBatch, node_mask, node_values
from scheduler.framework.interface import MAX_NODE_SCORE

NAME = "TaintToleration"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


def default_normalize(scores: np.ndarray, reverse: bool) -> np.ndarray:
    """kube-scheduler's helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores) (int64)."""
    scores = np.asarray(scores, dtype=np.int64)
    top = int(scores.max(initial=0))
    if top == 0:
        return np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64) if reverse else scores
    normalized = MAX_NODE_SCORE * scores // top
    return MAX_NODE_SCORE - normalized if reverse else normalized


def intolerable_prefer_no_schedule(info: NodeInfo, tolerations: tuple[Toleration, ...]) -> int:
    """countIntolerableTaintsPreferNoSchedule."""
    relevant = [t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    return sum(
        1
        for taint in info.taints
        if taint.effect == PREFER_NO_SCHEDULE and not is_tolerated(taint, relevant)
    )


class TaintToleration:
    name = NAME

    def filter(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        tolerations = pod.tolerations
        return node_mask(
            batch,
            self,
            ("filter", tolerations),
            lambda s: untolerated_taint(effective_taints(s.info), tolerations) is None,
        )

    def reasons(self, pod: PodInfo, node: NodeState) -> tuple[str, ...]:
        taint = untolerated_taint(effective_taints(node.info), pod.tolerations)
        return () if taint is None else (reason_untolerated_taint(taint),)

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        tolerations = pod.tolerations
        return node_values(
            batch,
            self,
            ("score", tolerations),
            lambda s: intolerable_prefer_no_schedule(s.info, tolerations),
        )

    def normalize(self, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores, reverse=True)
