"""kube-scheduler's default resource scoring, on plain data.

Reproduces, on cpu and memory with weight 1 each (kube-scheduler's defaults):

* NodeResourcesFit, strategy LeastAllocated: per resource
  `(allocatable − requested) × 100 // allocatable` (0 when requested > allocatable), where
  `requested` is the node's *non-zero* requests plus the pod's (a container with no cpu/memory
  request counts 100m / 200 MiB); the node score is `Σ score·weight // Σ weight` over resources
  the node has (allocatable > 0). Integer arithmetic, as in Go's int64.
* NodeResourcesFit, strategy MostAllocated: `min(requested, allocatable) × 100 // allocatable`.
* NodeResourcesBalancedAllocation: fractions `requested / allocatable` (capped at 1) of the
  node's *actual* requests plus the pod's; with two resources `std = |f_cpu − f_mem| / 2`;
  score `int((1 − std) × 100)`. A pod requesting neither cpu nor memory is skipped by the
  plugin (kubernetes#129138), which here is a score of 0 for every node — the same ranking.
* The default combination: framework total = fit × 1 + balanced × 1 (0–200), and
  `select_host()`: the highest total, ties broken uniformly at random (kube-scheduler's
  reservoir sampling), with a seedable `random.Random`.

(Kubernetes 1.36 changes BalancedAllocation to score the *improvement* in balance; this module
follows 1.23–1.35, which is what clusters run today.)
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.model import NodeState, PodInfo, Resources

MAX_NODE_SCORE = 100
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"


@dataclass(frozen=True)
class ResourceWeights:
    cpu: int = 1
    memory: int = 1


DEFAULT_WEIGHTS = ResourceWeights()


def least_requested_score(requested: int, allocatable: int) -> int:
    if allocatable == 0 or requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_NODE_SCORE // allocatable


def most_requested_score(requested: int, allocatable: int) -> int:
    if allocatable == 0:
        return 0
    # requested can exceed allocatable because request-less pods get the non-zero defaults.
    return min(requested, allocatable) * MAX_NODE_SCORE // allocatable


def _pod_scoring_requests(pod: PodInfo) -> Resources:
    return pod.nonzero_requests if pod.nonzero_requests is not None else pod.requests


def _node_scoring_requested(node: NodeState) -> Resources:
    return node.nonzero_requested if node.nonzero_requested is not None else node.requested


def _fit_score(pod: PodInfo, node: NodeState, strategy: str, weights: ResourceWeights) -> int:
    if strategy not in (LEAST_ALLOCATED, MOST_ALLOCATED):
        raise ValueError(f"unknown NodeResourcesFit strategy {strategy!r}")
    scorer = least_requested_score if strategy == LEAST_ALLOCATED else most_requested_score
    pod_req = _pod_scoring_requests(pod)
    node_req = _node_scoring_requested(node)
    alloc = node.info.allocatable
    total = 0
    weight_sum = 0
    for requested, allocatable, weight in (
        (node_req.cpu_millicores + pod_req.cpu_millicores, alloc.cpu_millicores, weights.cpu),
        (node_req.memory_bytes + pod_req.memory_bytes, alloc.memory_bytes, weights.memory),
    ):
        if allocatable == 0:
            continue
        total += scorer(requested, allocatable) * weight
        weight_sum += weight
    return total // weight_sum if weight_sum else 0


def least_allocated(
    pod: PodInfo, node: NodeState, weights: ResourceWeights = DEFAULT_WEIGHTS
) -> int:
    """NodeResourcesFit with the LeastAllocated strategy (kube-scheduler's default), 0–100."""
    return _fit_score(pod, node, LEAST_ALLOCATED, weights)


def most_allocated(
    pod: PodInfo, node: NodeState, weights: ResourceWeights = DEFAULT_WEIGHTS
) -> int:
    """NodeResourcesFit with the MostAllocated (bin-packing) strategy, 0–100."""
    return _fit_score(pod, node, MOST_ALLOCATED, weights)


def is_best_effort(pod: PodInfo) -> bool:
    """No cpu and no memory request: BalancedAllocation skips such pods."""
    return pod.requests.cpu_millicores == 0 and pod.requests.memory_bytes == 0


def balanced_allocation(pod: PodInfo, node: NodeState) -> int:
    """NodeResourcesBalancedAllocation on cpu and memory, 0–100 (0 for best-effort pods)."""
    if is_best_effort(pod):
        return 0
    alloc = node.info.allocatable
    fractions = [
        min(
            1.0,
            (node.requested.cpu_millicores + pod.requests.cpu_millicores) / alloc.cpu_millicores,
        )
        if alloc.cpu_millicores
        else None,
        min(1.0, (node.requested.memory_bytes + pod.requests.memory_bytes) / alloc.memory_bytes)
        if alloc.memory_bytes
        else None,
    ]
    present = [f for f in fractions if f is not None]
    std = 0.0
    if len(present) == 2:
        std = abs((present[0] - present[1]) / 2)
    elif len(present) > 2:  # not reachable with cpu+memory; kept for the general formula
        mean = sum(present) / len(present)
        std = math.sqrt(sum((f - mean) ** 2 for f in present) / len(present))
    return int((1 - std) * MAX_NODE_SCORE)


@dataclass(frozen=True)
class DefaultScore:
    node: str
    fit: int
    balanced: int

    @property
    def total(self) -> int:
        """The framework's weighted sum, NodeResourcesFit and BalancedAllocation weight 1."""
        return self.fit + self.balanced


def default_scores(
    pod: PodInfo,
    nodes: Sequence[NodeState],
    strategy: str = LEAST_ALLOCATED,
    weights: ResourceWeights = DEFAULT_WEIGHTS,
) -> list[DefaultScore]:
    """kube-scheduler's default resource scoring of every (already feasible) node."""
    return [
        DefaultScore(
            n.info.name, _fit_score(pod, n, strategy, weights), balanced_allocation(pod, n)
        )
        for n in nodes
    ]


def select_host(scores: Sequence[tuple[str, Any]], rng: random.Random) -> str | None:
    """The highest-scoring node; among equal best scores, each is chosen with equal probability
    (reservoir sampling, as kube-scheduler's selectHost). None when there are no nodes.
    Scores may be any comparable values (numbers, or tuples for lexicographic preferences)."""
    best_name: str | None = None
    best_score: Any = None
    ties = 0
    for name, score in scores:
        if best_name is None or score > best_score:
            best_name, best_score, ties = name, score, 1
        elif score == best_score:
            ties += 1
            if rng.randrange(ties) == 0:
                best_name = name
    return best_name


def default_choice(
    pod: PodInfo,
    nodes: Sequence[NodeState],
    rng: random.Random,
    strategy: str = LEAST_ALLOCATED,
) -> str | None:
    """Where kube-scheduler's default scoring would put `pod` among feasible `nodes`."""
    return select_host([(s.node, s.total) for s in default_scores(pod, nodes, strategy)], rng)
