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

The table (`ablation_table`), per row: energy (kWh; a case's is its mean over seeds, summed over
cases), against the baseline `default@least-waste` and against bin packing with our expander
`mostallocated@kubejoule` (relative difference of the sums), the share of the oracle gap closed
(`(E_base − E) / (E_base − E_oracle)` over the sums), the worst case against the baseline (held
out), mean slowdown (the mean of the cases' means), evictions and pods never scheduled (sums).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rl.evaluation.benchmark import (
    BenchmarkPlan,
    RunOutcome,
    assemble,
    plan_benchmark,
    run_task,
)
from rl.evaluation.oracle import OracleBound
from rl.evaluation.parallel import run_tasks
from rl.evaluation.results import results_json
from rl.simulation.cluster import ClusterModel
from rl.simulation.scenario import NodeSpec, PodSpec, scenario_path

SCHEMA = "kubejoule.rl-ablation/v1"
BASELINE = "default@least-waste"
PACKING = "mostallocated@kubejoule"
OPERATORS = "mostallocated+highnodeutilization@least-waste"
# Issue 23's targets, for the recommended setups (`ablation_targets`).
RECOMMENDED = ("kubejoule@kubejoule", "kubejoule+rebalancer@kubejoule")
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

    def describe(self, source: Mapping[str, Any]) -> dict[str, Any]:
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


def plan_ablation(cases: Sequence[Case], rows: Sequence[Row] = ROWS, seeds: int = 3) -> AblationPlan:
    """Every row on every case with `seeds` seeds; ValueError (a bad row, say) before any
    simulation."""
    if not cases:
        raise ValueError("no cases to run")
    labels = [r.label for r in rows]
    if len(set(labels)) != len(labels):
        raise ValueError("row labels must be unique")
    entries = [resolve(r.entry) for r in rows]
    plans = tuple(
        plan_benchmark(case.nodes, case.pods, entries, seeds, case.cluster) for case in cases
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


def case_documents(
    names: Sequence[str],
    keys: Sequence[str],
    seeds: int,
    oracles: Sequence[OracleBound],
    outcomes: Sequence[RunOutcome],
) -> list[dict[str, Any]]:
    """Each case's benchmark results document (rl/evaluation/results.py) from every task's outcome, in
    task order (case by case, key by key, seed by seed)."""
    per_case = len(keys) * seeds
    if len(outcomes) != per_case * len(names):
        raise ValueError(f"{len(outcomes)} runs for {len(names)} cases × {per_case} tasks")
    documents = []
    for position, (name, oracle) in enumerate(zip(names, oracles, strict=True)):
        runs = outcomes[position * per_case:(position + 1) * per_case]
        documents.append(results_json(assemble(keys, seeds, oracle, runs), {"name": name}))
    return documents


def ablation_document(plan: Mapping[str, Any], outcomes: Sequence[RunOutcome]) -> dict[str, Any]:
    """The ablation's document from its plan's description (`AblationPlan.describe`) and every
    task's outcome: each row summed over the cases, and every case's results."""
    plan_keys = plan["keys"]
    oracles = [OracleBound(**o) for o in plan["oracles"]]
    documents = case_documents(plan["cases"], plan_keys, plan["seeds"], oracles, outcomes)
    rows = plan["rows"]
    keys = dict(zip([r["label"] for r in rows], plan_keys, strict=True))
    baseline_key, packing_key = resolve(BASELINE), resolve(PACKING)

    def energy(key: str) -> list[float]:
        return [d["policies"][key]["energy_kwh"] for d in documents]

    oracle = sum(d["oracle"]["energy_kwh"] for d in documents)
    base = energy(baseline_key) if baseline_key in plan_keys else None
    packing = energy(packing_key) if packing_key in plan_keys else None
    table = []
    for row in rows:
        key = keys[row["label"]]
        mine = energy(key)
        total = sum(mine)
        entry: dict[str, Any] = {
            "label": row["label"],
            "entry": row["entry"],
            "key": key,  # its runs' key in each case's results
            "what": row["what"],
            "energy_kwh": round(total, 4),
            "vs_baseline_pct": None,
            "vs_packing_pct": None,
            "gap_closed_pct": None,
            "worst_case_vs_baseline_pct": None,
            "slowdown_mean": _mean([d["policies"][key]["slowdown_mean"] for d in documents]),
            "evictions": round(sum(d["policies"][key]["evictions"] for d in documents), 2),
            "never_scheduled": round(sum(d["policies"][key]["never_scheduled"] for d in documents), 2),
        }
        if base is not None and sum(base) > 0:
            entry["vs_baseline_pct"] = round(100.0 * (total - sum(base)) / sum(base), 2)
            entry["worst_case_vs_baseline_pct"] = round(
                max(100.0 * (m - b) / b for m, b in zip(mine, base, strict=True)), 2
            )
            if sum(base) > oracle:
                entry["gap_closed_pct"] = round(100.0 * (sum(base) - total) / (sum(base) - oracle), 2)
        if packing is not None and sum(packing) > 0:
            entry["vs_packing_pct"] = round(100.0 * (total - sum(packing)) / sum(packing), 2)
        table.append(entry)
    return {
        "schema": SCHEMA,
        "source": plan["source"],
        "seeds": plan["seeds"],
        "cases": len(documents),
        "rows": table,
        "oracle_kwh": round(oracle, 4),
        "results": {d["scenario"]["name"]: d for d in documents},
    }


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 3) if present else None


def _cell(value: Any, fmt: str, suffix: str = "") -> str:
    return "—" if value is None else format(value, fmt) + suffix


def ablation_table(document: Mapping[str, Any]) -> str:
    """The Markdown table of an ablation document (rows in order, then the oracle bound)."""
    lines = [
        "| row | entry | energy kWh | vs baseline | vs bin packing | gap closed "
        "| worst case vs baseline | slowdown mean % | evictions | never scheduled |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in document["rows"]:
        entry = row["entry"].replace("{profiles}/", "")
        lines.append(
            f"| {row['label']} | `{entry}` | {row['energy_kwh']:.2f} "
            f"| {_cell(row['vs_baseline_pct'], '+.1f', ' %')} "
            f"| {_cell(row['vs_packing_pct'], '+.1f', ' %')} "
            f"| {_cell(row['gap_closed_pct'], '.1f', ' %')} "
            f"| {_cell(row['worst_case_vs_baseline_pct'], '+.1f', ' %')} "
            f"| {_cell(row['slowdown_mean'], '.2f')} | {row['evictions']:g} "
            f"| {row['never_scheduled']:g} |"
        )
    lines.append(f"| oracle bound | | {document['oracle_kwh']:.2f} | | | 100 % | | | | |")
    return "\n".join(lines)


def ablation_targets(document: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """Issue 23's targets for each recommended setup the ablation ran, as (target, measured,
    met): ≥ 25 % less energy than the baseline and ≥ 5 % less than both bin-packing setups,
    mean slowdown ≤ the baseline's + 2 points, no more evictions than the baseline's, no pod
    never scheduled. Empty without the baseline."""
    rows = {r["entry"]: r for r in document["rows"]}
    base = rows.get(BASELINE)
    if base is None:
        return []
    targets = []
    for entry in RECOMMENDED:
        row = rows.get(entry)
        if row is None:
            continue
        less = -row["vs_baseline_pct"]
        targets.append((
            f"{entry} ≥ {SAVING_VS_BASELINE_PCT:g} % less energy than {BASELINE}",
            f"{_less(less)} ({row['energy_kwh']:.2f} vs {base['energy_kwh']:.2f} kWh)",
            less >= SAVING_VS_BASELINE_PCT,
        ))
        for peer in (PACKING, OPERATORS):
            other = rows.get(peer)
            if other is None:
                continue
            saving = 100.0 * (other["energy_kwh"] - row["energy_kwh"]) / other["energy_kwh"]
            targets.append((
                f"{entry} ≥ {SAVING_VS_PACKING_PCT:g} % less energy than {peer}",
                f"{_less(saving)} ({row['energy_kwh']:.2f} vs {other['energy_kwh']:.2f} kWh)",
                saving >= SAVING_VS_PACKING_PCT,
            ))
        if row["slowdown_mean"] is not None and base["slowdown_mean"] is not None:
            margin = row["slowdown_mean"] - base["slowdown_mean"]
            targets.append((
                f"{entry} mean slowdown ≤ {BASELINE}'s + {SLOWDOWN_MARGIN_POINTS:g} points",
                f"{row['slowdown_mean']:.2f} % vs {base['slowdown_mean']:.2f} % ({margin:+.2f} points)",
                margin <= SLOWDOWN_MARGIN_POINTS + 1e-9,
            ))
        targets.append((
            f"{entry} evictions ≤ {BASELINE}'s (cluster-autoscaler alone)",
            f"{row['evictions']:g} vs {base['evictions']:g}",
            row["evictions"] <= base["evictions"],
        ))
        targets.append((
            f"{entry} pods never scheduled: none",
            f"{row['never_scheduled']:g}",
            row["never_scheduled"] == 0,
        ))
    return targets


def _less(pct: float) -> str:
    """A saving as "N % less", a loss as "N % more"."""
    return f"{abs(pct):.1f} % {'less' if pct >= 0 else 'more'}"


def targets_table(targets: Sequence[tuple[str, str, bool]]) -> str:
    lines = ["| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {'met' if ok else 'MISSED'} |" for t, m, ok in targets]
    return "\n".join(lines)


def write_ablation(document: dict[str, Any], out: str, report: str | None) -> None:
    """The ablation's JSON to `out`, its table (and targets) to `report` and stdout."""
    Path(out).write_text(json.dumps(document, indent=2) + "\n")
    table = ablation_table(document)
    targets = ablation_targets(document)
    if targets:
        table += "\n\n" + targets_table(targets)
    if report:
        Path(report).write_text(table + "\n")
    print(table)


def merged_ablation(plan: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
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
