"""What kube-scheduler sees of a Score plugin served through the extender.

The extender answers `/prioritize` with integers 0–10 (extenderv1.MaxExtenderPriority): the
plugin's 0–100 score (after its NormalizeScore, over the nodes kube-scheduler sent) divided by
10 and rounded half up, clamped to 0–10. kube-scheduler adds `score × weight × MaxNodeScore /
MaxExtenderPriority` to the node's total: `ExtenderScore.score()` returns `score × 10`, so an
extender at weight W is the profile entry `(ExtenderScore(plugin), W)`.
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.batch import CandidateBatch
from scheduler.framework.interface import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    ScorePlugin,
    normalized,
)
from scheduler.model import PodInfo

PREFIX = "extender:"


def to_extender_scores(scores: np.ndarray) -> np.ndarray:
    """0–100 scores → the extender's 0–10 integers, halves rounded up (50, neutral, → 5)."""
    scaled = np.floor(np.asarray(scores, dtype=np.float64) * MAX_EXTENDER_PRIORITY / 100.0 + 0.5)
    return np.clip(scaled, 0, MAX_EXTENDER_PRIORITY).astype(np.int64)


class ExtenderScore:
    """A Score plugin as kube-scheduler sees it through the extender (module docstring)."""

    def __init__(self, plugin: ScorePlugin) -> None:
        self.plugin = plugin
        self.name = PREFIX + plugin.name

    def extender_scores(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        """The HostPriority scores the extender answers (0–10)."""
        return to_extender_scores(normalized(self.plugin, pod, batch))

    @staticmethod
    def seen_by_kube_scheduler(plugin_scores: np.ndarray) -> np.ndarray:
        """The wrapped plugin's normalized 0–100 scores as kube-scheduler adds them up."""
        return to_extender_scores(plugin_scores) * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        return self.seen_by_kube_scheduler(normalized(self.plugin, pod, batch))
