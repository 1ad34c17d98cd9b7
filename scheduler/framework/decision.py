"""One scheduling decision, and the two modes a kubejoule scheduler runs in.

`shadow`: bind (or let kube-scheduler bind) where kube-scheduler's default profile would, and
record what kubejoule's profile recommends. `active`: bind to kubejoule's recommendation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.domain.model import NodeState, PodInfo

MODE_SHADOW = "shadow"
MODE_ACTIVE = "active"
MODES = (MODE_SHADOW, MODE_ACTIVE)

# The reason of every candidate when the profile has no energy plugin to explain its scores.
REASON_PROFILE = "profile"


def _empty(dtype: type = np.float64) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


def ranked(score: np.ndarray, names: Sequence[str], count: int) -> list[int]:
    """Indices of the `count` best scores, best first, ties by node name."""
    if count <= 0 or not len(names):
        return []
    if count < len(names):
        part = np.argpartition(-score, count - 1)[:count]
        cutoff = score[part].min()
        candidates = np.flatnonzero(score >= cutoff)  # keep every tie at the cutoff
    else:
        candidates = np.arange(len(names))
    order = sorted(candidates.tolist(), key=lambda i: (-float(score[i]), names[i]))
    return order[:count]


@dataclass
class Decision:
    """A pod, the candidates that were scored (the feasible nodes, or those of them
    kube-scheduler would score under percentageOfNodesToScore) and what each profile made of them.

    `total`: the scheduler's profile's weighted totals; `default_total`: kube-scheduler's
    default profile's. `score`, `delta_watts` and the reasons are the energy plugin's when the
    profile has one (the profile's total otherwise, with unknown watts)."""

    pod: PodInfo
    total_nodes: int
    states: list[NodeState] = field(default_factory=list)
    total: np.ndarray = field(default_factory=_empty)
    default_total: np.ndarray = field(default_factory=lambda: _empty(np.int64))
    score: np.ndarray = field(default_factory=_empty)  # energy, 0–100
    delta_watts: np.ndarray = field(default_factory=_empty)  # NaN: unknown
    reason_codes: np.ndarray = field(default_factory=lambda: _empty(np.int8))
    reason_names: Sequence[str] = ()  # reason_codes index this
    feasible_nodes: int = 0  # nodes that passed the filters (≥ len(states) with nodes to score)
    chosen: str | None = None
    recommended: str | None = None  # the profile's pick
    default_choice: str | None = None  # kube-scheduler's default profile's pick
    summary: str | None = None  # "0/12 nodes are available: …" when nothing fits

    @property
    def feasible(self) -> bool:
        return self.chosen is not None

    node_names: list[str] | None = None  # the names of `states` (computed when not given)

    @property
    def names(self) -> list[str]:
        if self.node_names is None:
            self.node_names = [s.info.name for s in self.states]
        return self.node_names

    def reason(self, index: int) -> str:
        return self.reason_names[int(self.reason_codes[index])]

    def ranked(self, count: int) -> list[int]:
        """Indices of the `count` best scores (ties by node name)."""
        return ranked(self.score, self.names, count)

    def top_scores(self, count: int) -> dict[str, float]:
        return {
            self.states[i].info.name: round(float(self.score[i]), 1) for i in self.ranked(count)
        }
