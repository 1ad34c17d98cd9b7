"""Shards of a benchmark or a gate (`--shard K/N`) and `kubejoule-rl merge`, which joins them.

A shard file holds what every shard shares — the plan: the results keys, seeds and every task
in order, the scenario's description and the oracle bound (benchmark), or the two policies,
the seed, the semantics and the cases (gate) — and its own tasks' results, exactly (JSON floats
round-trip). `merge` checks that the files are the N shards of one plan, each once, and that
every task ran once (`join` here), then builds the document the unsharded command writes, byte
for byte (rl/evaluation/merge.py).

    {"schema": "kubejoule.rl-benchmark-shard/v1" | "kubejoule.gate-shard/v1",
     "shard": {"index": K, "count": N}, "plan": {…}, "runs": [{"task": i, …}, …]}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rl.evaluation.benchmark import BenchmarkPlan, RunOutcome
from rl.evaluation.parallel import Shard

BENCHMARK_SHARD = "kubejoule.rl-benchmark-shard/v1"
GATE_SHARD = "kubejoule.gate-shard/v1"
ABLATION_SHARD = "kubejoule.rl-ablation-shard/v1"
SCHEMAS = (BENCHMARK_SHARD, GATE_SHARD, ABLATION_SHARD)


class ShardError(ValueError):
    """Shard files that are not the shards of one run."""


def shard_document(
    schema: str, shard: Shard, plan: Mapping[str, object], runs: Sequence[Mapping[str, object]]
) -> dict[str, Any]:
    return {
        "schema": schema,
        "shard": {"index": shard.index, "count": shard.count},
        "plan": dict(plan),
        "runs": [dict(r) for r in runs],
    }


def benchmark_plan(plan: BenchmarkPlan, scenario: Mapping[str, object]) -> dict[str, Any]:
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


def write(path: str, document: Mapping[str, object]) -> None:
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

