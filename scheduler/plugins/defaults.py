"""kube-scheduler's default plugins as profiles (`apis/config/v1/default_plugins.go`), limited
to the plugins kubejoule implements.

Filters, in kube-scheduler's order: NodeUnschedulable, TaintToleration, NodeAffinity,
NodeResourcesFit. Scores (weight): TaintToleration (3), NodeAffinity (2), NodeResourcesFit (1),
NodeResourcesBalancedAllocation (1). Not implemented (they score every node alike on clusters
without the constraints they read): PodTopologySpread, InterPodAffinity, ImageLocality,
VolumeBinding.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework.interface import FilterPlugin, ScorePlugin
from scheduler.framework.profile import Profile
from scheduler.plugins.nodeaffinity import NodeAffinity, NodeUnschedulable
from scheduler.plugins.noderesources import (
    LEAST_ALLOCATED,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
)
from scheduler.plugins.tainttoleration import TaintToleration

TAINT_TOLERATION_WEIGHT = 3
NODE_AFFINITY_WEIGHT = 2
FIT_WEIGHT = 1
BALANCED_WEIGHT = 1


def default_filters() -> list[FilterPlugin]:
    return [NodeUnschedulable(), TaintToleration(), NodeAffinity(), NodeResourcesFit()]


def default_scores(strategy: str = LEAST_ALLOCATED) -> list[tuple[ScorePlugin, int]]:
    """kube-scheduler's default Score plugins and weights (NodeResourcesFit's strategy may be
    MostAllocated, as bin-packing clusters configure it)."""
    return [
        (TaintToleration(), TAINT_TOLERATION_WEIGHT),
        (NodeAffinity(), NODE_AFFINITY_WEIGHT),
        (NodeResourcesFit(strategy), FIT_WEIGHT),
        (NodeResourcesBalancedAllocation(), BALANCED_WEIGHT),
    ]


def default_profile(
    name: str = "default",
    strategy: str = LEAST_ALLOCATED,
    extra: Sequence[tuple[ScorePlugin, int]] = (),
) -> Profile:
    """kube-scheduler's default profile, plus `extra` weighted Score plugins after its own."""
    return Profile(name, default_filters(), [*default_scores(strategy), *extra])
