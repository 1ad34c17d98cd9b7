"""The rebalancer's Prometheus metrics, on a registry it owns (served with /healthz and /readyz
by scheduler/service/metrics.py `serve`).

| metric | type | labels |
|---|---|---|
| `kubejoule_rebalancer_rounds_total` | counter | `result`: planned, or why the round did nothing — clock_jump, not_synced, telemetry_not_ready, pdbs_unavailable |
| `kubejoule_rebalancer_nodes` | gauge | `decision`: move, or the skip reason (no_pods, telemetry, curve, prediction, prediction_fallback, bare, local_storage, not_safe_to_evict, do_not_disrupt, terminating, multiple_pdbs, unreadable_pod, pdb, no_room, not_worth, score, budget, destination, cooldown, not_schedulable) — last round |
| `kubejoule_rebalancer_moves_total` | counter | `mode`: shadow (recommended), active (carried out) |
| `kubejoule_rebalancer_saving_joules_total` | counter | `mode` — the predicted saving of those moves |
| `kubejoule_rebalancer_recommended_saving_joules` | gauge | — the predicted saving of the last round's moves |
| `kubejoule_rebalancer_evictions_total` | counter | `result`: evicted, refused (a PDB, 429), gone (404, 409), error |
| `kubejoule_rebalancer_last_round_timestamp_seconds` | gauge | — wall clock of the last round that planned |
| `kubejoule_rebalancer_leader` | gauge | — 1 while this replica holds the lease |
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from common.metrics import MetricSpec
from scheduler.decisions.rebalance import Plan

EVICTION_RESULTS = ("evicted", "refused", "gone", "error")
MODES = ("shadow", "active")

ROUNDS = MetricSpec("kubejoule_rebalancer_rounds", "counter", "Rebalancer rounds, by what they did", ("result",))
NODES = MetricSpec("kubejoule_rebalancer_nodes", "gauge", "Nodes of the last round, by decision", ("decision",))
MOVES = MetricSpec(
    "kubejoule_rebalancer_moves", "counter", "Nodes the rebalancer emptied (active) or would empty (shadow)",
    ("mode",),
)
SAVING = MetricSpec("kubejoule_rebalancer_saving_joules", "counter", "Predicted energy saving of those moves", ("mode",))
RECOMMENDED_SAVING = MetricSpec(
    "kubejoule_rebalancer_recommended_saving_joules", "gauge", "Predicted saving of the last round's moves"
)
EVICTIONS = MetricSpec("kubejoule_rebalancer_evictions", "counter", "Eviction requests, by answer", ("result",))
LAST_ROUND = MetricSpec(
    "kubejoule_rebalancer_last_round_timestamp_seconds", "gauge", "Wall clock of the last round that planned"
)
LEADER = MetricSpec("kubejoule_rebalancer_leader", "gauge", "1 while this replica holds the lease")


class RebalancerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.rounds = ROUNDS.counter(r)
        self.nodes = NODES.gauge(r)
        self.moves = MOVES.counter(r)
        self.saving = SAVING.counter(r)
        self.recommended = RECOMMENDED_SAVING.gauge(r)
        self.evictions = EVICTIONS.counter(r)
        self.last_round = LAST_ROUND.gauge(r)
        self.leader = LEADER.gauge(r)
        for mode in MODES:
            self.moves.labels(mode)
            self.saving.labels(mode)
        for result in EVICTION_RESULTS:
            self.evictions.labels(result)

    def skipped_round(self, reason: str) -> None:
        self.rounds.labels(reason).inc()

    def planned(self, plan: Plan, mode: str, wall: float) -> None:
        self.rounds.labels("planned").inc()
        self.nodes.clear()
        self.nodes.labels("move").set(len(plan.moves))
        for reason, count in plan.reasons().items():
            self.nodes.labels(reason).set(count)
        saving = sum(m.saving_joules for m in plan.moves)
        self.moves.labels(mode).inc(len(plan.moves))
        self.saving.labels(mode).inc(saving)
        self.recommended.set(saving)
        self.last_round.set(wall)
