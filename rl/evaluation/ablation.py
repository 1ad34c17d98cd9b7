"""The ablation (`kubejoule-rl ablation`): each of kubejoule's levers alone and together, beside
the baseline, the bin-packing peers, the hindsight reference and the oracle bound, on one
cluster and trace (the headline, `heterogeneous-autoscaler`) or on every case of a held-out
directory (`rl/heldout`).

Every row is a benchmark entry (`POLICY@EXPANDER`, rl/evaluation/benchmark.py) run by the benchmark's own
plan and runner (`plan_benchmark`, `run_task`, `--jobs` through rl/evaluation/parallel.py), with the same
seeds for every row; a lever's profile is a profile file bundled in rl/scenarios/ (`profile:`,
rl/policies/scheduling_profiles.py). On a held-out directory each case is planned under the promotion gate's
cluster rules (`rl.evaluation.gate_run.gate_cluster`: cluster-autoscaler as it ships, its DaemonSets and
PDBs, lagging telemetry; the expander each row names), and the table sums the cases.

The table (`ablation_table`, rl/evaluation/ablation_report.py with the targets), per row: energy (kWh; a case's is its mean over seeds, summed over
cases), against the baseline `default@least-waste` and against bin packing with our expander
`mostallocated@kubejoule` (relative difference of the sums), the share of the oracle gap closed
(`(E_base − E) / (E_base − E_oracle)` over the sums), the worst case against the baseline (held
out), mean slowdown (the mean of the cases' means), evictions and pods never scheduled (sums).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rl.evaluation.ablation_rows import AblationDocument, AblationRow, rounded_interval
from rl.evaluation.benchmark import (
    BenchmarkPlan,
    RunOutcome,
    assemble,
    plan_benchmark,
    run_task,
)
from rl.evaluation.oracle import OracleBound
from rl.evaluation.paired import paired_axes, relative_pct
from rl.evaluation.parallel import run_tasks
from rl.evaluation.results import benchmark_document
from rl.evaluation.rows import BenchmarkDocument
from rl.simulation.cluster import ClusterModel
from rl.simulation.traces.scenario import NodeSpec, PodSpec, scenario_path

BASELINE = "default@least-waste"
PACKING = "mostallocated@kubejoule"
OPERATORS = "mostallocated+highnodeutilization@least-waste"
# Issue 23's targets, for the recommended setups (`ablation_targets`).
RECOMMENDED = (
    "profile:{profiles}/ablation-efficiency.yaml@kubejoule",  # issue 33's recommended setup
    "kubejoule@kubejoule",
    "kubejoule+rebalancer@kubejoule",
)
SAVING_VS_BASELINE_PCT = 25.0
SAVING_VS_PACKING_PCT = 5.0
SLOWDOWN_MARGIN_POINTS = 2.0


@dataclass(frozen=True)
class Row:
    label: str  # what the table calls it
    entry: str  # the benchmark entry; {profiles} is the bundled profile files' directory
    what: str  # the lever, in words


ROWS: tuple[Row, ...] = (
    Row("baseline", BASELINE, "kube-scheduler and cluster-autoscaler as they ship"),
    Row("bin packing", PACKING, "kube-scheduler's MostAllocated, our expander"),
    Row(
        "bin packing + descheduler",
        OPERATORS,
        "what operators run: MostAllocated, descheduler HighNodeUtilization, least-waste",
    ),
    Row(
        "energy v2",
        "profile:{profiles}/ablation-v2.yaml@kubejoule",
        "the energy plugin before v3: no lever, fixed 20 W scale",
    ),
    Row("no lever", "profile:{profiles}/ablation-none.yaml@kubejoule", "v3's per-pod scale, no lever"),
    Row(
        "lifetimes alone",
        "profile:{profiles}/ablation-lifetimes.yaml@kubejoule",
        "lifetime-aware pricing",
    ),
    Row(
        "no revival alone",
        "profile:{profiles}/ablation-protect.yaml@kubejoule",
        "nodes CA is about to remove not revived for a short pod",
    ),
    Row(
        "efficiency alone",
        "profile:{profiles}/ablation-efficiency.yaml@kubejoule",
        "load first to the fewest watts per unit of work",
    ),
    Row(
        "rebalancer alone",
        "profile:{profiles}/ablation-none.yaml+rebalancer@kubejoule",
        "no lever in the plugin, the energy rebalancer (active)",
    ),
    Row("three levers", "profile:{profiles}/ablation-all.yaml@kubejoule", "all three levers, our expander"),
    Row(
        "three levers + rebalancer",
        "profile:{profiles}/ablation-all.yaml+rebalancer@kubejoule",
        "all three levers, our expander, the energy rebalancer (active)",
    ),
    Row(
        "kubejoule without lifetimes",
        "profile:{profiles}/ablation-shipped-no-lifetimes.yaml@kubejoule",
        "the shipped profile with its lifetime lever off",
    ),
    Row(
        "kubejoule with least-waste",
        "kubejoule@least-waste",
        "the shipped profile with CA's shipped expander",
    ),
    Row(
        "kubejoule as shipped",
        "kubejoule@kubejoule",
        "the shipped profile (lifetimes lever, MostAllocated beside it) and our expander",
    ),
    Row(
        "kubejoule + rebalancer",
        "kubejoule+rebalancer@kubejoule",
        "the shipped profile, our expander, the energy rebalancer (active)",
    ),
    Row(
        "hindsight",
        "hindsight@kubejoule",
        "NOT DEPLOYABLE: the shipped profile told each pod's true end",
    ),
)


def resolve(entry: str) -> str:
    """The entry with `{profiles}` replaced by the bundled profile files' directory."""
    return entry.replace("{profiles}", str(scenario_path("")).rstrip("/"))


@dataclass(frozen=True)
class Case:
    """One cluster and trace under its rules (the headline is one case, a held-out directory
    one per folder)."""

    name: str
    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]
    cluster: ClusterModel


@dataclass(frozen=True)
class AblationPlan:
    rows: tuple[Row, ...]
    seeds: int
    plans: tuple[BenchmarkPlan, ...]  # per case
    names: tuple[str, ...]  # case names

    @property
    def tasks(self) -> list[tuple[int, int]]:
        """(case, the case plan's task index): case by case, row by row, seed by seed."""
        return [(c, i) for c, plan in enumerate(self.plans) for i in range(len(plan.tasks))]

    def describe(self, source: Mapping[str, object]) -> dict[str, Any]:
        """What the ablation's shards share (rl/evaluation/shards.py)."""
        return {
            "source": dict(source),
            "rows": [{"label": r.label, "entry": r.entry, "what": r.what} for r in self.rows],
            "seeds": self.seeds,
            "keys": list(self.plans[0].keys),
            "cases": list(self.names),
            "oracles": [asdict(p.oracle) for p in self.plans],
            "tasks": [[self.names[c], self.plans[c].tasks[i].key, self.plans[c].tasks[i].seed]
                      for c, i in self.tasks],
        }


def plan_ablation(
    cases: Sequence[Case], rows: Sequence[Row] = ROWS, seeds: int = 3, vary_workload: bool = False
) -> AblationPlan:
    """Every row on every case with `seeds` seeds (with `vary_workload`, each seed its own
    workload: rl/simulation/traces/seeded_workload.py); ValueError (a bad row, a trace that cannot
    vary) before any simulation."""
    if not cases:
        raise ValueError("no cases to run")
    labels = [r.label for r in rows]
    if len(set(labels)) != len(labels):
        raise ValueError("row labels must be unique")
    entries = [resolve(r.entry) for r in rows]
    plans = tuple(
        plan_benchmark(case.nodes, case.pods, entries, seeds, case.cluster, (), vary_workload)
        for case in cases
    )
    return AblationPlan(tuple(rows), seeds, plans, tuple(c.name for c in cases))


def run_ablation_task(plans: Sequence[BenchmarkPlan], task: tuple[int, int]) -> RunOutcome:
    """One simulation of the ablation (a pool worker's `work`): the benchmark's own run."""
    case, index = task
    plan = plans[case]
    outcome = run_task(plan, plan.tasks[index])
    return RunOutcome(outcome.summary, None)


def run_ablation(
    plan: AblationPlan,
    indices: Sequence[int] | None = None,
    jobs: int = 1,
    done: Callable[[int, RunOutcome], None] | None = None,
) -> list[RunOutcome]:
    """The plan's tasks at `indices` (default all), in task order, in `jobs` processes."""
    tasks = plan.tasks
    chosen = [tasks[i] for i in (range(len(tasks)) if indices is None else indices)]
    return run_tasks(run_ablation_task, plan.plans, chosen, jobs, done)


@dataclass(frozen=True)
class CasesRun:
    """One seed's runs of a row summed over the cases (what its paired comparisons read)."""

    seed: int
    energy_kwh: float
    lost_cpu_hours: float
    evictions: float
    pending_seconds_p99: float


def case_documents(
    names: Sequence[str],
    keys: Sequence[str],
    seeds: int,
    oracles: Sequence[OracleBound],
    outcomes: Sequence[RunOutcome],
) -> list[BenchmarkDocument]:
    """Each case's benchmark results (rl/evaluation/rows.py) from every task's outcome, in
    task order (case by case, key by key, seed by seed)."""
    per_case = len(keys) * seeds
    if len(outcomes) != per_case * len(names):
        raise ValueError(f"{len(outcomes)} runs for {len(names)} cases × {per_case} tasks")
    documents = []
    for position, (name, oracle) in enumerate(zip(names, oracles, strict=True)):
        runs = outcomes[position * per_case:(position + 1) * per_case]
        documents.append(benchmark_document(assemble(keys, seeds, oracle, runs), {"name": name}))
    return documents


def ablation_document(plan: Mapping[str, Any], outcomes: Sequence[RunOutcome]) -> AblationDocument:
    """The ablation's document from its plan's description (`AblationPlan.describe`) and every
    task's outcome: each row summed over the cases, and every case's results."""
    plan_keys = plan["keys"]
    oracles = [OracleBound(**o) for o in plan["oracles"]]
    documents = case_documents(plan["cases"], plan_keys, plan["seeds"], oracles, outcomes)
    rows = plan["rows"]
    keys = dict(zip([r["label"] for r in rows], plan_keys, strict=True))
    baseline_key, packing_key = resolve(BASELINE), resolve(PACKING)

    def energy(key: str) -> list[float]:
        return [d.policies[key].energy_kwh for d in documents]

    def per_seed(key: str) -> list[float]:
        """Seed by seed, the row's energy summed over the cases (seeds pair across rows)."""
        return [r.energy_kwh for r in seed_runs(key)]

    def seed_runs(key: str) -> list[CasesRun]:
        """Seed by seed, the row's runs over the cases: energy, lost CPU-hours and evictions
        summed, p99 pending time the mean of the cases'."""
        runs = []
        for seed in range(plan["seeds"]):
            cases = [d.policies[key].runs[seed] for d in documents]
            runs.append(CasesRun(
                seed=seed,
                energy_kwh=sum(r.energy_kwh for r in cases),
                lost_cpu_hours=sum(r.lost_cpu_hours for r in cases),
                evictions=sum(r.evictions for r in cases),
                pending_seconds_p99=sum(r.pending_seconds_p99 or 0.0 for r in cases) / len(cases),
            ))
        return runs

    oracle = sum(d.oracle.energy_kwh or 0.0 for d in documents)
    base = energy(baseline_key) if baseline_key in plan_keys else None
    packing = energy(packing_key) if packing_key in plan_keys else None
    table = []
    for row in rows:
        key = keys[row["label"]]
        mine = energy(key)
        total = sum(mine)
        vs_baseline = worst = gap = vs_packing = None
        if base is not None and sum(base) > 0:
            vs_baseline = round(100.0 * (total - sum(base)) / sum(base), 2)
            worst = round(max(100.0 * (m - b) / b for m, b in zip(mine, base, strict=True)), 2)
            if sum(base) > oracle:
                gap = round(100.0 * (sum(base) - total) / (sum(base) - oracle), 2)
        if packing is not None and sum(packing) > 0:
            vs_packing = round(100.0 * (total - sum(packing)) / sum(packing), 2)
        # Paired per seed, 95 % intervals (rl/evaluation/paired.py): issue 33.
        intervals = {
            field: rounded_interval(relative_pct(per_seed(key), per_seed(reference)))
            for field, reference in (("vs_baseline", baseline_key), ("vs_packing", packing_key))
            if reference in plan_keys
        }
        axes = None
        if packing_key in plan_keys:
            found = paired_axes(seed_runs(key), seed_runs(packing_key))
            axes = {axis: rounded_interval(interval) for axis, interval in found.items()}
        table.append(AblationRow(
            label=row["label"],
            entry=row["entry"],
            key=key,
            what=row["what"],
            energy_kwh=round(total, 4),
            vs_baseline_pct=vs_baseline,
            vs_packing_pct=vs_packing,
            gap_closed_pct=gap,
            worst_case_vs_baseline_pct=worst,
            slowdown_mean=_mean([d.policies[key].slowdown_mean for d in documents]),
            evictions=round(sum(d.policies[key].evictions or 0.0 for d in documents), 2),
            never_scheduled=round(sum(d.policies[key].never_scheduled or 0.0 for d in documents), 2),
            vs_baseline_interval_pct=intervals.get("vs_baseline"),
            vs_packing_interval_pct=intervals.get("vs_packing"),
            vs_packing_axes=axes,
        ))
    return AblationDocument(
        source=plan["source"],
        seeds=plan["seeds"],
        cases=len(documents),
        rows=tuple(table),
        oracle_kwh=round(oracle, 4),
        results={d.scenario["name"]: d for d in documents},
    )

def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 3) if present else None


def merged_ablation(plan: dict[str, Any], runs: list[dict[str, Any]]) -> AblationDocument:
    """The ablation's document from the joined runs of its shards (rl/evaluation/shards.py)."""
    from rl.evaluation.benchmark import RunOutcome, RunSummary
    from rl.evaluation.shards import ShardError

    fields = set(RunSummary.__dataclass_fields__)
    try:
        outcomes = [RunOutcome(RunSummary(**{k: v for k, v in r.items() if k in fields}), None)
                    for r in runs]
        return ablation_document(plan, outcomes)
    except (KeyError, TypeError, ValueError) as exc:
        raise ShardError(f"plan or runs: not an ablation shard's: {exc}") from exc
