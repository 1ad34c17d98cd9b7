"""The benchmark harness: every policy × expander × seed on one cluster and trace, against the
oracle bound.

Seeds drive the policies' random tie-breaking (and the autoscaler's random expander and its
tie-breaking); the trace is the same for every run. Every policy runs with every expander given;
a policy entry `POLICY@EXPANDER` runs that pair only. Results are keyed `POLICY` when one
expander (or none: no autoscaler) is run and no entry names one, `POLICY@EXPANDER` otherwise. Per key the results are means
over seeds:

* `energy_kwh`: cluster energy from t = 0 until the run's last pod finishes;
* `energy_vs_default_pct`: `100 × (E − E_default) / E_default` (negative = saves energy);
* `slowdown_mean`, `slowdown_p99`: per pod `100 × ((finish − submit) / duration − 1)`, in percent
  (0 = the pod started at once and ran at full speed); mean and nearest-rank 99th percentile;
* `unschedulable`: pods that found no feasible node at least once (they waited and were
  retried); `never_scheduled`: pods that never ran;
* `gap_closed_pct`: `100 × (E_default − E) / (E_default − E_oracle)`, the share of the largest
  possible saving the policy achieved (`rl/oracle.py`);
* `pending_seconds_mean`, `pending_seconds_p99`: per pod, arrival to (first) start;
* `boots`, `scale_ups` (autoscaler scale-up decisions), `scale_downs` (nodes it powered off);
* scale-down's disruption (rl/workloads.py): `evictions` (pods evicted from drained nodes),
  `restarted_pods` (of them, replaced by a pod that starts from scratch: Jobs),
  `lost_cpu_hours` (CPU-hours the evicted pods had done and lost), `disrupted_workloads`
  (workloads that lost a pod), `deleted_pods` (evicted and not recreated: bare pods).

"default" is the run keyed `default` or, with several expanders, `default@least-waste` (else
`default@random`, else the first `default@…`): kube-scheduler as shipped with cluster-autoscaler
as shipped.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rl.autoscaler import EXPANDERS
from rl.cluster import ClusterModel, simulation
from rl.oracle import OracleBound, oracle_bound
from rl.policies import make_policy
from rl.progress import ProgressBar
from rl.scenario import NodeSpec, PodSpec
from rl.simulator import PowerOffModel, SimResult

SCHEMA = "kubejoule.rl-benchmark/v1"
JOULES_PER_KWH = 3.6e6
PROGRESS_EVERY_DECISIONS = 100


def percentile_nearest_rank(values: Sequence[float], percent: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100.0 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class RunSummary:
    policy: str
    seed: int
    energy_joules: float
    slowdown_mean_pct: float | None
    slowdown_p99_pct: float | None
    unschedulable: int
    never_scheduled: int
    boots: int
    end_s: float
    pending_mean_s: float | None = None
    pending_p99_s: float | None = None
    scale_ups: int = 0
    scale_downs: int = 0
    evictions: int = 0
    restarted_pods: int = 0
    lost_cpu_seconds: float = 0.0
    disrupted_workloads: int = 0
    deleted_pods: int = 0

    @classmethod
    def of(cls, policy: str, seed: int, result: SimResult) -> RunSummary:
        slowdowns = [100.0 * s for s in result.slowdowns()]
        pending = result.pending_seconds()
        return cls(
            policy=policy,
            seed=seed,
            energy_joules=result.energy_joules,
            slowdown_mean_pct=sum(slowdowns) / len(slowdowns) if slowdowns else None,
            slowdown_p99_pct=percentile_nearest_rank(slowdowns, 99.0),
            unschedulable=result.unschedulable,
            never_scheduled=result.never_scheduled,
            boots=result.boots,
            end_s=result.end_s,
            pending_mean_s=sum(pending) / len(pending) if pending else None,
            pending_p99_s=percentile_nearest_rank(pending, 99.0),
            scale_ups=result.scale_ups,
            scale_downs=result.scale_downs,
            evictions=result.evictions,
            restarted_pods=result.restarted_pods,
            lost_cpu_seconds=result.lost_cpu_seconds,
            disrupted_workloads=result.disrupted_workloads,
            deleted_pods=result.deleted_pods,
        )


@dataclass
class BenchmarkResult:
    policies: list[str]
    seeds: int
    oracle: OracleBound
    runs: dict[str, list[RunSummary]] = field(default_factory=dict)
    # Cluster power over time of each policy's first seed: (time s, watts from then on).
    timelines: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def mean_energy_joules(self, policy: str) -> float:
        runs = self.runs[policy]
        return sum(r.energy_joules for r in runs) / len(runs)


def run_once(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policy_name: str,
    seed: int,
    power_off: PowerOffModel | None = None,
    progress: ProgressBar | None = None,
    record_timeline: bool = False,
    cluster: ClusterModel | None = None,
    label: str | None = None,
    observer: Any = None,
) -> SimResult:
    """One simulation of `policy_name` with tie-breaking seeded by `seed`. `observer` (e.g.
    rl.sim_collector.SimDecisionLog) sees every decision: start(sim, label, seed),
    decided(sim, decision, chosen), finish(sim)."""
    if cluster is None:
        cluster = ClusterModel(power_off=power_off)
    sim = simulation(nodes, pods, cluster, seed, record_timeline)
    policy = make_policy(policy_name, nodes, cluster.policy_power_off())
    policy.reset(sim.specs, random.Random(seed))
    label = label or policy_name
    attach = getattr(policy, "attach", None)
    if attach is not None:  # a policy that reads more of the cluster (learned: node workloads)
        attach(sim)
    decisions = 0
    if observer is not None:
        observer.start(sim, label, seed)
    while (decision := sim.next_decision()) is not None:
        chosen = policy.choose(decision.info, decision.feasible, decision.now, decision.candidates)
        if observer is not None:
            observer.decided(sim, decision, chosen)
        sim.place(chosen)
        decisions += 1
        if progress is not None and decisions % PROGRESS_EVERY_DECISIONS == 0:
            progress.advance(PROGRESS_EVERY_DECISIONS, f"{label} seed {seed}")
    if progress is not None:
        progress.advance(decisions % PROGRESS_EVERY_DECISIONS, f"{label} seed {seed}")
    if observer is not None:
        observer.finish(sim)
    return sim.result()


def split_pair(entry: str) -> tuple[str, str | None]:
    """`POLICY@EXPANDER` → (POLICY, EXPANDER) when the suffix names an expander; else (entry,
    None)."""
    policy, at, expander = entry.rpartition("@")
    if at and policy and expander in EXPANDERS:
        return policy, expander
    return entry, None


def result_keys(policies: Sequence[str], expanders: Sequence[str]) -> list[tuple[str, str | None, str]]:
    """(policy, expander, results key) for every run. An entry `POLICY@EXPANDER` is that one
    pair; every other policy runs with each of `expanders`. Keys are `POLICY` when no entry
    names an expander and at most one expander is given, `POLICY@EXPANDER` otherwise."""
    pairs: list[tuple[str, str | None]] = []
    for entry in policies:
        policy, expander = split_pair(entry)
        if expander is not None:
            pairs.append((policy, expander))
        elif expanders:
            pairs.extend((policy, e) for e in expanders)
        else:
            pairs.append((policy, None))
    plain = len(expanders) <= 1 and all(split_pair(e)[1] is None for e in policies)
    runs: list[tuple[str, str | None, str]] = []
    for policy, expander in pairs:
        key = policy if plain or expander is None else f"{policy}@{expander}"
        if key not in [k for _, _, k in runs]:
            runs.append((policy, expander, key))
    return runs


def oracle_for(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], cluster: ClusterModel) -> OracleBound:
    boot_seconds, boot_joules = 120.0, None
    model = cluster.autoscaler or cluster.power_off
    if model is not None:
        boot_seconds, boot_joules = model.boot_seconds, model.boot_joules
    return oracle_bound(
        nodes,
        pods,
        model is not None,
        daemon_cores=cluster.daemon_cores,
        boot_seconds=boot_seconds,
        boot_joules=boot_joules,
    )


def run_benchmark(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policies: Sequence[str],
    seeds: int = 1,
    power_off: PowerOffModel | None = None,
    show_progress: bool = False,
    cluster: ClusterModel | None = None,
    expanders: Sequence[str] = (),
    observer: Any = None,
) -> BenchmarkResult:
    """Every policy (× expander, under the autoscaler) × seed."""
    if seeds < 1:
        raise ValueError("seeds must be >= 1")
    if cluster is None:
        cluster = ClusterModel(power_off=power_off)
    if (
        cluster.autoscaler is not None
        and not expanders
        and all(split_pair(p)[1] is None for p in policies)
    ):
        expanders = (cluster.autoscaler.expander,)
    runs = result_keys(policies, expanders)
    named = {e for _, e, _ in runs if e is not None}
    if named and cluster.autoscaler is None:
        raise ValueError("expanders need the autoscaler")
    if cluster.autoscaler is not None and any(e is None for _, e, _ in runs):
        expanders = (*expanders, cluster.autoscaler.expander)
        runs = [(p, e or cluster.autoscaler.expander, k) for p, e, k in runs]
    for name, _, _ in runs:  # fail before hours of simulation, not after
        make_policy(name, nodes, cluster.policy_power_off())
    models = {}
    if cluster.autoscaler is not None:
        for e in {e for _, e, _ in runs if e is not None}:
            models[e] = replace(cluster, autoscaler=replace(cluster.autoscaler, expander=e))
    bound = oracle_for(nodes, pods, cluster)
    result = BenchmarkResult([key for _, _, key in runs], seeds, bound)
    progress = ProgressBar(len(runs) * seeds * len(pods), "benchmark") if show_progress else None
    for name, expander, key in runs:
        result.runs[key] = []
        model = models[expander] if expander is not None else cluster
        for seed in range(seeds):
            sim_result = run_once(
                nodes, pods, name, seed, None, progress,
                record_timeline=seed == 0, cluster=model, label=key, observer=observer,
            )
            result.runs[key].append(RunSummary.of(key, seed, sim_result))
            if seed == 0:
                result.timelines[key] = sim_result.timeline
            if progress is not None:
                # Pods that never got a decision still count as done for the bar.
                progress.advance(sim_result.never_scheduled)
    if progress is not None:
        progress.close()
    return result


def baseline_key(keys: Sequence[str]) -> str | None:
    """The run energy is compared with (module docstring)."""
    for key in ("default", "default@least-waste", "default@random"):
        if key in keys:
            return key
    return next((k for k in keys if k.startswith("default@")), None)


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def results_json(result: BenchmarkResult, scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results document (see the module docstring for every field)."""
    oracle_j = result.oracle.energy_joules
    baseline = baseline_key(result.policies)
    default_j = result.mean_energy_joules(baseline) if baseline is not None else None
    policies: dict[str, Any] = {}
    for name in result.policies:
        runs = result.runs[name]
        energy_j = result.mean_energy_joules(name)
        vs_default = gap = None
        if default_j is not None and default_j > 0:
            vs_default = 100.0 * (energy_j - default_j) / default_j
            if default_j > oracle_j:
                gap = 100.0 * (default_j - energy_j) / (default_j - oracle_j)
        policies[name] = {
            "energy_kwh": _round(energy_j / JOULES_PER_KWH),
            "energy_vs_default_pct": _round(vs_default, 2),
            "slowdown_mean": _round(_mean([r.slowdown_mean_pct for r in runs]), 3),
            "slowdown_p99": _round(_mean([r.slowdown_p99_pct for r in runs]), 3),
            "unschedulable": _round(_mean([float(r.unschedulable) for r in runs]), 2),
            "gap_closed_pct": _round(gap, 2),
            "never_scheduled": _round(_mean([float(r.never_scheduled) for r in runs]), 2),
            "boots": _round(_mean([float(r.boots) for r in runs]), 2),
            "pending_seconds_mean": _round(_mean([r.pending_mean_s for r in runs]), 3),
            "pending_seconds_p99": _round(_mean([r.pending_p99_s for r in runs]), 3),
            "scale_ups": _round(_mean([float(r.scale_ups) for r in runs]), 2),
            "scale_downs": _round(_mean([float(r.scale_downs) for r in runs]), 2),
            "evictions": _round(_mean([float(r.evictions) for r in runs]), 2),
            "restarted_pods": _round(_mean([float(r.restarted_pods) for r in runs]), 2),
            "lost_cpu_hours": _round(_mean([r.lost_cpu_seconds / 3600.0 for r in runs]), 3),
            "disrupted_workloads": _round(_mean([float(r.disrupted_workloads) for r in runs]), 2),
            "deleted_pods": _round(_mean([float(r.deleted_pods) for r in runs]), 2),
            "below_oracle": any(r.energy_joules < oracle_j for r in runs),
            "runs": [
                {
                    "seed": r.seed,
                    "energy_kwh": _round(r.energy_joules / JOULES_PER_KWH),
                    "slowdown_mean": _round(r.slowdown_mean_pct, 3),
                    "slowdown_p99": _round(r.slowdown_p99_pct, 3),
                    "unschedulable": r.unschedulable,
                    "never_scheduled": r.never_scheduled,
                    "boots": r.boots,
                    "end_s": _round(r.end_s, 3),
                    "pending_seconds_mean": _round(r.pending_mean_s, 3),
                    "pending_seconds_p99": _round(r.pending_p99_s, 3),
                    "scale_ups": r.scale_ups,
                    "scale_downs": r.scale_downs,
                    "evictions": r.evictions,
                    "restarted_pods": r.restarted_pods,
                    "lost_cpu_hours": _round(r.lost_cpu_seconds / 3600.0, 3),
                    "disrupted_workloads": r.disrupted_workloads,
                    "deleted_pods": r.deleted_pods,
                }
                for r in runs
            ],
        }
    bound = result.oracle
    return {
        "schema": SCHEMA,
        "scenario": scenario or {},
        "seeds": result.seeds,
        "baseline": baseline,
        "units": {
            "energy": "kWh",
            "slowdown": "percent: 100 × ((finish − submit) / duration − 1) per pod",
            "pending": "seconds from arrival to (first) start, per pod",
        },
        "policies": policies,
        "oracle": {
            "energy_kwh": _round(bound.energy_kwh),
            "idle_kwh": _round(bound.idle_joules / JOULES_PER_KWH),
            "work_core_hours": _round(bound.work_core_seconds / 3600.0, 3),
            "watts_per_core": _round(bound.watts_per_core, 4),
            "horizon_s": _round(bound.horizon_s, 3),
        },
    }
