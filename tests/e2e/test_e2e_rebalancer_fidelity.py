"""`default+rebalancer` on the real components (issue 35 item 1, `+rebalancer`): the real
kube-scheduler's default profile and our rebalancer, active, as `kubejoule-rl benchmark
--on-cluster` starts it (rl/evaluation/on_cluster_policy.py), on KWOK nodes, against the
simulator's `default+rebalancer` on the same inputs (rl/evaluation/fidelity.py `without_agents`).

What it shows: the rebalancer runs on the cluster, a round every interval ÷ the speedup (its log,
`rebalancer round: ...`), and — KWOK nodes running no agent — sees no telemetry: every round skips
each node with pods for `telemetry`, so it evicts nothing, as the simulator's rebalancer without
agents evicts nothing (tests/rl/evaluation/test_rl_on_cluster_rebalancer.py shows it would act
with them). Stated tolerance: the cluster's energy within 2 % of the simulator's range over 10
tie-breaking seeds (kube-scheduler breaks ties unseeded), every pod placed both ways, no
eviction either way. About 1 minute (12 pods, 60×)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from rl.evaluation.benchmark import RunSummary, plan_benchmark, run_once
from rl.evaluation.on_cluster import run_on_cluster, run_tag
from rl.simulation.cluster import ClusterModel
from rl.simulation.traces.scenario import PodSpec, parse_node_groups
from tests.helpers.e2e_cluster import random_trace

ENERGY_TOLERANCE_PCT = 2.0
SPEEDUP = 60.0
TIE_SEEDS = 10
POLICY = "default+rebalancer"
NODES = parse_node_groups([
    {"name": "fan", "count": 1, "cpu_cores": 8, "memory_gib": 16,
     "power": {"idle_watts": 100, "max_watts": 250, "curve": "fan", "r": 1.4}},
    {"name": "lin", "count": 2, "cpu_cores": 4, "memory_gib": 8, "power": {"idle_watts": 50, "max_watts": 120}},
])


def _trace() -> list[PodSpec]:
    return [replace(p, owner_kind="ReplicaSet", workload=f"w{p.index % 3}") for p in random_trace(11, 12)]


def _within(value: float, low: float, high: float, tolerance_pct: float) -> bool:
    return low * (1 - tolerance_pct / 100) <= value <= high * (1 + tolerance_pct / 100)


def test_the_rebalancer_runs_beside_kube_scheduler_and_sees_no_telemetry_on_kwok_nodes(
        k8s_bin: Path, tmp_path: Path) -> None:
    cluster = ClusterModel(telemetry=None, telemetry_dropout=1.0, configured_curves=True)
    plan = plan_benchmark(NODES, _trace(), [POLICY], 1, cluster, (), False)
    messages: list[str] = []
    outcomes, partial = run_on_cluster(plan, (), k8s_bin, tmp_path, SPEEDUP, messages.append)
    assert partial is None, f"{partial}\n" + "\n".join(messages[-10:])
    [outcome] = outcomes
    real = outcome.summary
    log = (tmp_path / "plane" / "logs" / f"kj-{run_tag(plan.tasks[0])}-rebalancer.log").read_text()
    rounds = re.findall(r"rebalancer round: (\d+) move\(s\); nodes skipped by reason (\{.*\})", log)
    assert len(rounds) >= 10, log[-2000:]  # a round every 1 s (60 s ÷ 60) over the run
    assert all(moves == "0" for moves, _ in rounds)
    assert any("'telemetry'" in reasons for _, reasons in rounds), rounds
    simulated = [RunSummary.of(POLICY, s, run_once(NODES, plan.pods, POLICY, s, cluster=cluster)) for s in range(TIE_SEEDS)]
    energy = [r.energy_joules for r in simulated]
    report = (real, min(energy), max(energy))
    assert _within(real.energy_joules, min(energy), max(energy), ENERGY_TOLERANCE_PCT), report
    assert real.never_scheduled == 0 and all(r.never_scheduled == 0 for r in simulated), report
    assert real.evictions == 0 and all(r.evictions == 0 for r in simulated), report
