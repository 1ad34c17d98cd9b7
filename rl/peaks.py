"""PEAKS (Power Efficiency Aware Kubernetes Scheduler) as a baseline, reproduced from its plugin.

PEAKS (kubernetes-sigs/scheduler-plugins, pkg/peaks) models each node's power as

    P(x) = k0 + k1 · e^(k2 · x)            x = CPU utilization in percent (0–100)

and scores a node by the jump in power the pod would cause:

    x = the node's measured utilization (%)          p = x + 100 · pod CPU / node capacity
    jump = k1 · (e^(k2·p) − e^(k2·x))                raw = int64(jump · 10^15)

with `raw = 0` (the plugin's MinNodeScore) when p > 100 or when the node has no CPU metric.
NormalizeScore then maps the raw values of all candidates onto 0–100, *inverted*:
`score = 100 − int64(100 · (raw − min) / (max − min))` (and `100 − (raw − min)` when all are
equal; untouched when min = max = 0). Consequences reproduced on purpose, because they are
PEAKS' behaviour: a node over 100 % or without metrics gets raw 0 — the lowest cost, hence the
*best* score after normalization; pods bound since the last metrics sample are not counted;
and a node's score depends on the other candidates.

The pod's CPU is its request, else its limit, else 1000 m (scheduler-plugins'
DefaultRequestsMilliCores). Users bring (k0, k1, k2) per node; the simulator fits them to each
node's curve by least squares (`fit_power_model`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from agent.curves import UTILIZATION_LEVELS, PowerCurve
from rl.trimaran import predicted_utilization_pct
from scheduler.model import NodeState, PodInfo, ScoreResult

NAME = "peaks"
MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
RAW_SCALE = 1e15  # PEAKS multiplies the jump in watts by 10^15 before truncating to int64
DEFAULT_REQUEST_MILLICORES = 1000


@dataclass(frozen=True)
class PeaksPowerModel:
    """P(x) = k0 + k1·e^(k2·x), x in percent."""

    k0: float
    k1: float
    k2: float

    def watts(self, utilization_pct: float) -> float:
        return self.k0 + self.k1 * math.exp(self.k2 * utilization_pct)


def power_jump(current_pct: float, predicted_pct: float, model: PeaksPowerModel) -> float:
    """PEAKS' getPowerJumpForUtilisation."""
    return model.k1 * (math.exp(model.k2 * predicted_pct) - math.exp(model.k2 * current_pct))


def fit_power_model(curve: PowerCurve) -> PeaksPowerModel:
    """Least-squares (k0, k1, k2) to the curve's 11 points (x = 0, 10 … 100 %).

    For a fixed k2 the model is linear in (k0, k1); k2 is searched on a grid of both signs
    (a concave curve fits with k1 < 0, k2 < 0) and refined around the best grid value.
    """
    xs = np.array([u * 100.0 for u in UTILIZATION_LEVELS])
    ys = np.array(curve.as_points())

    def solve(k2: float) -> tuple[float, float, float]:
        basis = np.exp(k2 * xs)
        design = np.column_stack([np.ones_like(xs), basis])
        coef, *_ = np.linalg.lstsq(design, ys, rcond=None)
        residual = float(np.sum((design @ coef - ys) ** 2))
        return residual, float(coef[0]), float(coef[1])

    magnitudes = np.geomspace(1e-4, 0.2, 60)
    candidates = [float(m) for m in magnitudes] + [-float(m) for m in magnitudes]
    best_k2 = min(candidates, key=lambda k: solve(k)[0])
    low, high = best_k2 * 0.8, best_k2 * 1.25
    if low > high:
        low, high = high, low
    for _ in range(60):  # golden-section refinement; the residual is smooth in k2
        a = high - (high - low) / 1.618033988749895
        b = low + (high - low) / 1.618033988749895
        if solve(a)[0] < solve(b)[0]:
            high = b
        else:
            low = a
    k2 = (low + high) / 2
    _, k0, k1 = solve(k2)
    return PeaksPowerModel(k0, k1, k2)


def pod_cpu_millicores(pod: PodInfo, limit_millicores: int | None = None) -> int:
    """PEAKS' PredictUtilisation: request, else limit, else the default."""
    if pod.requests.cpu_millicores > 0:
        return pod.requests.cpu_millicores
    if limit_millicores is not None:
        return limit_millicores
    return DEFAULT_REQUEST_MILLICORES


def raw_score(
    utilization_pct: float | None,
    capacity_millicores: float,
    pod_millicores: int,
    model: PeaksPowerModel,
) -> int:
    """PEAKS' Score() for one node: int64(jump × 10^15), or 0 (MinNodeScore)."""
    if utilization_pct is None:
        return MIN_NODE_SCORE
    predicted_pct = predicted_utilization_pct(utilization_pct, capacity_millicores, pod_millicores)
    if predicted_pct > 100.0:
        return MIN_NODE_SCORE
    return int(power_jump(utilization_pct, predicted_pct, model) * RAW_SCALE)


def normalize(raw: Sequence[int]) -> list[int]:
    """PEAKS' NormalizeScore: min–max onto 0–100, lowest cost → 100."""
    if not raw:
        return []
    low, high = min(raw), max(raw)
    if low == 0 and high == 0:
        return list(raw)
    if high == low:
        return [MAX_NODE_SCORE - (s - low) for s in raw]
    return [MAX_NODE_SCORE - int(MAX_NODE_SCORE * (s - low) / (high - low)) for s in raw]


class PeaksScorer:
    """PEAKS' Score + NormalizeScore over one batch of candidates (see the module docstring)."""

    name = NAME

    def __init__(self, models: Mapping[str, PeaksPowerModel]) -> None:
        self.models = dict(models)

    def score(self, pod: PodInfo, nodes: Sequence[NodeState], now: float) -> list[ScoreResult]:
        pod_mc = pod_cpu_millicores(pod)
        raws: list[int] = []
        for node in nodes:
            telemetry = node.telemetry
            utilization = telemetry.utilization if telemetry is not None else None
            model = self.models.get(node.info.name, PeaksPowerModel(0.0, 0.0, 0.0))
            raws.append(
                raw_score(
                    None if utilization is None else utilization * 100.0,
                    float(node.info.allocatable.cpu_millicores),
                    pod_mc,
                    model,
                )
            )
        return [
            ScoreResult(node.info.name, float(score), reason="ok")
            for node, score in zip(nodes, normalize(raws), strict=True)
        ]
