"""A small scheduling framework shaped like kube-scheduler's: Filter and Score plugins over a
batch of candidate nodes, and scheduling profiles that combine them with weights (docs/DESIGN.md,
"Scheduling framework").

May import domain/ only."""

from scheduler.framework.batch import CandidateBatch
from scheduler.framework.interface import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    FilterPlugin,
    NormalizingPlugin,
    ScorePlugin,
    extender_priority,
    normalized,
)
from scheduler.framework.scheduling_profile import SchedulingProfile, Scored, select_best

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "CandidateBatch",
    "FilterPlugin",
    "NormalizingPlugin",
    "SchedulingProfile",
    "ScorePlugin",
    "Scored",
    "extender_priority",
    "normalized",
    "select_best",
]
