"""Trimaran's TargetLoadPacking score plugin, as merged in kubernetes-sigs/scheduler-plugins.

Implements `pkg/trimaran/targetloadpacking/targetloadpacking.go` (`TargetLoadPacking.Score`,
`PredictUtilisation`; defaults from `apis/config/v1/defaults.go`). It packs nodes up to a
target CPU utilization `T` (default 40 %), measured rather than requested:

    pod CPU  = Σ over the pod's app containers (spec.containers, not init containers):
                 the CPU limit if the key is set, else round(request × 1.5) if the request key
                 is set, else 1,000 m
               + spec.overhead's CPU
    U        = 100 × (U_node / 100 × capacity + pod CPU + CPU of pods bound since the sample)
               / capacity          (node status.capacity, not allocatable; U = 0 if capacity 0)
    U ≤ T:        score = round((100 − T) × U / T + T)        T … 100, rising with U
    T < U ≤ 100:  score = round(T × (100 − U) / (100 − T))    T … 0, falling
    U > 100, or no CPU metric for the node:  score = 0 (MinNodeScore)

`round` is Go's math.Round (halves away from zero). There is no NormalizeScore step: the score
is absolute, so a node's score never depends on the other candidates.

Pods bound since the sample are predicted the same way, container by container, from
`NodeState.pods_since_sample`. Where a producer only knows their total
(`cpu_since_sample_cores`), that total is taken as one container's request (× 1.5).
The original also counts pods bound up to 60 s *before* the end of its load-watcher window,
because its agents report once a minute; our samples carry their own timestamp, so only pods
bound after the sample count (no double counting in the simulator, whose samples are exact).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from common.quantity import quantity_units
from scheduler.domain.model import APP_CONTAINER, NodeState, PodInfo
from scheduler.framework.batch import CandidateBatch, Columns
from scheduler.plugins.gomath import go_round

NAME = "TargetLoadPacking"
MIN_NODE_SCORE = 0
DEFAULT_TARGET_UTILIZATION_PCT = 40  # cfgv1.DefaultTargetUtilizationPercent
DEFAULT_REQUESTS_MILLICORES = 1000  # cfgv1.DefaultRequestsMilliCores
DEFAULT_REQUESTS_MULTIPLIER = 1.5  # cfgv1.DefaultRequestsMultiplier ("1.5")


ARG_KEYS = ("targetUtilization", "defaultRequests", "defaultRequestsMultiplier")


@dataclass(frozen=True)
class TargetLoadPackingArgs:
    """The plugin's arguments (TargetLoadPackingArgs), with the original's defaults; `from_config`
    reads them from a profile entry's `args`."""

    target_utilization_pct: int = DEFAULT_TARGET_UTILIZATION_PCT
    default_requests_millicores: int = DEFAULT_REQUESTS_MILLICORES
    default_requests_multiplier: float = DEFAULT_REQUESTS_MULTIPLIER

    def __post_init__(self) -> None:
        target = _percent(self.target_utilization_pct)
        if not 0 < target <= 100:
            raise ValueError(f"target utilization must be in (0, 100] percent, got {target}")
        if self.default_requests_millicores < 0 or self.default_requests_multiplier < 0:
            raise ValueError("default requests and their multiplier must be >= 0")

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> TargetLoadPackingArgs:
        """The keys of the original's KubeSchedulerConfiguration: `targetUtilization` (percent),
        `defaultRequests` ({cpu: "1000m"}), `defaultRequestsMultiplier` (a string, as there:
        "1.5"). ValueError for anything else."""
        unknown = sorted(set(config) - set(ARG_KEYS))
        if unknown:
            raise ValueError(f"{NAME}: unknown args {unknown}; known: {list(ARG_KEYS)}")
        target = config.get("targetUtilization", DEFAULT_TARGET_UTILIZATION_PCT)
        requests = config.get("defaultRequests") or {}
        if not isinstance(requests, Mapping) or set(requests) - {"cpu"}:
            raise ValueError(f"{NAME}: defaultRequests must be {{cpu: QUANTITY}}, got {requests!r}")
        try:
            default_millicores = DEFAULT_REQUESTS_MILLICORES
            if "cpu" in requests:
                cpu = requests["cpu"]
                if not isinstance(cpu, str | int | float):  # as quantity_units refuses it
                    raise ValueError(f"not a Kubernetes quantity: {cpu!r}")
                default_millicores = quantity_units(cpu, 1000)  # MilliValue()
            multiplier = float(str(config.get("defaultRequestsMultiplier", "1.5")))
        except ValueError as exc:
            raise ValueError(f"{NAME}: {exc}") from exc
        return cls(_percent(target), default_millicores, multiplier)


def _percent(target: object) -> int:
    if isinstance(target, bool) or not isinstance(target, int):
        raise ValueError(f"{NAME}: targetUtilization must be an integer percent, got {target!r}")
    return target


def predicted_pod_millicores(pod: PodInfo, args: TargetLoadPackingArgs) -> int:
    """The pod's predicted CPU: PredictUtilisation summed over its app containers, plus the
    pod's CPU overhead (TargetLoadPacking.Score)."""
    total = 0
    for container in pod.container_resources():
        if container.kind != APP_CONTAINER:
            continue
        if container.cpu_limit_millicores is not None:
            total += container.cpu_limit_millicores
        elif container.cpu_request_millicores is not None:
            request = container.cpu_request_millicores * args.default_requests_multiplier
            total += int(go_round(request))
        else:
            total += args.default_requests_millicores
    return total + pod.overhead.cpu_millicores


def missing_millicores(node: NodeState, args: TargetLoadPackingArgs) -> int:
    """Predicted CPU of the pods bound to `node` since its telemetry sample."""
    if node.pods_since_sample:
        return sum(predicted_pod_millicores(p, args) for p in node.pods_since_sample)
    if node.cpu_since_sample_cores > 0:
        request = round(node.cpu_since_sample_cores * 1000)
        return int(go_round(request * args.default_requests_multiplier))
    return 0


def target_load_packing_scores(
    utilization_pct: npt.ArrayLike,
    capacity_millicores: npt.ArrayLike,
    added_millicores: npt.ArrayLike,
    target_pct: float = DEFAULT_TARGET_UTILIZATION_PCT,
) -> npt.NDArray[np.int64]:
    """The Score kernel over a batch of nodes (one row each).

    `utilization_pct`: the node's measured CPU in percent, NaN where there is no metric;
    `capacity_millicores`: status.capacity CPU; `added_millicores`: the pod's predicted CPU plus
    that of the pods bound since the sample. Arithmetic in the original's order, so scores on a
    .5 boundary round as in Go."""
    util = np.asarray(utilization_pct, dtype=np.float64)
    capacity = np.asarray(capacity_millicores, dtype=np.float64)
    added = np.asarray(added_millicores, dtype=np.float64)
    util, capacity, added = np.broadcast_arrays(util, capacity, added)
    used_millicores = (util / 100) * capacity
    with np.errstate(divide="ignore", invalid="ignore"):
        predicted = np.where(capacity != 0, 100 * (used_millicores + added) / capacity, 0.0)
    target = float(target_pct)
    with np.errstate(divide="ignore", invalid="ignore"):
        penalised = go_round(target * (100 - predicted) / (100 - target))
    rising = go_round((100 - target) * predicted / target + target)
    score = np.where(predicted > target, penalised, rising)
    score = np.where((predicted > 100) | np.isnan(util), MIN_NODE_SCORE, score)
    return score.astype(np.int64)


def utilization_pct_column(nodes: Sequence[NodeState]) -> npt.NDArray[np.float64]:
    """Each node's measured CPU utilization in percent; NaN where there is no metric."""
    out = np.full(len(nodes), np.nan)
    for row, node in enumerate(nodes):
        telemetry = node.telemetry
        if telemetry is not None and telemetry.utilization is not None:
            out[row] = telemetry.utilization * 100.0
    return out


def capacity_millicores_column(nodes: Sequence[NodeState]) -> npt.NDArray[np.float64]:
    """Each node's status.capacity CPU (allocatable where the capacity is not known)."""
    return np.array([n.info.cpu_capacity_millicores for n in nodes], dtype=np.float64)


class TargetLoadPacking:
    """The Score plugin (no NormalizeScore) over a CandidateBatch; the single-node call is a
    batch of one. Per-node inputs (utilization, capacity, the pods bound since the sample) are
    derived columns of the batch, recomputed only for the nodes that change."""

    name = NAME

    def __init__(self, args: TargetLoadPackingArgs | None = None) -> None:
        self.args = args or TargetLoadPackingArgs()

    def _columns(self, nodes: Sequence[NodeState]) -> Columns:
        return {
            "util_pct": utilization_pct_column(nodes),
            "capacity": capacity_millicores_column(nodes),
            "missing": np.array(
                [missing_millicores(n, self.args) for n in nodes], dtype=np.float64
            ),
        }

    def score(self, pod: PodInfo, batch: CandidateBatch) -> npt.NDArray[np.int64]:
        cols = batch.derived(self, self._columns)
        return target_load_packing_scores(
            cols["util_pct"],
            cols["capacity"],
            predicted_pod_millicores(pod, self.args) + cols["missing"],
            self.args.target_utilization_pct,
        )
