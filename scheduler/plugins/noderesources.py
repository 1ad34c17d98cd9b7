"""kube-scheduler's NodeResourcesFit and NodeResourcesBalancedAllocation (`pkg/scheduler/
framework/plugins/noderesources`), vectorized over a CandidateBatch with Go's int64 arithmetic.

NodeResourcesFit (Filter): pods, cpu, memory and ephemeral-storage requests against allocatable
minus the requests of the pods on the node (`scheduler.domain.filters.insufficient_resources` is the
per-node wording of the same rule).

NodeResourcesFit (Score), per resource r with weight w_r, over resources the node has:

    LeastAllocated:  s_r = (alloc − req) × 100 // alloc     (0 when req > alloc)
    MostAllocated:   s_r = min(req, alloc) × 100 // alloc
    score = Σ s_r × w_r // Σ w_r                              (0 when no resource counts)

`req` is the node's *non-zero* requested amount plus the pod's (a container without a cpu or
memory request counts 100 m / 200 MiB there; `PodInfo.nonzero_requests`). `//` is Go's integer
division; every operand is non-negative, so floor division is truncation.

NodeResourcesBalancedAllocation (kube-scheduler 1.36, the version the project builds and runs —
kubernetes/kubernetes#135573, `balanced_allocation.go` `balancedResourceScorer`): the balance of a
node's cpu and memory fractions `f_r = min(1, requested_r / alloc_r)` over cpu and memory the node
has, with two `std = |f_cpu − f_mem| / 2`, `balance = int64((1 − std) × 100)`; the score is the
*change* the pod makes to it, brought back to [50, 100]:

    score = 50 + (50 + balance(node + pod) − balance(node)) // 2

(75 when the pod leaves the balance as it was). `requested` is the node's actual requests (not
the non-zero ones). Kubernetes 1.23–1.35 scored `balance(node + pod)` alone; the real
kube-scheduler 1.36.3 on KWOK nodes packed differently from that model (docs: the fidelity
table), which is how the change was found. A pod requesting neither cpu nor memory scores 0
everywhere (the plugin skips it, kubernetes#129138 — the same ranking).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from scheduler.domain.filters import insufficient_resources, lacks, pods_on_node, too_many_pods
from scheduler.domain.model import NodeState, PodInfo
from scheduler.framework.batch import CandidateBatch, Columns
from scheduler.framework.interface import MAX_NODE_SCORE

FIT = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED)
RESOURCES = ("cpu", "memory", "ephemeral-storage")
DEFAULT_RESOURCE_WEIGHTS: Mapping[str, int] = {"cpu": 1, "memory": 1}


@dataclass(frozen=True)
class NodeResourcesFitArgs:
    """NodeResourcesFitArgs.scoringStrategy: the strategy and each scored resource's weight,
    checked as kube-scheduler's ValidateNodeResourcesFitArgs does; `from_config` reads a profile
    entry's `args` as kube-scheduler's configuration writes them."""

    strategy: str = LEAST_ALLOCATED
    resources: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS))

    def __post_init__(self) -> None:
        strategy, resources = self.strategy, self.resources
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown NodeResourcesFit strategy {strategy!r}; known: {STRATEGIES}")
        unknown = sorted(set(resources) - set(RESOURCES))
        if unknown:
            raise ValueError(f"NodeResourcesFit scores {RESOURCES}, not {unknown}")
        # kube-scheduler's ValidateNodeResourcesFitArgs: each weight in [1, MaxNodeScore].
        if any(
            isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_NODE_SCORE
            for w in resources.values()
        ):
            raise ValueError(
                f"resource weights must be integers from 1 to {MAX_NODE_SCORE}, got {dict(resources)}"
            )
        if not resources:
            raise ValueError("NodeResourcesFit needs at least one resource")
        object.__setattr__(self, "resources", MappingProxyType(dict(resources)))

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> NodeResourcesFitArgs:
        unknown = sorted(set(config) - {"scoringStrategy"})
        if unknown:
            raise ValueError(f"unknown args {unknown}; known: ['scoringStrategy']")
        strategy = config.get("scoringStrategy") or {}
        if not isinstance(strategy, Mapping) or set(strategy) - {"type", "resources"}:
            raise ValueError(f"scoringStrategy must be {{type, resources}}, got {strategy!r}")
        resources = strategy.get("resources")
        weights: dict[str, int] = dict(DEFAULT_RESOURCE_WEIGHTS)
        if resources is not None:
            if not isinstance(resources, list) or not all(
                isinstance(r, Mapping) and set(r) <= {"name", "weight"} and "name" in r
                for r in resources
            ):
                raise ValueError(
                    f"scoringStrategy.resources must be a list of {{name, weight}}, got {resources!r}"
                )
            weights = {str(r["name"]): r.get("weight", 1) for r in resources}
        return cls(str(strategy.get("type", LEAST_ALLOCATED)), weights)


def least_requested(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    """leastRequestedScore per element: (alloc − req) × 100 // alloc; 0 if req > alloc or
    alloc == 0."""
    safe = np.maximum(allocatable, 1)
    score = (allocatable - requested) * MAX_NODE_SCORE // safe
    return np.where((allocatable == 0) | (requested > allocatable), 0, score)


def most_requested(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    """mostRequestedScore per element: min(req, alloc) × 100 // alloc; 0 if alloc == 0.
    (req can pass alloc: request-less pods count the non-zero defaults.)"""
    safe = np.maximum(allocatable, 1)
    score = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
    return np.where(allocatable == 0, 0, score)


def _pod_scoring(pod: PodInfo) -> tuple[int, int, int]:
    nz = pod.nonzero_requests if pod.nonzero_requests is not None else pod.requests
    return nz.cpu_millicores, nz.memory_bytes, pod.requests.ephemeral_storage_bytes


class NodeResourcesFit:
    """Filter and Score (LeastAllocated or MostAllocated with resource weights)."""

    name = FIT

    def __init__(
        self,
        strategy: str = LEAST_ALLOCATED,
        resources: Mapping[str, int] = DEFAULT_RESOURCE_WEIGHTS,
    ) -> None:
        NodeResourcesFitArgs(strategy, resources)  # ValueError for a bad strategy or weights
        self.strategy = strategy
        self.resources = dict(resources)
        self._kernel = least_requested if strategy == LEAST_ALLOCATED else most_requested

    # -- Filter --

    def filter(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        """`insufficient_resources` over the batch: the same checks (`too_many_pods`, `lacks`),
        on arrays; a resource the pod does not request is not looked at."""
        want = pod.requests
        ok = ~too_many_pods(batch.pod_count, batch.alloc_pods)
        for amount, alloc, used in (
            (want.cpu_millicores, batch.alloc_cpu, batch.req_cpu),
            (want.memory_bytes, batch.alloc_mem, batch.req_mem),
            (want.ephemeral_storage_bytes, batch.alloc_eph, batch.req_eph),
        ):
            if amount > 0:
                ok &= ~lacks(amount, alloc, used)
        return ok

    def reasons(self, pod: PodInfo, node: NodeState) -> tuple[str, ...]:
        return tuple(
            insufficient_resources(
                pod.requests, node.info.allocatable, node.requested, pods_on_node(node)
            )
        )

    # -- Score --

    def _spec_columns(self, states: Sequence[NodeState]) -> Columns:
        """Per node, for each scored resource r (in `self.resources` order): allocatable
        (`alloc{k}`), allocatable floored at 1 (`safe{k}`, the divisor), r's weight where the
        node has r and 0 where not (`w{k}`); and the sum of those weights floored at 1."""
        columns: Columns = {}
        weight_sum = np.zeros(len(states), dtype=np.int64)
        for k, (resource, weight) in enumerate(self.resources.items()):
            attr = _ALLOCATABLE[resource]
            alloc = np.fromiter(
                (getattr(s.info.allocatable, attr) for s in states), dtype=np.int64, count=len(states)
            )
            columns[f"alloc{k}"] = alloc
            columns[f"safe{k}"] = np.maximum(alloc, 1)
            columns[f"w{k}"] = weight * (alloc > 0)
            weight_sum += columns[f"w{k}"]
        columns["weight_sum"] = np.maximum(weight_sum, 1)
        return columns

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        """Σ_r s_r × w_r // Σ_r w_r over the resources the node has; a node with none of them
        scores 0 (its weights are all 0)."""
        spec = batch.derived((self, "spec"), self._spec_columns, info_only=True)
        pod_amounts = _pod_scoring(pod)
        total = np.zeros(len(batch), dtype=np.int64)
        for k, resource in enumerate(self.resources):
            requested = getattr(batch, _REQUESTED[resource]) + pod_amounts[_POD[resource]]
            alloc, safe = spec[f"alloc{k}"], spec[f"safe{k}"]
            if self.strategy == LEAST_ALLOCATED:
                # leastRequestedScore (where alloc is 0 the weight is 0: the row does not count)
                scores = (alloc - requested) * MAX_NODE_SCORE // safe
                scores[requested > alloc] = 0
            else:
                scores = np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
            total += scores * spec[f"w{k}"]
        return total // spec["weight_sum"]


# Where each scored resource's numbers are: allocatable (Resources attribute), the node's
# requested amount (CandidateBatch column: non-zero requests for cpu and memory), the pod's.
_ALLOCATABLE = {"cpu": "cpu_millicores", "memory": "memory_bytes", "ephemeral-storage": "ephemeral_storage_bytes"}
_REQUESTED = {"cpu": "nz_cpu", "memory": "nz_mem", "ephemeral-storage": "req_eph"}
_POD = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}


def is_best_effort(pod: PodInfo) -> bool:
    """No cpu and no memory request: BalancedAllocation skips such pods."""
    return pod.requests.cpu_millicores == 0 and pod.requests.memory_bytes == 0


class NodeResourcesBalancedAllocation:
    """Score: how much the pod evens out the node's cpu and memory requests (module docstring)."""

    name = BALANCED

    @staticmethod
    def _spec_columns(states: Sequence[NodeState]) -> Columns:
        """cpu and memory allocatable as floats (1 where 0: the divisor), and whether the node
        has both (its balance is then 1 − |f_cpu − f_mem| / 2, else 1)."""
        count = len(states)
        cpu = np.fromiter((s.info.allocatable.cpu_millicores for s in states), np.float64, count)
        mem = np.fromiter((s.info.allocatable.memory_bytes for s in states), np.float64, count)
        return {
            "cpu": np.where(cpu > 0, cpu, 1.0),
            "mem": np.where(mem > 0, mem, 1.0),
            "both": (cpu > 0) & (mem > 0),
        }

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        if is_best_effort(pod):
            return np.zeros(len(batch), dtype=np.int64)
        spec = batch.derived((self, "spec"), self._spec_columns, info_only=True)
        with_pod = _balance(batch.req_cpu + pod.requests.cpu_millicores,
                            batch.req_mem + pod.requests.memory_bytes, spec)
        without_pod = _balance(batch.req_cpu, batch.req_mem, spec)
        half = MAX_NODE_SCORE // 2
        # Both balances lie in [50, 100], so the dividend is never negative: // is Go's /.
        return half + (half + with_pod - without_pod) // 2


def _balance(cpu: np.ndarray, mem: np.ndarray, spec: Columns) -> np.ndarray:
    """balancedResourceScore: int64((1 − |f_cpu − f_mem| / 2) × 100), 100 where the node lacks
    cpu or memory."""
    std = np.abs((np.minimum(1.0, cpu / spec["cpu"]) - np.minimum(1.0, mem / spec["mem"])) / 2)
    std[~spec["both"]] = 0.0
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
