"""kube-scheduler's NodeAffinity (`framework/plugins/nodeaffinity`) and NodeUnschedulable.

NodeAffinity Filter: `nodeSelector` (every label equal) and the required node affinity terms
(ORed) — `scheduler.domain.filters.matches_node_selector`.

NodeAffinity Score: the sum of the weights of the pod's preferred terms the node matches (a
term with weight 0 or without requirements is skipped; a term's requirements are ANDed, and an
invalid requirement makes its term match nothing). NormalizeScore is DefaultNormalizeScore
without reverse: `100 × sum // max sum` (all 0 when no node matches anything).

NodeUnschedulable Filter: `spec.unschedulable` fails the node unless the pod tolerates
`node.kubernetes.io/unschedulable:NoSchedule`.
"""

from __future__ import annotations

import numpy as np

from scheduler.domain.filters import (
    REASON_NODE_AFFINITY,
    REASON_UNSCHEDULABLE,
    TAINT_UNSCHEDULABLE,
    is_tolerated,
    matches_node_selector,
    term_matches,
)
from scheduler.domain.model import NodeInfo, NodeState, PodInfo, SelectorTerm, Taint
from scheduler.framework.batch import CandidateBatch, node_mask, node_values
from scheduler.plugins.tainttoleration import default_normalize

NAME = "NodeAffinity"
UNSCHEDULABLE = "NodeUnschedulable"


def preferred_weight(info: NodeInfo, preferred: tuple[tuple[int, SelectorTerm], ...]) -> int:
    """PreferredSchedulingTerms.Score: Σ weight of the matching terms."""
    labels = info.label_map
    return sum(
        weight
        for weight, term in preferred
        if weight != 0
        and (term.match_expressions or term.match_fields)
        and term_matches(term, labels, info.name)
    )


class NodeAffinity:
    name = NAME

    def filter(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        if not pod.node_selector and not pod.required_affinity:
            return np.ones(len(batch), dtype=bool)
        shape = ("filter", pod.node_selector, pod.required_affinity)
        return node_mask(batch, self, shape, lambda s: matches_node_selector(pod, s.info))

    def reasons(self, pod: PodInfo, node: NodeState) -> tuple[str, ...]:
        return () if matches_node_selector(pod, node.info) else (REASON_NODE_AFFINITY,)

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        preferred = pod.preferred_affinity
        if not preferred:
            return np.zeros(len(batch), dtype=np.int64)
        return node_values(
            batch, self, ("score", preferred), lambda s: preferred_weight(s.info, preferred)
        )

    def normalize(self, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores, reverse=False)


_UNSCHEDULABLE_TAINT = Taint(TAINT_UNSCHEDULABLE, "", "NoSchedule")


class NodeUnschedulable:
    name = UNSCHEDULABLE

    def filter(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        if is_tolerated(_UNSCHEDULABLE_TAINT, pod.tolerations):
            return np.ones(len(batch), dtype=bool)
        return node_mask(batch, self, "filter", lambda s: not s.info.unschedulable)

    def reasons(self, pod: PodInfo, node: NodeState) -> tuple[str, ...]:
        if node.info.unschedulable and not is_tolerated(_UNSCHEDULABLE_TAINT, pod.tolerations):
            return (REASON_UNSCHEDULABLE,)
        return ()
