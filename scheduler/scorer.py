"""The heuristic energy scorer: the predicted extra watts of placing a pod on a node.

    ΔP = P_n(u + Δu) − P_n(u)              score = 100 × clamp(1 − ΔP / ΔP_ref, 0, 1)

* `u` is the node's measured CPU utilization plus the CPU requested by pods bound or assumed
  since that sample (`NodeState.cpu_since_sample_cores`), over the node's cores;
* `Δu` is the pod's CPU request over the node's cores (kube-scheduler's 100 m default for a
  pod that requests nothing, so best-effort pods are not free);
* `P_n` is, in order: the calibration curve the node's agent exports, a curve configured for
  the node, a line fitted online to the node's own (u, P) history, else unknown;
* with `consolidation`, an empty node also costs its idle power (the cluster could power it off
  or scale it down if it stayed empty), which is what makes the scheduler pack.

A node's score depends only on that node's state and history, never on the other candidates.
Missing, stale or curve-less telemetry gets the neutral 50, never the best score.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.curves import PowerCurve
from scheduler.model import NodeState, NodeTelemetry, PodInfo, ScoreResult

NAME = "heuristic"

NEUTRAL_SCORE = 50.0
MAX_SCORE = 100.0

# kube-scheduler scores a pod without a CPU request as if it asked for 100 millicores
# (DefaultMilliCPURequest); doing the same keeps best-effort pods from looking free.
DEFAULT_CPU_REQUEST_MILLICORES = 100

REASON_OK = "ok"
REASON_STALE = "stale"
REASON_MISSING = "missing"
REASON_NO_CURVE = "no_curve"

CURVE_FROM_TELEMETRY = "telemetry"
CURVE_FROM_CONFIG = "config"
CURVE_FROM_FIT = "fit"


@dataclass(frozen=True)
class LinearFit:
    """P(u) ≈ intercept + slope × u, least squares over a node's recent samples."""

    intercept_watts: float
    slope_watts: float  # watts from u = 0 to u = 1
    samples: int

    def curve(self) -> PowerCurve:
        return PowerCurve.linear(self.intercept_watts, self.intercept_watts + self.slope_watts)


class NodeHistory:
    """A node's recent (utilization, watts) samples and the line fitted to them.

    A fit needs `min_samples` samples spread over at least `min_spread` of utilization, or the
    slope is noise. A negative slope is physically wrong (more work, less power) and is refused.
    """

    def __init__(self, size: int = 64, min_samples: int = 4, min_spread: float = 0.05) -> None:
        self._points: deque[tuple[float, float]] = deque(maxlen=size)
        self._last_sample_time: float | None = None
        self._min_samples = min_samples
        self._min_spread = min_spread
        self._fit: LinearFit | None = None
        self._dirty = False

    def add(self, sample_time: float, utilization: float, watts: float) -> bool:
        """Add one sample; a sample already seen (same or older time) is ignored."""
        if self._last_sample_time is not None and sample_time <= self._last_sample_time:
            return False
        self._last_sample_time = sample_time
        self._points.append((utilization, watts))
        self._dirty = True
        return True

    def __len__(self) -> int:
        return len(self._points)

    def fit(self) -> LinearFit | None:
        if self._dirty:
            self._fit = self._compute()
            self._dirty = False
        return self._fit

    def _compute(self) -> LinearFit | None:
        n = len(self._points)
        if n < self._min_samples:
            return None
        us = [u for u, _ in self._points]
        if max(us) - min(us) < self._min_spread:
            return None
        mean_u = sum(us) / n
        mean_p = sum(p for _, p in self._points) / n
        sxx = sum((u - mean_u) ** 2 for u in us)
        sxy = sum((u - mean_u) * (p - mean_p) for u, p in self._points)
        slope = sxy / sxx
        if slope < 0:
            return None
        intercept = mean_p - slope * mean_u
        if intercept < 0:
            return None
        return LinearFit(intercept_watts=intercept, slope_watts=slope, samples=n)


def extended_watts(curve: PowerCurve, utilization: float) -> float:
    """P(u), continued past u = 1 with the slope of the curve's last tenth.

    Demand beyond a node's cores still has to be served and costs at least the marginal power of
    a full node; without this a saturated node would look free.
    """
    if utilization <= 1.0:
        return curve.watts(utilization)
    top = curve.watts(1.0)
    slope = (top - curve.watts(0.9)) / 0.1
    return top + max(0.0, slope) * (utilization - 1.0)


class HeuristicScorer:
    """Scores nodes by the extra watts a pod would cost on each (see the module docstring)."""

    name = NAME

    def __init__(
        self,
        delta_p_ref_watts: float = 20.0,
        consolidation: bool = False,
        max_staleness_seconds: float = 30.0,
        curves: Mapping[str, PowerCurve] | None = None,
        history_size: int = 64,
    ) -> None:
        if delta_p_ref_watts <= 0:
            raise ValueError("delta_p_ref_watts must be positive")
        self.delta_p_ref_watts = float(delta_p_ref_watts)
        self.consolidation = consolidation
        self.max_staleness_seconds = float(max_staleness_seconds)
        self._configured = dict(curves or {})
        self._history_size = history_size
        self._histories: dict[str, NodeHistory] = {}
        self._point_curves: dict[tuple[float, ...], PowerCurve] = {}

    # -- history -------------------------------------------------------------------------------

    def observe(self, telemetry: NodeTelemetry) -> None:
        """Feed one telemetry sample into the node's (u, P) history (duplicates are ignored)."""
        if telemetry.watts is None or telemetry.utilization is None or telemetry.source == "none":
            return
        history = self._histories.get(telemetry.node)
        if history is None:
            history = self._histories[telemetry.node] = NodeHistory(self._history_size)
        history.add(telemetry.sample_time, telemetry.utilization, telemetry.watts)

    def fitted(self, node: str) -> LinearFit | None:
        history = self._histories.get(node)
        return history.fit() if history is not None else None

    def curve_for(self, node: str, telemetry: NodeTelemetry | None) -> tuple[PowerCurve, str] | None:
        """The node's power curve and where it came from, or None when unknown."""
        if telemetry is not None and telemetry.curve_points is not None:
            curve = self._point_curves.get(telemetry.curve_points)
            if curve is None:
                try:
                    curve = PowerCurve.from_points(telemetry.curve_points)
                except ValueError:
                    curve = None
                else:
                    self._point_curves[telemetry.curve_points] = curve
            if curve is not None:
                return curve, CURVE_FROM_TELEMETRY
        configured = self._configured.get(node)
        if configured is not None:
            return configured, CURVE_FROM_CONFIG
        fit = self.fitted(node)
        if fit is not None:
            return fit.curve(), CURVE_FROM_FIT
        return None

    # -- scoring -------------------------------------------------------------------------------

    @staticmethod
    def utilization_with_assumed(node: NodeState) -> float | None:
        """u at the sample plus the CPU requested since, over the node's cores (may pass 1)."""
        telemetry = node.telemetry
        if telemetry is None or telemetry.utilization is None:
            return None
        cores = telemetry.cores or node.info.cpu_cores
        if not cores or cores <= 0:
            return None
        return max(0.0, telemetry.utilization) + max(0.0, node.cpu_since_sample_cores) / cores

    def delta_watts(
        self, pod: PodInfo, node: NodeState, now: float, with_idle: bool = True
    ) -> tuple[float | None, str]:
        """ΔP of placing `pod` on `node`, or None with the reason it is unknown.

        `with_idle=False` leaves out the consolidation charge: the node's own power change only.
        """
        telemetry = node.telemetry
        if telemetry is None or telemetry.utilization is None:
            return None, REASON_MISSING
        self.observe(telemetry)  # old samples still teach the curve; only u must be fresh
        if telemetry.age_seconds(now) > self.max_staleness_seconds:
            return None, REASON_STALE
        cores = telemetry.cores or node.info.cpu_cores
        if not cores or cores <= 0:
            return None, REASON_MISSING
        found = self.curve_for(node.info.name, telemetry)
        if found is None:
            return None, REASON_NO_CURVE
        curve = found[0]
        request_millicores = pod.requests.cpu_millicores or DEFAULT_CPU_REQUEST_MILLICORES
        u = max(0.0, telemetry.utilization) + max(0.0, node.cpu_since_sample_cores) / cores
        du = request_millicores / 1000.0 / cores
        delta = extended_watts(curve, u + du) - extended_watts(curve, u)
        if with_idle and self.consolidation and node.pod_count == 0:
            delta += curve.watts(0.0)
        return max(0.0, delta), REASON_OK

    def score_one(self, pod: PodInfo, node: NodeState, now: float) -> ScoreResult:
        delta, reason = self.delta_watts(pod, node, now)
        if delta is None:
            return ScoreResult(node.info.name, NEUTRAL_SCORE, None, reason)
        fraction = 1.0 - delta / self.delta_p_ref_watts
        score = MAX_SCORE * min(1.0, max(0.0, fraction))
        return ScoreResult(node.info.name, score, delta, reason)

    def score(self, pod: PodInfo, nodes: Sequence[NodeState], now: float) -> list[ScoreResult]:
        return [self.score_one(pod, node, now) for node in nodes]
