"""The benchmark harness: every policy × expander × seed on one cluster and trace, against the
oracle bound.

Each seed draws its own workload from the trace (`vary_workload`, the CLI's default: arrivals
jittered, run times resampled per workload, the telemetry's phase; rl/simulation/traces/seeded_workload.py)
and drives the policies' random tie-breaking (and the autoscaler's random expander and its
tie-breaking); every policy runs the same workloads, so seeds pair. Without `vary_workload`
(`--tie-seeds-only`, the ablation of the old behaviour) the trace is the same for every run. Every policy runs with every expander given;
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
  possible saving the policy achieved (`rl/evaluation/oracle.py`);
* `pending_seconds_mean`, `pending_seconds_p99`: per pod, arrival to (first) start;
* `carbon_g` (with an intensity series, `--carbon-intensity-csv`; rl/evaluation/carbon.py): the
  run's grams of CO2-equivalent, its t = 0 at `--carbon-start` on the series; null with
  `carbon_gap` (why) when energy falls where the intensity is unknown;
* `boots`, `scale_ups` (autoscaler scale-up decisions), `scale_downs` (nodes it powered off);
* scale-down's disruption (rl/simulation/engine/workloads.py): `evictions` (pods evicted from drained nodes),
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
from typing import Protocol

from rl.evaluation.carbon import CarbonWindow, run_grams
from rl.evaluation.oracle import OracleBound, mean_bound, oracle_bound
from rl.evaluation.parallel import run_tasks
from rl.evaluation.progress import ProgressBar
from rl.policies.catalog import make_policy
from rl.simulation.autoscaler.model import EXPANDERS
from rl.simulation.cluster import ClusterModel, simulation
from rl.simulation.engine.simrecords import PlacementRequest
from rl.simulation.engine.simulator import AttachingPolicy, PowerOffModel, SimResult, Simulation
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from rl.simulation.traces.seeded_workload import WorkloadDraw, draw_workload
from scheduler.domain.cluster_defaults import BOOT_SECONDS

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
    energy_split_joules: dict[str, float] = field(default_factory=dict)  # energy.ENERGY_PARTS
    node_seconds: float = 0.0  # nodes on or booting
    busy_node_seconds: float = 0.0  # nodes running at least one workload pod
    carbon_grams: float | None = None  # with a carbon window: the run's grams (None: unknown, or none asked)
    carbon_gap: str | None = None  # why carbon_grams is unknown

    @classmethod
    def of(cls, policy: str, seed: int, result: SimResult, carbon: CarbonWindow | None = None) -> RunSummary:
        grams, gap = (
            run_grams(carbon, result.timeline, result.energy_lumps, result.end_s) if carbon is not None else (None, None)
        )
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
            energy_split_joules=dict(result.energy_split_joules or {}),
            node_seconds=result.node_seconds,
            busy_node_seconds=result.busy_node_seconds(),
            carbon_grams=grams,
            carbon_gap=gap,
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


class DecisionObserver(Protocol):
    """Sees every decision of a run, in this process (rl.learning.sim_decision_log.SimDecisionLog)."""

    def start(self, sim: Simulation, label: str, seed: int) -> None: ...

    def decided(self, sim: Simulation, decision: PlacementRequest, chosen: str) -> None: ...

    def finish(self, sim: Simulation) -> None: ...


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
    observer: DecisionObserver | None = None,
) -> SimResult:
    """One simulation of `policy_name` with tie-breaking seeded by `seed`. `observer` (e.g.
    rl.learning.sim_decision_log.SimDecisionLog) sees every decision: start(sim, label, seed),
    decided(sim, decision, chosen), finish(sim)."""
    if cluster is None:
        cluster = ClusterModel(power_off=power_off)
    sim = simulation(nodes, pods, cluster, seed, record_timeline)
    policy = make_policy(policy_name, nodes, cluster.policy_power_off(), cluster.policy_curves(nodes))
    policy.reset(sim.state.specs, random.Random(seed))
    label = label or policy_name
    if isinstance(policy, AttachingPolicy):  # it reads more of the cluster (learned: node workloads)
        policy.attach(sim)
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
    boot_seconds, boot_joules = BOOT_SECONDS, None
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


@dataclass(frozen=True)
class RunTask:
    """One simulation of a benchmark: `policy` under `expander` (None: no autoscaler) with
    tie-breaking seed `seed`, reported under `key`."""

    policy: str
    expander: str | None
    key: str
    seed: int


@dataclass(frozen=True)
class BenchmarkPlan:
    """Everything a benchmark's simulations need: the cluster, the trace, the results keys, the
    tasks (key by key, seed by seed), each expander's cluster model and the oracle bound."""

    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]
    keys: tuple[str, ...]
    seeds: int
    tasks: tuple[RunTask, ...]
    models: dict[str | None, ClusterModel]  # by expander
    oracle: OracleBound  # the mean over seeds of each seed's workload's bound
    # Each seed's workload (rl/simulation/traces/seeded_workload.py); empty: the trace for every seed.
    draws: tuple[WorkloadDraw, ...] = ()
    carbon: CarbonWindow | None = None  # grams per run on this intensity series

    def pods_of(self, seed: int) -> tuple[PodSpec, ...]:
        return self.draws[seed].pods if self.draws else self.pods

    def cluster_of(self, expander: str | None, seed: int) -> ClusterModel:
        """The expander's cluster, its telemetry at the seed's phase."""
        cluster = self.models[expander]
        if not self.draws or cluster.telemetry is None:
            return cluster
        return replace(cluster, telemetry=replace(cluster.telemetry, phase_s=self.draws[seed].telemetry_phase_s))

    @property
    def notes(self) -> tuple[str, ...]:
        return self.draws[0].notes if self.draws else ()


@dataclass(frozen=True)
class RunOutcome:
    summary: RunSummary
    timeline: list[tuple[float, float]] | None  # seed 0's cluster power over time


def plan_benchmark(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policies: Sequence[str],
    seeds: int = 1,
    cluster: ClusterModel | None = None,
    expanders: Sequence[str] = (),
    vary_workload: bool = False,
    carbon: CarbonWindow | None = None,
) -> BenchmarkPlan:
    """Every policy (× expander, under the autoscaler) × seed; with `vary_workload` each seed's
    own workload (module docstring). ValueError on bad input (CannotVary: a trace with nothing
    to resample), before any simulation."""
    if seeds < 1:
        raise ValueError(f"--seeds {seeds}: a benchmark needs at least one seed")
    if cluster is None:
        cluster = ClusterModel()
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
        runs = [(p, e or cluster.autoscaler.expander, k) for p, e, k in runs]
    for name, _, _ in runs:  # fail before hours of simulation, not after
        make_policy(name, nodes, cluster.policy_power_off())
    models: dict[str | None, ClusterModel] = {None: cluster}
    if cluster.autoscaler is not None:
        for e in {e for _, e, _ in runs if e is not None}:
            models[e] = replace(cluster, autoscaler=replace(cluster.autoscaler, expander=e))
    tasks = tuple(RunTask(p, e, k, seed) for p, e, k in runs for seed in range(seeds))
    keys = tuple(k for _, _, k in runs)
    draws: tuple[WorkloadDraw, ...] = ()
    if vary_workload:
        sample_s = cluster.telemetry.sample_seconds if cluster.telemetry is not None else 5.0
        draws = tuple(draw_workload(pods, seed, sample_s) for seed in range(seeds))
        oracle = mean_bound([oracle_for(nodes, d.pods, cluster) for d in draws])
    else:
        oracle = oracle_for(nodes, pods, cluster)
    return BenchmarkPlan(tuple(nodes), tuple(pods), keys, seeds, tasks, models, oracle, draws, carbon)


def run_task(
    plan: BenchmarkPlan,
    task: RunTask,
    progress: ProgressBar | None = None,
    observer: DecisionObserver | None = None,
) -> RunOutcome:
    """One of the plan's simulations (a pool worker's `work`)."""
    result = run_once(
        plan.nodes, plan.pods_of(task.seed), task.policy, task.seed, None, progress,
        record_timeline=task.seed == 0 or plan.carbon is not None, cluster=plan.cluster_of(task.expander, task.seed),
        label=task.key, observer=observer,
    )
    timeline = result.timeline if task.seed == 0 else None
    return RunOutcome(RunSummary.of(task.key, task.seed, result, plan.carbon), timeline)


def run_plan(
    plan: BenchmarkPlan,
    indices: Sequence[int] | None = None,
    jobs: int = 1,
    show_progress: bool = False,
    observer: DecisionObserver | None = None,
) -> list[RunOutcome]:
    """The plan's tasks at `indices` (default: all), in that order, in `jobs` processes. An
    `observer` sees every decision in this process: only with `jobs` 1."""
    if observer is not None and jobs > 1:
        raise ValueError("a decision log is written in run order: use --jobs 1 with --decision-log")
    tasks = [plan.tasks[i] for i in (range(len(plan.tasks)) if indices is None else indices)]
    pods = len(plan.pods)
    progress = ProgressBar(len(tasks) * pods, "benchmark") if show_progress else None
    if jobs <= 1:
        outcomes = []
        for task in tasks:
            outcomes.append(run_task(plan, task, progress, observer))
            if progress is not None:
                # Pods that never got a decision still count as done for the bar.
                progress.advance(outcomes[-1].summary.never_scheduled)
    else:

        def done(position: int, outcome: RunOutcome) -> None:
            if progress is not None:
                progress.advance(pods, f"{outcome.summary.policy} seed {outcome.summary.seed}")

        outcomes = run_tasks(run_task, plan, tasks, jobs, done)
    if progress is not None:
        progress.close()
    return outcomes


def assemble(
    keys: Sequence[str], seeds: int, oracle: OracleBound, outcomes: Sequence[RunOutcome]
) -> BenchmarkResult:
    """The benchmark's result from every task's outcome, in task order."""
    result = BenchmarkResult(list(keys), seeds, oracle)
    for outcome in outcomes:
        key = outcome.summary.policy
        result.runs.setdefault(key, []).append(outcome.summary)
        if outcome.timeline is not None:
            result.timelines[key] = outcome.timeline
    return result

