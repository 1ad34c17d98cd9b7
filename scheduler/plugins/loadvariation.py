"""Trimaran's LoadVariationRiskBalancing score plugin, as merged in kubernetes-sigs/scheduler-plugins.

Implements `pkg/trimaran/loadvariationriskbalancing/loadvariationriskbalancing.go`
(`LoadVariationRiskBalancing.Score`), `analysis.go` (`computeScore`) and the helpers of
`pkg/trimaran/resourcestats.go` (`CreateResourceStats`, `GetMuSigma`, `GetResourceData`,
`GetEffectiveResource`). Per resource (CPU in millicores, memory in MiB), on the node's
*allocatable* (unlike TargetLoadPacking and PEAKS, which use capacity):

    used = measured average % × allocatable / 100      σ_used = measured stdev % × alloc / 100
    (request ≥ 0, used and σ_used clamped to [0, allocatable])
    μ = min(1, (used + pod request) / allocatable)     σ = min(1, σ_used / allocatable)
    σ ← σ^(1/sensitivity) when sensitivity ≥ 0;  σ ← min(1, max(0, margin × σ))
    score_r = (1 − (μ + σ) / 2) × 100                  (0 when allocatable ≤ 0)

The node's score is round(min(score_cpu, score_memory)) when it has both metrics, else the one
it has (`max` with 0 for the missing one); 0 (MinNodeScore) without metrics. Defaults:
margin 1, sensitivity 1. The pod request is its effective request as `GetEffectiveResource`
counts it: Σ app containers, or the largest init container (sidecars counted as plain init
containers), plus the whole overhead. No NormalizeScore.

kubejoule's telemetry carries each node's CPU utilization only (no standard deviation, no
memory utilization), so the plugin scores the CPU mean with σ = 0; the kernel takes all six
inputs, and the original's table cases with a deviation or memory run through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.domain.model import APP_CONTAINER, NodeState, PodInfo
from scheduler.framework.batch import CandidateBatch, Columns
from scheduler.plugins.gomath import go_round
from scheduler.plugins.trimaran import utilization_pct_column

NAME = "LoadVariationRiskBalancing"
MAX_NODE_SCORE = 100
MIB = 1024.0 * 1024.0  # trimaran.MegaFactor's inverse
DEFAULT_SAFE_VARIANCE_MARGIN = 1.0  # cfgv1.DefaultSafeVarianceMargin
DEFAULT_SAFE_VARIANCE_SENSITIVITY = 1.0  # cfgv1.DefaultSafeVarianceSensitivity
ARG_KEYS = ("safeVarianceMargin", "safeVarianceSensitivity")


@dataclass(frozen=True)
class LoadVariationArgs:
    """The plugin's arguments (LoadVariationRiskBalancingArgs), with the original's defaults;
    `from_config` reads them from a profile entry's `args`."""

    safe_variance_margin: float = DEFAULT_SAFE_VARIANCE_MARGIN
    safe_variance_sensitivity: float = DEFAULT_SAFE_VARIANCE_SENSITIVITY

    def __post_init__(self) -> None:
        for key, field in zip(ARG_KEYS, ("safe_variance_margin", "safe_variance_sensitivity"), strict=True):
            object.__setattr__(self, field, _number(key, getattr(self, field)))

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> LoadVariationArgs:
        """The original's keys; ValueError for anything else."""
        unknown = sorted(set(config) - set(ARG_KEYS))
        if unknown:
            raise ValueError(f"{NAME}: unknown args {unknown}; known: {list(ARG_KEYS)}")
        return cls(
            _number(ARG_KEYS[0], config.get(ARG_KEYS[0], DEFAULT_SAFE_VARIANCE_MARGIN)),
            _number(ARG_KEYS[1], config.get(ARG_KEYS[1], DEFAULT_SAFE_VARIANCE_SENSITIVITY)),
        )


def _number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{NAME}: {key} must be a number, got {value!r}")
    return float(value)


def effective_request(pod: PodInfo) -> tuple[int, int]:
    """GetEffectiveResource(pod, requests): (CPU millicores, memory bytes)."""
    cpu = memory = 0
    containers = pod.container_resources()
    for c in containers:
        if c.kind == APP_CONTAINER:
            cpu += c.cpu_request_millicores or 0
            memory += c.memory_request_bytes or 0
    for c in containers:
        if c.kind != APP_CONTAINER:
            cpu = max(cpu, c.cpu_request_millicores or 0)
            memory = max(memory, c.memory_request_bytes or 0)
    return cpu + pod.overhead.cpu_millicores, memory + pod.overhead.memory_bytes


def risk_scores(
    allocatable: npt.ArrayLike,
    request: npt.ArrayLike,
    used_avg_pct: npt.ArrayLike,
    used_stdev_pct: npt.ArrayLike,
    args: LoadVariationArgs = LoadVariationArgs(),
) -> npt.NDArray[np.float64]:
    """computeScore for one resource over a batch (CreateResourceStats' absolute values from
    the measured percentages first); floats in 0–100, 0 where allocatable ≤ 0."""
    capacity = np.asarray(allocatable, dtype=np.float64)
    req = np.maximum(np.asarray(request, dtype=np.float64), 0)
    used = np.asarray(used_avg_pct, dtype=np.float64) * capacity / 100
    stdev = np.asarray(used_stdev_pct, dtype=np.float64) * capacity / 100
    used = np.maximum(np.minimum(used, capacity), 0)
    stdev = np.maximum(np.minimum(stdev, capacity), 0)
    valid = capacity > 0
    safe = np.where(valid, capacity, 1.0)
    mu = np.clip((used + req) / safe, 0, 1)
    sigma = np.clip(stdev / safe, 0, 1)
    sensitivity = args.safe_variance_sensitivity
    if sensitivity >= 0:
        with np.errstate(divide="ignore"):
            sigma = np.power(sigma, np.float64(1.0) / np.float64(sensitivity))
    sigma = np.clip(sigma * args.safe_variance_margin, 0, 1)
    risk = (mu + sigma) / 2
    return np.where(valid, (1.0 - risk) * MAX_NODE_SCORE, 0.0)


def load_variation_scores(
    cpu: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, npt.ArrayLike],
    memory: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, npt.ArrayLike],
    args: LoadVariationArgs = LoadVariationArgs(),
) -> npt.NDArray[np.int64]:
    """The Score kernel: per resource (allocatable, request, average %, stdev %), where an
    average of NaN means the node has no metric of that resource; CPU in millicores, memory in
    bytes. round(min) of the two scores with both metrics, else the one there is, else 0."""
    cpu_alloc, cpu_req, cpu_avg, cpu_std = (np.asarray(v, dtype=np.float64) for v in cpu)
    mem_alloc, mem_req, mem_avg, mem_std = (np.asarray(v, dtype=np.float64) for v in memory)
    cpu_ok = ~np.isnan(cpu_avg)
    mem_ok = ~np.isnan(mem_avg)
    cpu_score = np.where(
        cpu_ok, risk_scores(cpu_alloc, cpu_req, np.nan_to_num(cpu_avg), cpu_std, args), 0.0
    )
    mem_score = np.where(
        mem_ok,
        risk_scores(mem_alloc / MIB, mem_req / MIB, np.nan_to_num(mem_avg), mem_std, args),
        0.0,
    )
    total = np.where(
        cpu_ok & mem_ok, np.minimum(cpu_score, mem_score), np.maximum(cpu_score, mem_score)
    )
    return go_round(total).astype(np.int64)


class LoadVariationRiskBalancing:
    """The Score plugin over a CandidateBatch (no NormalizeScore); CPU mean only, σ = 0 (see
    the module docstring)."""

    name = NAME

    def __init__(self, args: LoadVariationArgs | None = None) -> None:
        self.args = args or LoadVariationArgs()

    @staticmethod
    def _columns(nodes: Sequence[NodeState]) -> Columns:
        return {
            "cpu_avg": utilization_pct_column(nodes),
            "cpu_alloc": np.array([n.info.allocatable.cpu_millicores for n in nodes], dtype=float),
            "mem_alloc": np.array([n.info.allocatable.memory_bytes for n in nodes], dtype=float),
        }

    def score(self, pod: PodInfo, batch: CandidateBatch) -> npt.NDArray[np.int64]:
        cols = batch.derived(self, self._columns)
        cpu_req, mem_req = effective_request(pod)
        zeros = np.zeros(len(batch))
        no_metric = np.full(len(batch), np.nan)
        return load_variation_scores(
            (cols["cpu_alloc"], cpu_req, cols["cpu_avg"], zeros),
            (cols["mem_alloc"], mem_req, no_metric, zeros),
            self.args,
        )
