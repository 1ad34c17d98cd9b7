"""One scheduling decision: filter, score two ways, choose.

Two implementations of the same decision, which the tests hold equal:

* `decide()` — the reference: per node, in plain Python, through `filters.py`,
  `kube_scoring.py` and the scorer's `score()`. Any `Scorer` works.
* `FastDecider` — the same arithmetic vectorized with numpy over the cache's `NodeTable`:
  the spec-only filters (taints, cordons, affinity) are computed once per pod *shape* and node
  layout, resource fit and kube-scheduler's default scores are array expressions, and the
  heuristic scorer's batch path scores only the rows that changed since the last pod. This is
  what keeps a decision near a millisecond at thousands of nodes.

Choosing: `active` mode takes the energy-best node; ties (e.g. every node neutral for lack of
telemetry) go to the best default score, then to chance — so without data the scheduler
behaves like kube-scheduler. `shadow` mode takes the default scoring's best node, ties broken
uniformly at random as kube-scheduler's selectHost does.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.cluster_cache import NodeTable
from scheduler.filters import failure_summary, filter_nodes, static_failure
from scheduler.kube_scoring import (
    LEAST_ALLOCATED,
    MAX_NODE_SCORE,
    MOST_ALLOCATED,
    default_scores,
    is_best_effort,
)
from scheduler.model import NodeState, PodInfo, Scorer, ScoreResult
from scheduler.scorer import REASONS as SCORER_REASONS

MODE_SHADOW = "shadow"
MODE_ACTIVE = "active"


@dataclass
class Decision:
    pod: PodInfo
    total_nodes: int
    states: list[NodeState] = field(default_factory=list)  # the feasible nodes
    score: np.ndarray = field(default_factory=lambda: np.zeros(0))  # energy, 0–100
    delta_watts: np.ndarray = field(default_factory=lambda: np.zeros(0))  # NaN: unknown
    reason_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    reason_names: Sequence[str] = ()  # reason_codes index this
    default_total: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    chosen: str | None = None
    recommended: str | None = None  # the energy pick
    default_choice: str | None = None  # kube-scheduler's default scoring's pick
    summary: str | None = None  # "0/12 nodes are available: …" when nothing fits

    @property
    def feasible(self) -> bool:
        return self.chosen is not None

    @property
    def names(self) -> list[str]:
        return [s.info.name for s in self.states]

    def reason(self, index: int) -> str:
        return self.reason_names[int(self.reason_codes[index])]

    def energy_results(self) -> list[ScoreResult]:
        return [
            ScoreResult(
                s.info.name,
                float(self.score[i]),
                None if math.isnan(self.delta_watts[i]) else float(self.delta_watts[i]),
                self.reason(i),
            )
            for i, s in enumerate(self.states)
        ]

    def ranked(self, count: int) -> list[int]:
        """Indices of the `count` best energy scores (ties by node name)."""
        if count <= 0 or not self.states:
            return []
        if count < len(self.states):
            part = np.argpartition(-self.score, count - 1)[:count]
            cutoff = self.score[part].min()
            candidates = np.flatnonzero(self.score >= cutoff)  # keep every tie at the cutoff
        else:
            candidates = np.arange(len(self.states))
        order = sorted(
            candidates.tolist(), key=lambda i: (-float(self.score[i]), self.states[i].info.name)
        )
        return order[:count]

    def top_scores(self, count: int) -> dict[str, float]:
        return {
            self.states[i].info.name: round(float(self.score[i]), 1) for i in self.ranked(count)
        }


def _pick(primary: np.ndarray, secondary: np.ndarray | None, rng: random.Random) -> int:
    """Index of the best `primary` (then best `secondary`), uniformly at random among ties."""
    ties = np.flatnonzero(primary == primary.max())
    if secondary is not None and len(ties) > 1:
        second = secondary[ties]
        ties = ties[second == second.max()]
    return int(ties[rng.randrange(len(ties))]) if len(ties) > 1 else int(ties[0])


def _choose(decision: Decision, mode: str, rng: random.Random) -> Decision:
    default_index = _pick(decision.default_total, None, rng)
    energy_index = _pick(decision.score, decision.default_total, rng)
    decision.default_choice = decision.states[default_index].info.name
    decision.recommended = decision.states[energy_index].info.name
    decision.chosen = decision.recommended if mode == MODE_ACTIVE else decision.default_choice
    return decision


def _from_results(decision: Decision, results: Sequence[ScoreResult]) -> None:
    decision.score = np.array([r.score for r in results], dtype=np.float64)
    decision.delta_watts = np.array(
        [np.nan if r.delta_watts is None else r.delta_watts for r in results], dtype=np.float64
    )
    names = sorted({r.reason for r in results})
    code = {name: i for i, name in enumerate(names)}
    decision.reason_names = names
    decision.reason_codes = np.array([code[r.reason] for r in results], dtype=np.int8)


def decide(
    pod: PodInfo,
    nodes: Sequence[NodeState],
    scorer: Scorer,
    mode: str,
    rng: random.Random,
    now: float,
    fit_strategy: str = LEAST_ALLOCATED,
) -> Decision:
    """The reference decision (per node, plain Python). `now` is wall-clock seconds."""
    filtered = filter_nodes(pod, nodes)
    decision = Decision(pod, total_nodes=filtered.total, states=list(filtered.feasible))
    if not filtered.feasible:
        decision.summary = filtered.summary()
        return decision
    _from_results(decision, scorer.score(pod, filtered.feasible, now))
    decision.default_total = np.array(
        [s.total for s in default_scores(pod, filtered.feasible, fit_strategy)], dtype=np.int64
    )
    return _choose(decision, mode, rng)


# -- vectorized ---------------------------------------------------------------------------------


def _least(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    safe = np.maximum(allocatable, 1)
    score = (allocatable - requested) * MAX_NODE_SCORE // safe
    return np.where((allocatable == 0) | (requested > allocatable), 0, score)


def _most(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    safe = np.maximum(allocatable, 1)
    score = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
    return np.where(allocatable == 0, 0, score)


def default_totals(
    pod: PodInfo, table: NodeTable, rows: np.ndarray, strategy: str = LEAST_ALLOCATED
) -> np.ndarray:
    """kube_scoring.default_scores()' totals (fit + balanced) for table rows, as arrays."""
    if strategy not in (LEAST_ALLOCATED, MOST_ALLOCATED):
        raise ValueError(f"unknown NodeResourcesFit strategy {strategy!r}")
    scorer = _least if strategy == LEAST_ALLOCATED else _most
    nonzero = pod.nonzero_requests if pod.nonzero_requests is not None else pod.requests
    alloc_cpu = table.alloc_cpu[rows]
    alloc_mem = table.alloc_mem[rows]
    has_cpu = alloc_cpu > 0
    has_mem = alloc_mem > 0
    fit_cpu = scorer(table.nz_cpu[rows] + nonzero.cpu_millicores, alloc_cpu)
    fit_mem = scorer(table.nz_mem[rows] + nonzero.memory_bytes, alloc_mem)
    weights = has_cpu.astype(np.int64) + has_mem.astype(np.int64)
    fit = np.where(
        weights > 0, (fit_cpu * has_cpu + fit_mem * has_mem) // np.maximum(weights, 1), 0
    )
    if is_best_effort(pod):
        return fit
    with np.errstate(divide="ignore", invalid="ignore"):
        f_cpu = np.minimum(1.0, (table.req_cpu[rows] + pod.requests.cpu_millicores) / alloc_cpu)
        f_mem = np.minimum(1.0, (table.req_mem[rows] + pod.requests.memory_bytes) / alloc_mem)
    std = np.where(has_cpu & has_mem, np.abs((f_cpu - f_mem) / 2), 0.0)
    balanced = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return fit + balanced


def resource_fit(pod: PodInfo, table: NodeTable) -> np.ndarray:
    """filters.insufficient_resources() == [] for every row, as one boolean array."""
    want = pod.requests
    ok = table.pod_count + 1 <= table.alloc_pods
    if want.cpu_millicores > 0:
        ok &= want.cpu_millicores <= table.alloc_cpu - table.req_cpu
    if want.memory_bytes > 0:
        ok &= want.memory_bytes <= table.alloc_mem - table.req_mem
    if want.ephemeral_storage_bytes > 0:
        ok &= want.ephemeral_storage_bytes <= table.alloc_eph - table.req_eph
    return ok


class FastDecider:
    """decide(), vectorized over the cache's NodeTable. One instance per scheduling thread."""

    MAX_SHAPES = 256  # spec-only filter results kept, per pod shape

    def __init__(self, scorer: Scorer, fit_strategy: str = LEAST_ALLOCATED) -> None:
        self.scorer = scorer
        self.fit_strategy = fit_strategy
        # The heuristic scorer's numpy batch (scorer.prepare_batch / score_batch).
        self.batched = hasattr(scorer, "prepare_batch") and hasattr(scorer, "score_batch")
        self._batch: Any = None
        self._batch_layout = -1
        self._batch_versions = np.zeros(0, dtype=np.int64)
        self._static: dict[tuple[Any, ...], np.ndarray] = {}
        self._static_layout = -1

    def _static_mask(self, pod: PodInfo, table: NodeTable) -> np.ndarray:
        if self._static_layout != table.layout_version:
            self._static.clear()
            self._static_layout = table.layout_version
        shape = (pod.tolerations, pod.node_selector, pod.required_affinity)
        mask = self._static.get(shape)
        if mask is None:
            if len(self._static) >= self.MAX_SHAPES:
                self._static.clear()
            mask = np.fromiter(
                (static_failure(pod, info) is None for info in table.infos),
                dtype=bool,
                count=len(table),
            )
            self._static[shape] = mask
        return mask

    def _sync_batch(self, table: NodeTable) -> Any:
        """The scorer's batch for the table: built when the node layout changes, then patched
        row by row for the nodes whose state changed since (usually one per pod placed)."""
        batch = self._batch
        if batch is None or self._batch_layout != table.layout_version:
            batch = self.scorer.prepare_batch(table.states)  # type: ignore[attr-defined]
            self._batch_layout = table.layout_version
        else:
            changed = np.flatnonzero(table.row_version != self._batch_versions)
            if len(changed) > len(table) // 4:
                batch = self.scorer.prepare_batch(table.states)  # type: ignore[attr-defined]
            elif len(changed):
                scalar = set(batch.scalar_rows.tolist())
                for row in changed.tolist():
                    one = self.scorer.prepare_batch([table.states[row]])  # type: ignore[attr-defined]
                    for f in dataclasses.fields(batch):
                        mine = getattr(batch, f.name)
                        if isinstance(mine, np.ndarray) and f.name != "scalar_rows":
                            mine[row] = getattr(one, f.name)[0]
                    batch.preps[row] = one.preps[0]
                    scalar.discard(row)
                    if len(one.scalar_rows):
                        scalar.add(row)
                batch = dataclasses.replace(
                    batch, scalar_rows=np.array(sorted(scalar), dtype=np.intp)
                )
        self._batch_versions = table.row_version.copy()
        self._batch = batch
        return batch

    def decide(
        self, pod: PodInfo, table: NodeTable, mode: str, rng: random.Random, now: float
    ) -> Decision:
        batch = self._sync_batch(table) if self.batched else None
        rows = np.flatnonzero(self._static_mask(pod, table) & resource_fit(pod, table))
        decision = Decision(pod, total_nodes=len(table))
        if len(rows) == 0:  # rare: build kube-scheduler's message the plain way
            filtered = filter_nodes(pod, table.states)
            decision.summary = failure_summary(filtered.total, filtered.failures)
            return decision
        if len(rows) == len(table):
            decision.states = list(table.states)
        else:
            decision.states = [table.states[r] for r in rows.tolist()]
        if batch is not None:
            scores = self.scorer.score_batch(pod, batch, now, rows)  # type: ignore[attr-defined]
            decision.score = np.asarray(scores.score, dtype=np.float64)
            decision.delta_watts = np.asarray(scores.delta_watts, dtype=np.float64)
            decision.reason_codes = np.asarray(scores.reason)
            decision.reason_names = SCORER_REASONS
        else:
            _from_results(decision, self.scorer.score(pod, decision.states, now))
        decision.default_total = default_totals(pod, table, rows, self.fit_strategy)
        return _choose(decision, mode, rng)
