"""The rebalancer's prices: what emptying a node saves over the predicted horizon, what the
disruption costs, and Karpenter's "balanced" consolidation score with watts for price.

Energy (joules), for a source node s whose pods j would move to more efficient nodes d(j):

* Without the move, s runs its pods until each ends (predicted remaining r_j), its utilization
  falling as they do: ∫ P_s(u(t)) dt over the horizon H. H ends when the last pod would end, or
  earlier when cluster-autoscaler would take the node itself: once its requested utilization
  falls to the scale-down threshold, CA removes it `unneeded_s` later (it drains what is
  left). After its pods end, s idles `unneeded_s` before CA removes it; with the move it idles
  those `unneeded_s` now — that idle time cancels out unless CA drains it first.
* With the move, each pod draws ΔP_j = P_d(u_d + c_j / C_d) − P_d(u_d) on its destination for
  min(r_j, H) (after H its energy is the same either way).
* saving = E_s(without) − E_s(with) − Σ ΔP_j · min(r_j, H);
  disruption cost = Σ ΔP_j · (startup + the work a restarting pod loses: its run time so far).
  A move is worth it when saving ≥ (1 + margin) × cost.

Karpenter's score (kubernetes-sigs/karpenter at KARPENTER_COMMIT, designs/balanced-consolidation.md
"How Scoring Works", pkg/utils/disruption/disruption.go `EvictionCost`): per pod
`clamp(1 + deletion-cost / 2^27 + priority / 2^25, −10, 10)`, counted at ≥ 0; a node's
disruption cost is 1 plus its pods'; score = (savings / total) / (disruption / total
disruption) over the cluster's nodes, approved at score ≥ 1/k (`Balanced`: k = 2). Here the
price is watts: savings = P_s(u_s) − Σ ΔP_j, total = the cluster's watts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from common.curves import PowerCurve

KARPENTER_COMMIT = "2266468104f36373ed002241afaee2d3bbc26078"
POD_DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
BALANCED_K = 2.0


def eviction_cost(priority: int | None, deletion_cost: float | None) -> float:
    """Karpenter's `EvictionCost` of one pod."""
    cost = 1.0
    if deletion_cost is not None:
        cost += deletion_cost / 2.0**27
    if priority is not None:
        cost += priority / 2.0**25
    return min(10.0, max(-10.0, cost))


def pod_eviction_cost(annotations: tuple[tuple[str, str], ...], priority: int | None) -> float:
    """`eviction_cost` of a pod from its annotations (an unreadable deletion cost is ignored, as
    Karpenter logs and ignores it) and its spec's priority."""
    deletion = None
    for key, value in annotations:
        if key == POD_DELETION_COST_ANNOTATION:
            try:
                deletion = float(value)
            except ValueError:
                deletion = None
            if deletion is not None and not math.isfinite(deletion):
                deletion = None
    return eviction_cost(priority, deletion)


def node_disruption_cost(pod_costs: Sequence[float]) -> float:
    """A node's disruption cost: 1 (the node itself) plus its pods' costs, each at least 0."""
    return 1.0 + sum(max(0.0, c) for c in pod_costs)


def balanced_score(
    savings: float, total_cost: float, disruption: float, total_disruption: float
) -> float:
    """(savings / total cost) / (disruption / total disruption); 0 when nothing is saved."""
    if savings <= 0 or total_cost <= 0 or disruption <= 0 or total_disruption <= 0:
        return 0.0
    return (savings / total_cost) / (disruption / total_disruption)


def source_energy(
    curve: PowerCurve,
    cores: float,
    utilization: float,
    pods: Sequence[tuple[float, float]],
    horizon_s: float,
) -> float:
    """∫ P(u(t)) dt from now to `horizon_s`: `utilization` now, each pod's (remaining seconds,
    cores used) leaving u when it ends."""
    energy, t, u = 0.0, 0.0, utilization
    for remaining, used in sorted(pods):
        end = min(remaining, horizon_s)
        if end > t:
            energy += curve.watts(max(0.0, u)) * (end - t)
            t = end
        if t >= horizon_s:
            return energy
        u -= used / cores
    if horizon_s > t:
        energy += curve.watts(max(0.0, u)) * (horizon_s - t)
    return energy


def takeover_time(
    ends: Sequence[tuple[float, float, float]], cpu: float, memory: float, threshold: float | None
) -> float | None:
    """When cluster-autoscaler would find the node at or under its scale-down threshold: `cpu`
    and `memory` are its requests over allocatable now (CA takes the larger), `ends` each pod's
    (remaining seconds, CPU share, memory share it frees). None: not before the pods end, or no
    threshold."""
    if threshold is None:
        return None
    if max(cpu, memory) <= threshold:
        return 0.0
    for remaining, freed_cpu, freed_memory in sorted(ends):
        cpu -= freed_cpu
        memory -= freed_memory
        if max(cpu, memory) <= threshold + 1e-12:
            return remaining
    return None
