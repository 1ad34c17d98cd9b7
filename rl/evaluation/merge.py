"""`kubejoule-rl merge`: joins the shard files of a `benchmark`, `gate` or `ablation` run
(rl/evaluation/shards.py: their format and `join`) and writes what the command without `--shard`
writes, byte for byte. Above the three commands: it builds each one's document with its own code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rl.evaluation.benchmark import BenchmarkResult, RunOutcome, RunSummary, assemble
from rl.evaluation.oracle import OracleBound
from rl.evaluation.shards import ShardError


def merged_benchmark(plan: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> BenchmarkResult:
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
