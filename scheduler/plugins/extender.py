"""What kube-scheduler sees of a Score plugin served through the extender.

The extender answers `/prioritize` with integers 0–10 (extenderv1.MaxExtenderPriority): the
plugin's 0–100 score (after its NormalizeScore, over the nodes kube-scheduler sent) rounded by
`extender_priority` (the framework's one rounding). kube-scheduler adds `score × weight ×
MaxNodeScore / MaxExtenderPriority` to the node's total: `ExtenderScore.score()` returns
`score × 10`, so an extender at weight W is the profile entry `(ExtenderScore(plugin), W)`.
"""

from __future__ import annotations

import numpy as np

from scheduler.domain.model import PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.framework.interface import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    ScorePlugin,
    extender_priority,
    normalized,
)

PREFIX = "extender:"


class ExtenderScore:
    """A Score plugin as kube-scheduler sees it through the extender (module docstring)."""

    def __init__(self, plugin: ScorePlugin) -> None:
        self.plugin = plugin
        self.name = PREFIX + plugin.name

    def extender_scores(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        """The HostPriority scores the extender answers (0–10)."""
        return extender_priority(normalized(self.plugin, pod, batch))

    @staticmethod
    def seen_by_kube_scheduler(plugin_scores: np.ndarray) -> np.ndarray:
        """The wrapped plugin's normalized 0–100 scores as kube-scheduler adds them up."""
        return extender_priority(plugin_scores) * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        return self.seen_by_kube_scheduler(normalized(self.plugin, pod, batch))
