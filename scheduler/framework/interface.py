"""The plugin interfaces, shaped like kube-scheduler's framework (`framework/interface.go`).

A Score plugin scores a whole `CandidateBatch` (every candidate node for one pod) at once and
returns one number per row. If the original plugin has a NormalizeScore step, the plugin has a
`normalize()` method, and that is the only place where a node's score may depend on the other
candidates. After normalization scores are within MIN_NODE_SCORE … MAX_NODE_SCORE.

A Filter plugin returns a boolean mask over the batch (True: the pod fits) and, for the
FailedScheduling message, the reasons a given node fails.

The single-node call of any plugin is a batch of one (`CandidateBatch.of([state], now)`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from scheduler.domain.model import NodeState, PodInfo
    from scheduler.framework.batch import CandidateBatch

# kube-scheduler's framework.MaxNodeScore / MinNodeScore and extenderv1.MaxExtenderPriority.
MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_EXTENDER_PRIORITY = 10


def extender_priority(scores: np.ndarray) -> np.ndarray:
    """Scores on 0–100 → an extender's 0–10 integers (extenderv1.HostPriority), halves rounded
    up (50, neutral, → 5), clamped to 0–10: the one rounding the extender answers with and the
    simulator's view of an extender uses."""
    scaled = np.floor(
        np.asarray(scores, dtype=np.float64) * MAX_EXTENDER_PRIORITY / MAX_NODE_SCORE + 0.5
    )
    return np.clip(scaled, MIN_NODE_SCORE, MAX_EXTENDER_PRIORITY).astype(np.int64)


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        """One score per batch row (int64 for kube-scheduler's integer plugins, else float)."""
        ...


@runtime_checkable
class NormalizingPlugin(ScorePlugin, Protocol):
    """A Score plugin with kube-scheduler's ScoreExtensions().NormalizeScore step."""

    def normalize(self, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        """The raw scores of all candidates → 0–100."""
        ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        """True where the pod fits the node (one bool per batch row)."""
        ...

    def reasons(self, pod: PodInfo, node: NodeState) -> tuple[str, ...]:
        """Why the pod does not fit `node` (kube-scheduler's wording); empty when it fits."""
        ...


def normalized(plugin: ScorePlugin, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
    """The plugin's scores after its NormalizeScore step, if it has one."""
    scores = plugin.score(pod, batch)
    return plugin.normalize(pod, scores) if isinstance(plugin, NormalizingPlugin) else scores
