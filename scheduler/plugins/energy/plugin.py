"""kubejoule's energy Score plugin: the predicted extra watts of placing a pod on a node.

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

Missing data never wins
-----------------------

A node without fresh, priceable telemetry (no sample, one older than `max_staleness_seconds`,
or no curve) is priced at the worst state it could be in, with its own curve (the stale
sample's, else the last one its agent exported, else configured, else fitted) and core count:
`max over u of P(u + Δu) − P(u)`, or with consolidation the empty node's share. Its score is
at most what the same node would get measured; without a curve or a core count it scores 0.
Its ΔP is reported unknown (NaN / None) and its reason says why (`stale`, `missing`,
`no_curve`). docs/scheduler.md, "Missing telemetry never wins".

Consolidation: the amortized price
----------------------------------

Where empty nodes power off, keeping a node on costs its idle power (and many curves climb
steeply to their first tenth of load). That opening cost is shared by every pod the node will
carry, so with `u_ref` the utilization a consolidated node is expected to run at
(`consolidation_utilization`, default 0.5) and the node's *amortized rate*
`a_n = min over 0 < v ≤ max(u_ref, Δu) of P_n(v) / v`:

    empty node:    ΔP = Δu × a_n
    running node:  ΔP = min(P_n(u + Δu) − P_n(u),  Δu × a_n)

A running node is never priced above an identical empty one (open nodes fill first), and an
efficient big node beats an inefficient small one even for a small pod. Both terms are the
node's own. The reasoning and the measurements: docs/scheduler.md ("Consolidation"), docs/rl.md.

The v3 levers
-------------

`levers` (scheduler/plugins/energy/levers.py: `lifetimes`, `protectRemoval`, `efficiency`, the
per-pod `scale`; all off by default, the v2 plugin above) price what a placement changes under
cluster-autoscaler — how long each node must stay on — from an `outlook` (the pods' predicted
lifetimes, the nodes' predicted empty times) the scheduler or the simulator provides. The
shipped `kubejoule` profile turns them on (`scheduler.plugins.defaults.shipped_kubejoule_profile`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from common.curves import PowerCurve, columns_watts, curve_columns
from scheduler.domain.model import (
    DEFAULT_MILLI_CPU_REQUEST,
    NEUTRAL_SCORE,
    REASON_MISSING,
    REASON_NO_CURVE,
    REASON_OK,
    REASON_STALE,
    REASONS,
    NodeState,
    PodInfo,
)
from scheduler.framework.batch import CandidateBatch, Columns
from scheduler.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE
from scheduler.plugins.energy.curves import (
    CURVE_FROM_CONFIG,
    CURVE_FROM_FIT,
    CURVE_FROM_TELEMETRY,
    NodeCurves,
)
from scheduler.plugins.energy.history import LinearFit, NodeHistory
from scheduler.plugins.energy.levers import (
    SCALE_POD,
    Levers,
    Outlook,
    batch_v3_price,
    pod_scale_score,
    requested_share,
    tie_by_fullness,
)
from scheduler.plugins.energy.price import (
    amortized_rate,
    average_rates,
    consolidation_price,
    worst_marginal_watts,
)

__all__ = [
    "CURVE_FROM_CONFIG", "CURVE_FROM_FIT", "CURVE_FROM_TELEMETRY", "DEFAULT_CONSOLIDATION_UTILIZATION",
    "NAME", "NEUTRAL_SCORE", "REASONS", "REASON_MISSING", "REASON_NO_CURVE", "REASON_OK",
    "REASON_STALE", "EnergyPlugin", "EnergyScores", "LinearFit", "NodeHistory", "request_cores",
]

NAME = "KubejouleEnergy"

# Distinct (curve, cores) kinds remembered before the table is emptied.
MAX_KINDS = 65_536
# Rows prepared per node name, at most: the extender scores whatever names its callers send, and
# a cache keyed by them must not grow with them (twice Kubernetes' 5,000-node limit; past it the
# cache starts again, which only costs recomputing rows).
MAX_PREPARED_NODES = 10_000

# u_ref of the consolidation price: the utilization a consolidated node is expected to run at.
# Pods are packed by their requests, and CPU use runs well below requests in most clusters
# (the bundled traces use 0.6 × the request at the median), so a node full of requests runs
# at about half load. Simulated energy moves by at most 3.7 % between 0.3 and 1.0 (docs/rl.md).
DEFAULT_CONSOLIDATION_UTILIZATION = 0.5

_OK, _STALE, _MISSING, _NO_CURVE = (REASONS.index(r) for r in (
    REASON_OK, REASON_STALE, REASON_MISSING, REASON_NO_CURVE))

def request_cores(pod: PodInfo) -> float:
    """The pod's CPU request in cores; kube-scheduler's 100 m for a pod that requests none
    (so best-effort pods are not free)."""
    return (pod.requests.cpu_millicores or DEFAULT_MILLI_CPU_REQUEST) / 1000.0


@dataclass(frozen=True)
class EnergyScores:
    """One pod's energy scores over a batch."""

    score: np.ndarray  # 0..100
    delta_watts: np.ndarray  # NaN where unknown
    reason: np.ndarray  # int8 index into REASONS

    def reasons(self) -> list[str]:
        """The reasons' names (the codes stay codes until a line or an answer is written)."""
        return [REASONS[code] for code in self.reason.tolist()]


class _Prepared:
    """A node's pod-independent inputs (one row of the plugin's derived columns)."""

    __slots__ = ("state", "version", "row")

    def __init__(self, state: NodeState, version: int, row: tuple[object, ...]) -> None:
        self.state = state
        self.version = version  # what the plugin had learned of the node (-1: not used)
        self.row = row


class EnergyPlugin(NodeCurves):
    """Scores nodes by the extra watts a pod would cost on each (see the module docstring); what
    it knows of each node's power curve, it learns as `NodeCurves` (`curves.py`)."""

    name = NAME

    def __init__(
        self,
        delta_p_ref_watts: float = 20.0,
        consolidation: bool = False,
        max_staleness_seconds: float = 30.0,
        curves: Mapping[str, PowerCurve] | None = None,
        history_size: int = 64,
        consolidation_utilization: float = DEFAULT_CONSOLIDATION_UTILIZATION,
        levers: Levers | None = None,
        outlook: Outlook | None = None,
    ) -> None:
        if delta_p_ref_watts <= 0:
            raise ValueError("delta_p_ref_watts must be positive")
        if not 0.0 < consolidation_utilization <= 1.0:
            raise ValueError("consolidation_utilization must be in (0, 1]")
        self.delta_p_ref_watts = float(delta_p_ref_watts)
        self.consolidation = consolidation
        self.consolidation_utilization = float(consolidation_utilization)
        self.max_staleness_seconds = float(max_staleness_seconds)
        # The v3 levers (scheduler/plugins/energy/levers.py; all off: the v2 plugin) and where their
        # inputs come from (the cluster cache's or the simulation's outlook; None: unknown).
        self.levers = levers or Levers()
        self.outlook = outlook
        super().__init__(curves, history_size)
        self._prepared: dict[str, _Prepared] = {}
        # (curve, cores) → a number never reused: rows with the same one share a worst-state
        # price, computed once per pod however many nodes lack telemetry.
        self._kinds: dict[tuple[PowerCurve, float], int] = {}
        self._kind_numbers = itertools.count()  # next() is atomic: request and refresh threads

    def with_levers(self, levers: Levers) -> EnergyPlugin:
        """A new plugin set up as this one (ΔP_ref, consolidation, staleness, configured curves,
        history size, outlook) but with `levers`, from its construction: a profile entry or the
        shipped profile builds its energy plugin this way and never changes the one it was
        given."""
        return EnergyPlugin(
            delta_p_ref_watts=self.delta_p_ref_watts,
            consolidation=self.consolidation,
            max_staleness_seconds=self.max_staleness_seconds,
            curves=self._configured,
            history_size=self._history_size,
            consolidation_utilization=self.consolidation_utilization,
            levers=levers,
            outlook=self.outlook,
        )

    @staticmethod
    def utilization_with_assumed(node: NodeState) -> float | None:
        """u at the sample plus the CPU requested since, over the node's cores (may pass 1)."""
        telemetry = node.telemetry
        if telemetry is None or telemetry.utilization is None:
            return None
        cores = node.cores
        if not cores or cores <= 0:
            return None
        return max(0.0, telemetry.utilization) + max(0.0, node.cpu_since_sample_cores) / cores

    # -- the pod-independent columns ------------------------------------------------------------

    def _row(self, node: NodeState) -> _Prepared:
        """Reason, sample time, u, cores, empty, curve of one node (cached per state object).
        Rows that cannot be scored from fresh telemetry carry the fallback curve and cores."""
        name = node.info.name
        entry = self._prepared.get(name)
        if entry is not None and entry.state is node and entry.version in (-1, self._learned.get(name, 0)):
            return entry
        telemetry = node.telemetry
        if telemetry is not None:
            self.observe(telemetry)  # old samples still teach the curve; only u must be fresh
        learned = self._learned.get(name, 0)
        version = -1
        row: tuple[object, ...]
        u = self.utilization_with_assumed(node)
        found = self.curve_for(name, telemetry) if u is not None else None
        if u is not None and found is not None:
            curve, origin = found
            if origin == CURVE_FROM_FIT:
                version = learned
            assert telemetry is not None
            cores = node.cores
            row = (_OK, telemetry.sample_time, u, cores, node.empty, curve, self._kind(curve, cores))
        else:
            version = learned
            reason = _MISSING if u is None else _NO_CURVE
            sample_time = telemetry.sample_time if telemetry is not None else 0.0
            fallback, cores = self._fallback(node)
            kind = self._kind(fallback, cores) if fallback is not None and cores else -1
            row = (reason, sample_time, 0.0, cores or 1.0, True, fallback if kind >= 0 else None, kind)
        if len(self._prepared) >= MAX_PREPARED_NODES and name not in self._prepared:
            self._prepared.clear()
        entry = self._prepared[name] = _Prepared(node, version, row)
        return entry

    def _kind(self, curve: PowerCurve, cores: float) -> int:
        key = (curve, float(cores))
        kind = self._kinds.get(key)
        if kind is None:
            if len(self._kinds) >= MAX_KINDS:
                self._kinds.clear()  # numbers are never reused, so old rows stay correct
            kind = self._kinds.setdefault(key, next(self._kind_numbers))
        return kind

    def _columns(self, states: Sequence[NodeState]) -> Columns:
        rows = [self._row(state).row for state in states]
        count = len(rows)
        curves: list[PowerCurve | None] = [r[5] for r in rows]  # type: ignore[misc]
        columns = curve_columns(curves)
        columns["kind"] = np.fromiter((r[6] for r in rows), dtype=np.int64, count=count)
        columns["reason"] = np.fromiter((r[0] for r in rows), dtype=np.int8, count=count)
        columns["sample_time"] = np.fromiter((r[1] for r in rows), dtype=np.float64, count=count)
        columns["utilization"] = np.fromiter((r[2] for r in rows), dtype=np.float64, count=count)
        columns["cores"] = np.fromiter((r[3] for r in rows), dtype=np.float64, count=count)
        columns["empty"] = np.fromiter((r[4] for r in rows), dtype=bool, count=count)
        columns["watts_before"] = columns_watts(columns, columns["utilization"])
        if self.consolidation:
            columns["rates"] = average_rates(columns)
        return columns

    def columns(self, batch: CandidateBatch) -> Columns:
        return batch.derived(self, self._columns)

    # -- scoring ------------------------------------------------------------------------------

    def evaluate(
        self, pod: PodInfo, batch: CandidateBatch, with_idle: bool = True,
        rows: np.ndarray | None = None,
    ) -> EnergyScores:
        """ΔP, score and reason for every row (or for `rows` of the batch, in that order).
        `with_idle=False` leaves out the consolidation price: the node's own power change only
        (what a power cap compares)."""
        cols = self.columns(batch)
        if rows is not None:
            cols = {name: values[rows] for name, values in cols.items()}
        reason = cols["reason"].copy()
        stale = (batch.now - cols["sample_time"]) > self.max_staleness_seconds
        reason[stale & (reason != _MISSING)] = _STALE
        ok = reason == _OK
        cores = request_cores(pod)
        delta_u = cores / cols["cores"]
        delta = columns_watts(cols, cols["utilization"] + delta_u) - cols["watts_before"]
        priced = self.consolidation and with_idle
        levers = self.levers
        if priced and levers.v3:
            delta = batch_v3_price(levers, self.outlook, pod, batch, rows, cols, delta_u, delta,
                                   self.consolidation_utilization)
        elif priced:
            delta = consolidation_price(
                cols, cols["rates"], self.consolidation_utilization, delta_u, delta, cols["empty"]
            )
        delta = np.maximum(delta, 0.0)
        unknown = ~ok
        if unknown.any():
            known_curve = unknown & (cols["kind"] >= 0)
            delta[known_curve] = self._worst_price(cols, np.flatnonzero(known_curve), delta_u, priced)
        ranked = delta
        if levers.v3 and with_idle:  # equal prices: the fuller node (worst-priced rows: empty)
            ranked = tie_by_fullness(delta, np.where(ok, requested_share(batch, rows), 0.0))
        if levers.scale == SCALE_POD:
            score = pod_scale_score(ranked, cores)
        else:
            score = MAX_NODE_SCORE * np.clip(1.0 - ranked / self.delta_p_ref_watts, 0.0, 1.0)
        score[unknown & (cols["kind"] < 0)] = MIN_NODE_SCORE
        delta[~ok] = np.nan
        return EnergyScores(score=score, delta_watts=delta, reason=reason)

    def _worst_price(
        self, cols: Columns, rows: np.ndarray, delta_u: np.ndarray, priced: bool
    ) -> np.ndarray:
        """The price of `rows` at the worst state their nodes could be in (module docstring):
        the consolidation share of an empty node, or the largest marginal over utilization.
        Computed once per kind (curve and cores) among the rows."""
        if not len(rows):
            return np.zeros(0)
        kinds, first, spread = np.unique(cols["kind"][rows], return_index=True, return_inverse=True)
        picked = rows[first]
        sub = {name: values[picked] for name, values in cols.items()}
        step = delta_u[picked]
        if priced:
            up_to = np.maximum(self.consolidation_utilization, step)
            worst = step * amortized_rate(sub, sub["rates"], up_to)
        else:
            worst = worst_marginal_watts(sub, step)
        return np.maximum(worst, 0.0)[spread.reshape(-1)]

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        return self.evaluate(pod, batch).score

    def delta_watts(
        self, pod: PodInfo, node: NodeState, now: float, with_idle: bool = True
    ) -> tuple[float | None, str]:
        """ΔP of placing `pod` on `node` (a batch of one), or None with the reason."""
        scores = self.evaluate(pod, CandidateBatch.of([node], now), with_idle)
        delta = float(scores.delta_watts[0])
        return (None if delta != delta else delta), REASONS[int(scores.reason[0])]
