"""Shards of a benchmark or a gate (`--shard K/N`) and `kubejoule-rl merge`, which joins them.

A shard file holds what every shard shares — the plan: the results keys, seeds and every task
in order, the scenario's description and the oracle bound (benchmark), or the two policies,
the seed, the semantics and the cases (gate) — and its own tasks' results, exactly (JSON floats
round-trip). `merge` checks that the files are the N shards of one plan, each once, and that
every task ran once, then builds the document the unsharded command writes, byte for byte.

    {"schema": "kubejoule.rl-benchmark-shard/v1" | "kubejoule.gate-shard/v1",
     "shard": {"index": K, "count": N}, "plan": {…}, "runs": [{"task": i, …}, …]}
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rl.evaluation.benchmark import BenchmarkPlan, RunOutcome, RunSummary, assemble
from rl.evaluation.oracle import OracleBound
from rl.evaluation.parallel import Shard

BENCHMARK_SHARD = "kubejoule.rl-benchmark-shard/v1"
GATE_SHARD = "kubejoule.gate-shard/v1"
ABLATION_SHARD = "kubejoule.rl-ablation-shard/v1"
SCHEMAS = (BENCHMARK_SHARD, GATE_SHARD, ABLATION_SHARD)


class ShardError(ValueError):
    """Shard files that are not the shards of one run."""


def shard_document(
    schema: str, shard: Shard, plan: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    return {
        "schema": schema,
        "shard": {"index": shard.index, "count": shard.count},
        "plan": dict(plan),
        "runs": [dict(r) for r in runs],
    }


def benchmark_plan(plan: BenchmarkPlan, scenario: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a benchmark every shard shares."""
    return {
        "keys": list(plan.keys),
        "seeds": plan.seeds,
        "tasks": [[t.key, t.seed] for t in plan.tasks],
        "scenario": dict(scenario),
        "oracle": asdict(plan.oracle),
    }


def benchmark_runs(indices: Sequence[int], outcomes: Sequence[RunOutcome]) -> list[dict[str, Any]]:
    """Each task's summary, and seed 0's power timeline (for the plots)."""
    runs = []
    for index, outcome in zip(indices, outcomes, strict=True):
        run: dict[str, Any] = {"task": index, **asdict(outcome.summary)}
        if outcome.timeline is not None:
            run["timeline"] = [list(point) for point in outcome.timeline]
        runs.append(run)
    return runs


def write(path: str, document: Mapping[str, Any]) -> None:
    Path(path).write_text(json.dumps(document, indent=2) + "\n")


# --- reading and joining -------------------------------------------------------------------


def _load(path: str) -> dict[str, Any]:
    try:
        document = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ShardError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ShardError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("schema") not in SCHEMAS:
        raise ShardError(f"{path}: schema: not a shard file ({', '.join(SCHEMAS)})")
    shard = document.get("shard")
    if (
        not isinstance(shard, dict)
        or not isinstance(shard.get("index"), int)
        or not isinstance(shard.get("count"), int)
        or not 0 <= shard["index"] < shard["count"]
    ):
        raise ShardError(f"{path}: shard: expected {{index: K, count: N}} with 0 <= K < N")
    if not isinstance(document.get("plan"), dict) or not isinstance(document.get("runs"), list):
        raise ShardError(f"{path}: plan, runs: missing")
    return document


def join(paths: Sequence[str]) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(schema, plan, runs in task order) of the shard files `paths`. ShardError naming the
    file and the field when they are not every shard of one plan, each once."""
    if not paths:
        raise ShardError("give the shard files")
    documents = [(path, _load(path)) for path in paths]
    first_path, first = documents[0]
    count = first["shard"]["count"]
    seen: dict[int, str] = {}
    for path, document in documents:
        for field in ("schema", "plan"):
            if document[field] != first[field]:
                raise ShardError(f"{path}: {field}: differs from {first_path}'s (another run?)")
        index = document["shard"]["index"]
        if document["shard"]["count"] != count:
            raise ShardError(f"{path}: shard: {index}/{document['shard']['count']}, not of {count}")
        if index in seen:
            raise ShardError(f"{path}: shard: {index}/{count} again (also {seen[index]})")
        seen[index] = path
    missing = sorted(set(range(count)) - set(seen))
    if missing:
        raise ShardError(f"missing shard(s) {', '.join(f'{k}/{count}' for k in missing)}")
    tasks = first["plan"].get("tasks")
    if not isinstance(tasks, list):
        raise ShardError(f"{first_path}: plan.tasks: missing")
    total = len(tasks)
    runs: dict[int, dict[str, Any]] = {}
    for path, document in documents:
        want = Shard(document["shard"]["index"], count).indices(total)
        got = [r.get("task") if isinstance(r, dict) else None for r in document["runs"]]
        if got != want:
            raise ShardError(f"{path}: runs: tasks {got}, expected {want}")
        for run in document["runs"]:
            runs[run["task"]] = run
    return first["schema"], first["plan"], [runs[i] for i in range(total)]


def merged_benchmark(plan: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> Any:
    """The BenchmarkResult of a joined benchmark (without timelines)."""
    summary_fields = set(RunSummary.__dataclass_fields__)
    try:
        outcomes = [
            RunOutcome(
                RunSummary(**{k: v for k, v in r.items() if k in summary_fields}),
                [(t, w) for t, w in r["timeline"]] if "timeline" in r else None,
            )
            for r in runs
        ]
        return assemble(plan["keys"], plan["seeds"], OracleBound(**plan["oracle"]), outcomes)
    except (KeyError, TypeError) as exc:
        raise ShardError(f"plan or runs: not a benchmark shard's: {exc}") from exc


def add_parser(sub: Any) -> None:
    merge = sub.add_parser(
        "merge",
        help="join the shard files of a `benchmark`, `gate` or `ablation` run with --shard",
        description="Writes what the command without --shard writes; exit 2 when the files are "
        "not the N shards of one run.",
    )
    merge.add_argument("shards", nargs="+", metavar="SHARD", help="the N shard files")
    merge.add_argument("--out", required=True, help="results JSON (benchmark, ablation) or gate.json path")
    merge.add_argument("--plot", help="benchmark only: PNG path for the plots")
    merge.add_argument("--report", help="gate or ablation: Markdown path (report, table)")


def command(args: Any) -> int:
    from rl.evaluation.results import results_json, write_results

    try:
        schema, plan, runs = join(args.shards)
        if schema == ABLATION_SHARD:
            from rl.evaluation.ablation import merged_ablation, write_ablation

            if args.plot:
                raise ShardError("--plot: a benchmark's option; these are ablation shards")
            write_ablation(merged_ablation(plan, runs), args.out, args.report)
            return 0
        if schema == BENCHMARK_SHARD:
            if args.report:
                raise ShardError("--report: a gate's option; these are benchmark shards")
            result = merged_benchmark(plan, runs)
            document = results_json(result, plan["scenario"])
        else:
            from rl.evaluation.gate_run import merged_gate

            if args.plot:
                raise ShardError("--plot: a benchmark's option; these are gate shards")
            document = merged_gate(plan, runs)
    except ShardError as exc:
        print(f"kubejoule-rl merge: {exc}", file=sys.stderr)
        return 2
    if schema == BENCHMARK_SHARD:
        write_results(document, args.out, args.plot, result.timelines)
    else:
        from rl.evaluation.gate_run import write_gate

        write_gate(document, args.out, args.report)
    return 0
