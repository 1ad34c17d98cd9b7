"""PEAKS (Power Efficiency Aware Kubernetes Scheduler), as merged in
kubernetes-sigs/scheduler-plugins.

Implements `pkg/trimaran/peaks/peaks.go` (`Peaks.Score`, `Peaks.NormalizeScore`,
`getPowerJumpForUtilisation`, `getPowerModel`). Each node's power is modelled as

    P(x) = k0 + k1 · e^(k2 · x)            x = CPU utilization in percent (0–100)

and a node is scored by the jump in power the pod would cause:

    pod CPU = the pod's CPU *request* as kube-scheduler's helpers count it
              (k8s.io/kubernetes pkg/api/v1/resource GetResourceRequestQuantity: app containers
              + sidecars, or the largest init container, plus spec.overhead when that total is
              not zero); limits are not read, and a pod without a CPU request counts 0
    x = the node's measured utilization (%)     p = 100 × (x/100 × capacity + pod CPU) / capacity
              (status.capacity; p = 0 when the capacity is 0)
    raw = int64(k1 · (e^(k2·p) − e^(k2·x)) × 10^15)

with raw = 0 (MinNodeScore) when p > 100 or when the node has no CPU metric. A node without a
power model gets (0, 0, 0), hence raw 0. NormalizeScore maps the raws of all candidates onto
0–100, *inverted* (the smallest jump scores 100):
`100 − int64(100 · (raw − min) / (max − min))`, or `100 − (raw − min)` when min = max, and
leaves them untouched when min = max = 0.

Consequences kept on purpose, because they are PEAKS' behaviour: a node over 100 % or without
metrics gets raw 0 — the lowest cost, hence the *best* score after normalization; a pod with no
CPU request has a jump of 0 everywhere, so every node scores 0 (no preference); pods bound since
the last metrics sample are not counted; a node's score depends on the other candidates.

Users bring (k0, k1, k2) per node; `fit_power_model` fits them to a node's 11-point power
curve by least squares (what the simulator does for its nodes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from common.curves import UTILIZATION_LEVELS, PowerCurve
from scheduler.domain.model import NodeState, PodInfo
from scheduler.framework.batch import CandidateBatch, Columns
from scheduler.plugins.gomath import go_int64
from scheduler.plugins.trimaran import capacity_millicores_column, utilization_pct_column

NAME = "Peaks"
MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
RAW_SCALE = 1e15  # math.Pow(10, 15): the jump in watts is scaled before truncating to int64


@dataclass(frozen=True)
class PeaksPowerModel:
    """PEAKS' PowerModel: P(x) = k0 + k1·e^(k2·x), x in percent."""

    k0: float
    k1: float
    k2: float

    def watts(self, utilization_pct: float) -> float:
        return self.k0 + self.k1 * math.exp(self.k2 * utilization_pct)


NO_MODEL = PeaksPowerModel(0.0, 0.0, 0.0)  # getPowerModel's answer for an unknown node


def pod_request_millicores(pod: PodInfo) -> int:
    """GetResourceRequestQuantity(pod, cpu): the effective CPU request, with the overhead only
    when the containers request some CPU."""
    without_overhead = pod.requests.cpu_millicores - pod.overhead.cpu_millicores
    return pod.requests.cpu_millicores if without_overhead != 0 else 0


def peaks_raw_scores(
    utilization_pct: npt.ArrayLike,
    capacity_millicores: npt.ArrayLike,
    pod_millicores: float,
    k1: npt.ArrayLike,
    k2: npt.ArrayLike,
) -> npt.NDArray[np.int64]:
    """The Score kernel over a batch of nodes: raw int64 costs before NormalizeScore.
    `utilization_pct` is NaN where the node has no CPU metric."""
    util = np.asarray(utilization_pct, dtype=np.float64)
    capacity = np.asarray(capacity_millicores, dtype=np.float64)
    k1_arr = np.asarray(k1, dtype=np.float64)
    k2_arr = np.asarray(k2, dtype=np.float64)
    util, capacity, k1_arr, k2_arr = np.broadcast_arrays(util, capacity, k1_arr, k2_arr)
    used_millicores = (util / 100) * capacity
    with np.errstate(divide="ignore", invalid="ignore"):
        predicted = np.where(
            capacity != 0, 100 * (used_millicores + float(pod_millicores)) / capacity, 0.0
        )
    with np.errstate(over="ignore", invalid="ignore"):
        jump = k1_arr * (np.exp(k2_arr * predicted) - np.exp(k2_arr * util))
        raw = go_int64(jump * RAW_SCALE)
    return np.where((predicted > 100) | np.isnan(util), MIN_NODE_SCORE, raw).astype(np.int64)


def peaks_normalize(raw: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """NormalizeScore: min–max onto 0–100, lowest cost → 100 (int64 arithmetic as in Go)."""
    scores = np.asarray(raw, dtype=np.int64)
    if scores.size == 0:
        return scores.copy()
    low, high = scores.min(), scores.max()
    if low == 0 and high == 0:
        return scores.copy()
    with np.errstate(over="ignore"):
        offset = scores - low  # int64, wrapping as Go's does
        if high == low:
            return (MAX_NODE_SCORE - offset).astype(np.int64)
        span = np.float64(high - low)
    normalized = go_int64(np.float64(MAX_NODE_SCORE) * offset.astype(np.float64) / span)
    return (MAX_NODE_SCORE - normalized).astype(np.int64)


def fit_power_model(curve: PowerCurve) -> PeaksPowerModel:
    """Least-squares (k0, k1, k2) to a power curve's 11 points (x = 0, 10 … 100 %).

    For a fixed k2 the model is linear in (k0, k1); k2 is searched on a grid of both signs
    (a concave curve fits with k1 < 0, k2 < 0) and refined around the best grid value.
    """
    xs = np.array([u * 100.0 for u in UTILIZATION_LEVELS])
    ys = np.array(curve.as_points())

    def solve(k2: float) -> tuple[float, float, float]:
        design = np.column_stack([np.ones_like(xs), np.exp(k2 * xs)])
        coef, *_ = np.linalg.lstsq(design, ys, rcond=None)
        residual = float(np.sum((design @ coef - ys) ** 2))
        return residual, float(coef[0]), float(coef[1])

    magnitudes = np.geomspace(1e-4, 0.2, 60)
    candidates = [float(m) for m in magnitudes] + [-float(m) for m in magnitudes]
    best_k2 = min(candidates, key=lambda k: solve(k)[0])
    low, high = sorted((best_k2 * 0.8, best_k2 * 1.25))
    golden = 1.618033988749895
    for _ in range(60):  # golden-section refinement; the residual is smooth in k2
        a = high - (high - low) / golden
        b = low + (high - low) / golden
        if solve(a)[0] < solve(b)[0]:
            high = b
        else:
            low = a
    k2 = (low + high) / 2
    _, k0, k1 = solve(k2)
    return PeaksPowerModel(k0, k1, k2)


ARG_KEYS = ("nodePowerModel",)


@dataclass(frozen=True)
class PeaksArgs:
    """The plugin's arguments (PeaksArgs): the `nodePowerModel` given per node; a node left out
    is fitted to its power curve (`power_models`). `from_config` reads a profile entry's `args`."""

    node_power_model: Mapping[str, PeaksPowerModel] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node, model in self.node_power_model.items():
            if not isinstance(model, PeaksPowerModel):
                raise ValueError(f"{NAME}: nodePowerModel.{node} must be {{k0, k1, k2}}, got {model!r}")
        object.__setattr__(self, "node_power_model", MappingProxyType(dict(self.node_power_model)))

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> PeaksArgs:
        """The original's `nodePowerModel` ({node: {k0, k1, k2}}, as in PeaksArgs or its
        NODE_POWER_MODEL file). ValueError for bad args."""
        unknown = sorted(set(config) - set(ARG_KEYS))
        if unknown:
            raise ValueError(f"{NAME}: unknown args {unknown}; known: {list(ARG_KEYS)}")
        given = config.get("nodePowerModel") or {}
        if not isinstance(given, Mapping):
            raise ValueError(f"{NAME}: nodePowerModel must map a node name to {{k0, k1, k2}}")
        models: dict[str, PeaksPowerModel] = {}
        for node, model in given.items():
            if not isinstance(model, Mapping) or set(model) != {"k0", "k1", "k2"}:
                raise ValueError(f"{NAME}: nodePowerModel.{node} must be {{k0, k1, k2}}, got {model!r}")
            try:
                models[str(node)] = PeaksPowerModel(*(float(model[k]) for k in ("k0", "k1", "k2")))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{NAME}: nodePowerModel.{node}: {exc}") from exc
        return cls(models)


def power_models(
    args: PeaksArgs, curves: Mapping[str, PowerCurve] | None = None
) -> dict[str, PeaksPowerModel]:
    """Each node's power model: the one `args` give, else one fitted to the node's power curve
    (`curves`, e.g. the scheduler config's or the simulator's)."""
    models: dict[str, PeaksPowerModel] = {}
    fits: dict[PowerCurve, PeaksPowerModel] = {}
    for node, curve in (curves or {}).items():
        if curve not in fits:
            fits[curve] = fit_power_model(curve)
        models[node] = fits[curve]
    models.update(args.node_power_model)
    return models


class Peaks:
    """The Score plugin with its NormalizeScore step (`normalize`) over a CandidateBatch: raw
    costs per node (a batch of one gives the same raw cost), then the min–max inversion over
    the candidates."""

    name = NAME

    def __init__(self, models: Mapping[str, PeaksPowerModel]) -> None:
        self.models = dict(models)

    def _model_columns(self, nodes: Sequence[NodeState]) -> Columns:
        models = [self.models.get(n.info.name, NO_MODEL) for n in nodes]
        return {
            "k1": np.array([m.k1 for m in models], dtype=np.float64),
            "k2": np.array([m.k2 for m in models], dtype=np.float64),
        }

    def _load_columns(self, nodes: Sequence[NodeState]) -> Columns:
        return {
            "util_pct": utilization_pct_column(nodes),
            "capacity": capacity_millicores_column(nodes),
        }

    def score(self, pod: PodInfo, batch: CandidateBatch) -> npt.NDArray[np.int64]:
        """Score: raw int64 costs (the smaller, the better) before NormalizeScore."""
        models = batch.derived((self, "model"), self._model_columns, info_only=True)
        load = batch.derived((self, "load"), self._load_columns)
        return peaks_raw_scores(
            load["util_pct"],
            load["capacity"],
            pod_request_millicores(pod),
            models["k1"],
            models["k2"],
        )

    def normalize(self, pod: PodInfo, scores: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """NormalizeScore over the batch's raw costs: 0–100, the smallest jump 100."""
        return peaks_normalize(scores)
