"""kube-scheduler's default plugins as profiles (`apis/config/v1/default_plugins.go`), limited
to the plugins kubejoule implements.

Filters, in kube-scheduler's order: NodeUnschedulable, TaintToleration, NodeAffinity,
NodeResourcesFit. Scores (weight): TaintToleration (3), NodeAffinity (2), NodeResourcesFit (1),
NodeResourcesBalancedAllocation (1). Not implemented: InterPodAffinity, ImageLocality and
VolumeBinding (they score every node alike on clusters without the affinities, images and
volumes they read), and PodTopologySpread — which is *not* neutral everywhere: with no
constraints of its own, a pod of a ReplicaSet, StatefulSet, ReplicationController or Service
gets kube-scheduler's system defaults, ScheduleAnyway with maxSkew 3 per hostname and 5 per
zone (kubernetes v1.36.3 pkg/scheduler/framework/plugins/podtopologyspread/plugin.go,
`systemDefaultConstraints`), so the real scheduler spreads such pods where this model does not.
A known gap of the simulator (docs: the benchmark on real Kubernetes): bare pods are not
affected, but the autoscaled on-cluster replay gives owned pods their ReplicaSets and
StatefulSets (rl/evaluation/owners.py), whose selectors kube-scheduler finds.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework.interface import FilterPlugin, ScorePlugin
from scheduler.framework.scheduling_profile import SchedulingProfile
from scheduler.plugins.extender import ExtenderScore
from scheduler.plugins.nodeaffinity import NodeAffinity, NodeUnschedulable
from scheduler.plugins.noderesources import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
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
) -> SchedulingProfile:
    """kube-scheduler's default profile, plus `extra` weighted Score plugins after its own."""
    return SchedulingProfile(name, default_filters(), [*default_scores(strategy), *extra])


# The standalone scheduler's default scoring profile (docs/standalone.md, "Scoring profile"):
# kubejoule's energy plugin alone, after kube-scheduler's default filters. The choice and the
# simulator measurements behind it are in docs/standalone.md.
KUBEJOULE_PROFILE = "kubejoule"
KUBEJOULE_ENERGY_WEIGHT = 1
KUBEJOULE_WITH_DEFAULT_SCORES = False


def kubejoule_profile(
    energy_plugin: ScorePlugin,
    energy_weight: int = KUBEJOULE_ENERGY_WEIGHT,
    with_default_scores: bool = KUBEJOULE_WITH_DEFAULT_SCORES,
    name: str = KUBEJOULE_PROFILE,
) -> SchedulingProfile:
    """The standalone scheduler's default profile: kube-scheduler's default filters, then the
    energy plugin at `energy_weight` — alone, or after kube-scheduler's default Score plugins
    when `with_default_scores`."""
    energy = [(energy_plugin, energy_weight)]
    scores = [*default_scores(), *energy] if with_default_scores else energy
    return SchedulingProfile(name, default_filters(), scores)


def extender_profile(energy_plugin: ScorePlugin, weight: int, name: str = "") -> SchedulingProfile:
    """What a cluster running kube-scheduler with kubejoule's extender at `weight` does:
    kube-scheduler's default profile plus the plugin's 0–10 extender score × weight × 10."""
    return default_profile(
        name or f"default+extender:{weight}", extra=[(ExtenderScore(energy_plugin), weight)]
    )


# What the extender serves kube-scheduler (scheduler/extender/): the energy plugin alone at
# weight 1, its scores as they are; no filters, as kube-scheduler filters (the extender's
# /filter applies only power caps). kube-scheduler weighs it against its own profile.
SERVED_PROFILE = "extender"


def served_profile(energy_plugin: ScorePlugin) -> SchedulingProfile:
    """The extender's profile: the energy plugin alone, weight 1, no filters."""
    return SchedulingProfile(SERVED_PROFILE, (), [(energy_plugin, 1)])


# The shipped `kubejoule` profile (docs/standalone.md, "Scoring profile", has the measurements
# behind it): the energy plugin with its v3 lifetimes lever and per-pod scale, weight 3, then
# NodeResourcesFit MostAllocated, weight 1, which packs where the energy prices are close.
SHIPPED_ENERGY_WEIGHT = 3
SHIPPED_PACKING_WEIGHT = 1


def shipped_kubejoule_profile(energy_plugin: ScorePlugin) -> SchedulingProfile:
    """The `kubejoule` profile as it ships (the standalone scheduler without a `profile:`, the
    simulator's `kubejoule` policy): kube-scheduler's default filters, the energy plugin with
    SHIPPED_LEVERS (scheduler/plugins/energy/levers.py) at SHIPPED_ENERGY_WEIGHT and NodeResourcesFit
    MostAllocated at SHIPPED_PACKING_WEIGHT."""
    from scheduler.plugins.energy import EnergyPlugin
    from scheduler.plugins.energy.levers import SHIPPED_LEVERS

    if isinstance(energy_plugin, EnergyPlugin):  # a new plugin: the given one stays as it is
        energy_plugin = energy_plugin.with_levers(SHIPPED_LEVERS)
    return SchedulingProfile(KUBEJOULE_PROFILE, default_filters(), [
        (energy_plugin, SHIPPED_ENERGY_WEIGHT),
        (NodeResourcesFit(MOST_ALLOCATED), SHIPPED_PACKING_WEIGHT),
    ])
