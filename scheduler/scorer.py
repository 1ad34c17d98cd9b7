"""The heuristic energy scorer: the predicted extra watts of placing a pod on a node.

    ΔP = P_n(u + Δu) − P_n(u)              score = 100 × clamp(1 − ΔP / ΔP_ref, 0, 1)

* `u` is the node's measured CPU utilization plus the CPU requested by pods bound or assumed
  since that sample (`NodeState.cpu_since_sample_cores`), over the node's cores;
* `Δu` is the pod's CPU request over the node's cores (kube-scheduler's 100 m default for a
  pod that requests nothing, so best-effort pods are not free);
* `P_n` is, in order: the calibration curve the node's agent exports, a curve configured for
  the node, a line fitted online to the node's own (u, P) history, else unknown;
* with `consolidation` (the cluster powers off or scales down empty nodes), ΔP is a *price*
  that shares each node's opening cost among the load it will carry — see below.

A node's score depends only on that node's state and history, never on the other candidates.
Missing, stale or curve-less telemetry gets the neutral 50, never the best score.

Consolidation: the amortized price
----------------------------------

Where empty nodes power off, keeping a node on costs its idle power, and many real curves also
climb steeply from idle to their first tenth of load (SPECpower's 2-socket Westmere servers:
58 → 98 W). Charging that *opening cost* (idle power plus the steep first step) in full to the
one pod that opens a node is the greedy mistake: a 1-CPU pod then opens whichever node has the
smallest idle power, however inefficient it is once loaded, and the load that follows piles
onto it (on the bundled heterogeneous scenario the small nodes were filled first and the
heuristic lost to PEAKS). The opening cost is really shared by every pod the node will carry
while it is on. So, with `u_ref` the utilization a consolidated node is expected to run at
(`consolidation_utilization`, default 0.5) and the node's *amortized rate*

    a_n = min over 0 < v ≤ max(u_ref, Δu) of P_n(v) / v        (watts per unit of utilization)

— the least average power per unit of load the node reaches up to the reference load, which
is where its opening cost is spread thinnest — the price of the pod on node n is

    empty node:    ΔP = Δu × a_n
    running node:  ΔP = min(P_n(u + Δu) − P_n(u),  Δu × a_n)

An empty node thus costs the pod its share of the node's power at its best point up to the
reference load (the price of serving the load there in the long run), so an efficient big node
beats an inefficient small one even for a small pod; a running node costs its marginal watts
(its idle power is paid already), but never more than that share: a marginal above it means the
node is still in its steep start, the part of the opening cost that the amortized rate already
spreads. Two properties follow: a running node is never priced above an identical empty one (the
scorer fills open nodes before opening new ones of the same kind), and a running node of an
inefficient kind whose marginal watts exceed an efficient empty node's share costs more than
opening that node (the entry condition of a fleet: add a unit when the marginal cost of the
running ones exceeds the least average cost of a new one). Both terms are the node's own, so
scores stay absolute and candidate-independent. The reasoning and the measurements are
in docs/scheduler.md and docs/rl.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from agent.curves import POINT_COUNT, PowerCurve
from scheduler.model import NodeState, NodeTelemetry, PodInfo, ScoreResult

NAME = "heuristic"

NEUTRAL_SCORE = 50.0
MAX_SCORE = 100.0

# u_ref of the consolidation price: the utilization a consolidated node is expected to run at.
# Pods are packed by their requests, and CPU use runs well below requests in most clusters
# (the bundled traces use 0.6 × the request at the median), so a node full of requests runs
# at about half load. Simulated energy moves by at most 3.7 % between 0.3 and 1.0 (docs/rl.md).
DEFAULT_CONSOLIDATION_UTILIZATION = 0.5

# kube-scheduler scores a pod without a CPU request as if it asked for 100 millicores
# (DefaultMilliCPURequest); doing the same keeps best-effort pods from looking free.
DEFAULT_CPU_REQUEST_MILLICORES = 100

REASON_OK = "ok"
REASON_STALE = "stale"
REASON_MISSING = "missing"
REASON_NO_CURVE = "no_curve"
# Batch scores carry reasons as small integers: their index in this tuple.
REASONS = (REASON_OK, REASON_STALE, REASON_MISSING, REASON_NO_CURVE)
_CODE = {reason: code for code, reason in enumerate(REASONS)}

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
        self.version = 0  # bumped by every sample added

    def add(self, sample_time: float, utilization: float, watts: float) -> bool:
        """Add one sample; a sample already seen (same or older time) is ignored."""
        if self._last_sample_time is not None and sample_time <= self._last_sample_time:
            return False
        self._last_sample_time = sample_time
        self._points.append((utilization, watts))
        # Fitted here, by whoever feeds samples (the telemetry refresh thread in the extender),
        # so the scoring path only reads the result.
        self._fit = self._compute()
        self.version += 1
        return True

    def __len__(self) -> int:
        return len(self._points)

    def fit(self) -> LinearFit | None:
        return self._fit

    def _compute(self) -> LinearFit | None:
        # A copy (taken at C speed, under the GIL): a deque must not change while iterated.
        points = tuple(self._points)
        n = len(points)
        if n < self._min_samples:
            return None
        us = [u for u, _ in points]
        if max(us) - min(us) < self._min_spread:
            return None
        mean_u = sum(us) / n
        mean_p = sum(p for _, p in points) / n
        sxx = sum((u - mean_u) ** 2 for u in us)
        sxy = sum((u - mean_u) * (p - mean_p) for u, p in points)
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


# The utilization grid of amortized rates: 10 %, 20 % … 100 % (the curves' own points).
_RATE_GRID = tuple(k / (POINT_COUNT - 1) for k in range(1, POINT_COUNT))


def average_rates(curve: PowerCurve) -> tuple[float, ...]:
    """P(v) / v at v = 10 %, 20 % … 100 %: watts per unit of utilization at each load."""
    return tuple(curve.watts(v) / v for v in _RATE_GRID)


def amortized_rate(curve: PowerCurve, rates: Sequence[float], up_to: float) -> float:
    """min over 0 < v ≤ up_to of P(v) / v (`rates` from average_rates(curve); up_to > 0).

    Exact for piecewise-linear curves: on a segment P = a + b·v, P / v is monotone, so the
    minimum is at a grid point or at `up_to` itself."""
    best = extended_watts(curve, up_to) / up_to
    for v, rate in zip(_RATE_GRID, rates, strict=True):
        if v > up_to + 1e-12:
            break
        best = rate if rate < best else best
    return best


class _Prepared:
    """A node's pod-independent scoring inputs, computed once per NodeState."""

    __slots__ = (
        "state", "reason", "sample_time", "curve", "cores", "utilization", "watts_before",
        "idle_watts", "empty", "history_version", "points", "top_slope", "rates", "rate_ref",
    )

    def __init__(
        self,
        state: NodeState,
        reason: str | None,
        sample_time: float = 0.0,
        curve: PowerCurve | None = None,
        cores: float = 0.0,
        utilization: float = 0.0,
        watts_before: float = 0.0,
        idle_watts: float = 0.0,
        empty: bool = False,
        history_version: int = -1,  # -1: the curve does not come from the history
    ) -> None:
        self.state = state
        self.reason = reason  # None when scorable (if fresh); else missing / no_curve
        self.sample_time = sample_time
        self.curve = curve
        self.cores = cores
        self.utilization = utilization
        self.watts_before = watts_before
        self.idle_watts = idle_watts
        self.empty = empty
        self.history_version = history_version
        # Piecewise-linear curves (points, linear, fits) as their 11 points, for the fast path.
        self.points: tuple[float, ...] | None = None
        self.top_slope = 0.0
        # Consolidation's amortized rates (set by the scorer when consolidation is on).
        self.rates: tuple[float, ...] = ()
        self.rate_ref = 0.0  # amortized_rate(curve, rates, u_ref)
        if curve is not None and curve.model in ("points", "linear"):
            self.points = curve.points if curve.model == "points" else curve.as_points()
            self.top_slope = max(0.0, (self.points[-1] - self.points[-2]) * (POINT_COUNT - 1))


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
        consolidation_utilization: float = DEFAULT_CONSOLIDATION_UTILIZATION,
    ) -> None:
        if delta_p_ref_watts <= 0:
            raise ValueError("delta_p_ref_watts must be positive")
        if not 0.0 < consolidation_utilization <= 1.0:
            raise ValueError("consolidation_utilization must be in (0, 1]")
        self.delta_p_ref_watts = float(delta_p_ref_watts)
        self.consolidation = consolidation
        self.consolidation_utilization = float(consolidation_utilization)
        self.max_staleness_seconds = float(max_staleness_seconds)
        self._configured = dict(curves or {})
        self._history_size = history_size
        self._histories: dict[str, NodeHistory] = {}
        self._point_curves: dict[tuple[float, ...], PowerCurve] = {}
        self._prepared_cache: dict[str, _Prepared] = {}
        self._fit_curves: dict[str, tuple[LinearFit, PowerCurve]] = {}

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
            cached = self._fit_curves.get(node)
            if cached is None or cached[0] is not fit:
                cached = self._fit_curves[node] = (fit, fit.curve())
            return cached[1], CURVE_FROM_FIT
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

    def _prepare(self, node: NodeState) -> _Prepared:
        """Everything about a node that does not depend on the pod or on the time."""
        name = node.info.name
        telemetry = node.telemetry
        if telemetry is None or telemetry.utilization is None:
            return _Prepared(node, REASON_MISSING)
        self.observe(telemetry)  # old samples still teach the curve; only u must be fresh
        u = self.utilization_with_assumed(node)
        if u is None:
            return _Prepared(node, REASON_MISSING, telemetry.sample_time)
        found = self.curve_for(name, telemetry)
        history = self._histories.get(name)
        version = history.version if history is not None else 0
        if found is None:
            return _Prepared(node, REASON_NO_CURVE, telemetry.sample_time, history_version=version)
        curve, origin = found
        prep = _Prepared(
            node,
            None,
            telemetry.sample_time,
            curve=curve,
            cores=telemetry.cores or node.info.cpu_cores,
            utilization=u,
            watts_before=extended_watts(curve, u),
            idle_watts=curve.watts(0.0),
            empty=node.empty,
            history_version=version if origin == CURVE_FROM_FIT else -1,
        )
        if self.consolidation:
            prep.rates = average_rates(curve)
            prep.rate_ref = amortized_rate(curve, prep.rates, self.consolidation_utilization)
        return prep

    def _prepared(self, node: NodeState) -> _Prepared:
        # Node states are immutable, and callers such as the extender pass the same objects
        # until telemetry changes: the per-node work is done once per state, not per pod.
        entry = self._prepared_cache.get(node.info.name)
        if entry is not None and entry.state is node:
            if entry.history_version < 0:
                return entry
            history = self._histories.get(node.info.name)
            if (history.version if history is not None else 0) == entry.history_version:
                return entry
        entry = self._prepare(node)
        self._prepared_cache[node.info.name] = entry
        return entry

    def _delta(
        self, prep: _Prepared, request_cores: float, now: float, with_idle: bool
    ) -> tuple[float | None, str]:
        if prep.reason == REASON_MISSING:
            return None, REASON_MISSING
        if now - prep.sample_time > self.max_staleness_seconds:
            return None, REASON_STALE
        if prep.reason is not None:
            return None, prep.reason
        u = prep.utilization + request_cores / prep.cores
        points = prep.points
        if points is None:
            assert prep.curve is not None
            delta = extended_watts(prep.curve, u) - prep.watts_before
        elif u >= 1.0:
            delta = points[-1] + prep.top_slope * (u - 1.0) - prep.watts_before
        else:
            # Same interpolation as PowerCurve.watts for points, inlined: this is the hot loop.
            scaled = u * (POINT_COUNT - 1)
            low = int(scaled)
            low = POINT_COUNT - 2 if low > POINT_COUNT - 2 else low
            below = points[low]
            delta = below + (points[low + 1] - below) * (scaled - low) - prep.watts_before
        if with_idle and self.consolidation:
            delta = self._priced(prep, request_cores / prep.cores, delta)
        return (delta if delta > 0.0 else 0.0), REASON_OK

    def _priced(self, prep: _Prepared, delta_u: float, marginal: float) -> float:
        """The consolidation price (module docstring): the pod's share Δu × a_n on an empty
        node; on a running one its marginal watts, capped at that share."""
        if delta_u <= self.consolidation_utilization:
            rate = prep.rate_ref
        else:
            assert prep.curve is not None
            rate = amortized_rate(prep.curve, prep.rates, delta_u)
        share = delta_u * rate
        if prep.empty:
            return share
        return marginal if marginal < share else share

    @staticmethod
    def request_cores(pod: PodInfo) -> float:
        return (pod.requests.cpu_millicores or DEFAULT_CPU_REQUEST_MILLICORES) / 1000.0

    def delta_watts(
        self, pod: PodInfo, node: NodeState, now: float, with_idle: bool = True
    ) -> tuple[float | None, str]:
        """ΔP of placing `pod` on `node`, or None with the reason it is unknown.

        `with_idle=False` leaves out the consolidation price: the node's own power change only
        (what a power cap compares).
        """
        return self._delta(self._prepared(node), self.request_cores(pod), now, with_idle)

    def score_one(self, pod: PodInfo, node: NodeState, now: float) -> ScoreResult:
        return self.score(pod, [node], now)[0]

    def score(self, pod: PodInfo, nodes: Sequence[NodeState], now: float) -> list[ScoreResult]:
        request = self.request_cores(pod)
        ref = self.delta_p_ref_watts
        results = []
        for node in nodes:
            delta, reason = self._delta(self._prepared(node), request, now, True)
            if delta is None:
                results.append(ScoreResult(node.info.name, NEUTRAL_SCORE, None, reason))
                continue
            fraction = 1.0 - delta / ref
            score = MAX_SCORE * (0.0 if fraction < 0.0 else 1.0 if fraction > 1.0 else fraction)
            results.append(ScoreResult(node.info.name, score, delta, reason))
        return results

    # -- batches: the same scores as score(), computed with numpy over many nodes ------------

    def prepare_batch(self, nodes: Sequence[NodeState]) -> NodeBatch:
        """Arrays of the pod-independent inputs of `nodes`, to score many pods against.

        Row `len(nodes)` is a sentinel "missing" node: index -1 (see `NodeBatch.rows`) lands
        on it, so names the batch does not know score neutral.
        """
        preps = [self._prepared(node) for node in nodes]
        count = len(preps) + 1
        reason = np.full(count, _CODE[REASON_MISSING], dtype=np.int8)
        sample_time = np.zeros(count)
        utilization = np.zeros(count)
        cores = np.ones(count)
        watts_before = np.zeros(count)
        idle = np.zeros(count)
        empty = np.zeros(count, dtype=bool)
        points = np.zeros((count, POINT_COUNT))
        top_slope = np.zeros(count)
        rates = np.full((count, POINT_COUNT - 1), np.inf)
        scalar = []
        for i, prep in enumerate(preps):
            reason[i] = _CODE[prep.reason or REASON_OK]
            sample_time[i] = prep.sample_time
            if prep.reason is not None:
                continue
            utilization[i] = prep.utilization
            cores[i] = prep.cores
            watts_before[i] = prep.watts_before
            idle[i] = prep.idle_watts
            empty[i] = prep.empty
            if prep.rates:
                rates[i] = prep.rates
            if prep.points is None:
                scalar.append(i)  # a curve that is not piecewise linear (Fan et al.)
            else:
                points[i] = prep.points
                top_slope[i] = prep.top_slope
        return NodeBatch(
            names=[node.info.name for node in nodes],
            index={node.info.name: i for i, node in enumerate(nodes)},
            preps=preps,
            reason=reason,
            sample_time=sample_time,
            utilization=utilization,
            cores=cores,
            watts_before=watts_before,
            idle_watts=idle,
            empty=empty,
            points=points,
            top_slope=top_slope,
            rates=rates,
            scalar_rows=np.array(scalar, dtype=np.intp),
        )

    def score_batch(
        self, pod: PodInfo, batch: NodeBatch, now: float, rows: np.ndarray | None = None
    ) -> BatchScores:
        """Scores of the batch's nodes (or of `rows` of it) for one pod."""
        request = self.request_cores(pod)
        if rows is None:
            rows = np.arange(len(batch.names), dtype=np.intp)
        reason = batch.reason[rows].copy()
        stale = (now - batch.sample_time[rows]) > self.max_staleness_seconds
        reason[stale & (reason != _CODE[REASON_MISSING])] = _CODE[REASON_STALE]
        ok = reason == _CODE[REASON_OK]
        delta_u = request / batch.cores[rows]
        curve_points = batch.points[rows]
        top_slope = batch.top_slope[rows]
        delta = _watts_at(curve_points, top_slope, batch.utilization[rows] + delta_u)
        delta -= batch.watts_before[rows]
        if self.consolidation:
            # The amortized price (module docstring), as _priced() computes it per node.
            up_to = np.maximum(self.consolidation_utilization, delta_u)
            within = np.asarray(_RATE_GRID)[None, :] <= up_to[:, None] + 1e-12
            rate = np.where(within, batch.rates[rows], np.inf).min(axis=1)
            rate = np.minimum(rate, _watts_at(curve_points, top_slope, up_to) / up_to)
            share = delta_u * rate
            delta = np.where(batch.empty[rows], share, np.minimum(delta, share))
        delta = np.maximum(delta, 0.0)
        if len(batch.scalar_rows):
            for position in np.flatnonzero(np.isin(rows, batch.scalar_rows)):
                if ok[position]:
                    prep = batch.preps[rows[position]]
                    delta[position] = self._delta(prep, request, now, True)[0] or 0.0
        score = MAX_SCORE * np.clip(1.0 - delta / self.delta_p_ref_watts, 0.0, 1.0)
        score[~ok] = NEUTRAL_SCORE
        delta[~ok] = np.nan
        return BatchScores(score=score, delta_watts=delta, reason=reason)





def _watts_at(points: np.ndarray, top_slope: np.ndarray, u: np.ndarray) -> np.ndarray:
    """extended_watts() row by row over 11-point curves: interpolated up to u = 1, then the
    last tenth's slope (`top_slope`)."""
    scaled = np.minimum(u, 1.0) * (POINT_COUNT - 1)
    low = np.minimum(scaled.astype(np.intp), POINT_COUNT - 2)
    picked = np.arange(len(u))
    below = points[picked, low]
    inside = below + (points[picked, low + 1] - below) * (scaled - low)
    beyond = points[:, -1] + top_slope * (u - 1.0)
    return np.where(u >= 1.0, beyond, inside)


@dataclass(frozen=True)
class NodeBatch:
    """Many nodes' scoring inputs as arrays (see HeuristicScorer.prepare_batch)."""

    names: list[str]
    index: dict[str, int]
    preps: list[_Prepared]
    reason: np.ndarray  # int8 codes of REASONS, time-independent part
    sample_time: np.ndarray
    utilization: np.ndarray
    cores: np.ndarray
    watts_before: np.ndarray
    idle_watts: np.ndarray
    empty: np.ndarray
    points: np.ndarray  # (nodes + 1) × 11
    top_slope: np.ndarray
    rates: np.ndarray  # (nodes + 1) × 10: P(v)/v at 10 % … 100 % (consolidation; else inf)
    scalar_rows: np.ndarray

    def rows(self, names: Sequence[str]) -> np.ndarray:
        """Row of each name; unknown names get the sentinel missing row."""
        found = list(map(self.index.get, names, repeat(len(self.names), len(names))))
        return np.array(found, dtype=np.intp)


@dataclass(frozen=True)
class BatchScores:
    score: np.ndarray  # 0..100
    delta_watts: np.ndarray  # NaN where unknown
    reason: np.ndarray  # codes; see reasons()

    def reasons(self) -> list[str]:
        return [REASONS[code] for code in self.reason.tolist()]

    def results(self, names: Sequence[str]) -> list[ScoreResult]:
        """As ScoreResults, the same as HeuristicScorer.score() gives."""
        return [
            ScoreResult(name, score, None if delta != delta else delta, REASONS[code])
            for name, score, delta, code in zip(
                names, self.score.tolist(), self.delta_watts.tolist(), self.reason.tolist(), strict=True
            )
        ]
