"""Trimaran's TargetLoadPacking as a baseline, reproduced from its plugin.

TargetLoadPacking (kubernetes-sigs/scheduler-plugins, pkg/trimaran/targetloadpacking) packs
nodes up to a target CPU utilization `T` (default 40 %), measured rather than requested:

    U = 100 · (node CPU used + predicted pod CPU + predicted CPU of pods bound since the
               metrics were taken) / node capacity                             (percent)
    U ≤ T:        score = round((100 − T) · U / T + T)          (T … 100, rising with U)
    T < U ≤ 100:  score = round(T · (100 − U) / (100 − T))      (T … 0, falling)
    U > 100:      score = 0
    no CPU metric for the node: score = 0

A pod's predicted CPU is its CPU limit when set, else its request × 1.5
(`defaultRequestsMultiplier`), else 1000 m (`defaultRequests`). `round` is Go's math.Round
(halves away from zero). There is no NormalizeScore: the score is absolute. The README's example
configuration disables LeastAllocated and BalancedAllocation, so it is the only score here too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.model import NodeState, PodInfo, ScoreResult

NAME = "trimaran"
MIN_NODE_SCORE = 0


@dataclass(frozen=True)
class TargetLoadPackingArgs:
    target_utilization_pct: float = 40.0  # scheduler-plugins' DefaultTargetUtilizationPercent
    default_requests_millicores: int = 1000  # DefaultRequestsMilliCores
    default_requests_multiplier: float = 1.5  # DefaultRequestsMultiplier


def go_round(value: float) -> int:
    """Go's math.Round: to the nearest integer, halves away from zero."""
    if value >= 0:
        return int(math.floor(value + 0.5))
    return -int(math.floor(-value + 0.5))


def predicted_millicores(
    request_millicores: int, limit_millicores: int | None, args: TargetLoadPackingArgs
) -> int:
    """TargetLoadPacking's PredictUtilisation for one pod."""
    if limit_millicores is not None:
        return limit_millicores
    if request_millicores > 0:
        return go_round(request_millicores * args.default_requests_multiplier)
    return args.default_requests_millicores


def target_load_score(predicted_pct: float, args: TargetLoadPackingArgs) -> int:
    target = args.target_utilization_pct
    if predicted_pct > target:
        if predicted_pct > 100:
            return MIN_NODE_SCORE
        return go_round(target * (100 - predicted_pct) / (100 - target))
    return go_round((100 - target) * predicted_pct / target + target)


def predicted_utilization_pct(
    utilization_pct: float, capacity_millicores: float, added_millicores: float
) -> float:
    """The node's measured CPU in percent plus `added_millicores`, as a percentage of its
    capacity (0 for a node without capacity): the prediction both Trimaran and PEAKS score."""
    if capacity_millicores == 0:
        return 0.0
    used_millicores = utilization_pct / 100.0 * capacity_millicores
    return 100.0 * (used_millicores + added_millicores) / capacity_millicores


def node_score(
    utilization_pct: float | None,
    capacity_millicores: float,
    pod_millicores: int,
    missing_millicores: int,
    args: TargetLoadPackingArgs,
) -> int:
    """TargetLoadPacking's Score() for one node."""
    if utilization_pct is None:
        return MIN_NODE_SCORE
    predicted = predicted_utilization_pct(
        utilization_pct, capacity_millicores, pod_millicores + missing_millicores
    )
    return target_load_score(predicted, args)


class TargetLoadPackingScorer:
    name = NAME

    def __init__(self, args: TargetLoadPackingArgs | None = None) -> None:
        self.args = args or TargetLoadPackingArgs()

    def score(self, pod: PodInfo, nodes: Sequence[NodeState], now: float) -> list[ScoreResult]:
        pod_mc = predicted_millicores(pod.requests.cpu_millicores, None, self.args)
        results = []
        for node in nodes:
            telemetry = node.telemetry
            utilization = None
            if telemetry is not None and telemetry.utilization is not None:
                utilization = telemetry.utilization * 100.0
            # Pods bound since the sample are predicted like the incoming pod (by request).
            missing = (
                predicted_millicores(round(node.cpu_since_sample_cores * 1000), None, self.args)
                if node.cpu_since_sample_cores > 0
                else 0
            )
            score = node_score(
                utilization, float(node.info.allocatable.cpu_millicores), pod_mc, missing, self.args
            )
            results.append(ScoreResult(node.info.name, float(score)))
        return results
