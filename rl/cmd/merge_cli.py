"""`kubejoule-rl merge`: its options and the command (joining the shards: rl/evaluation/merge.py, rl/evaluation/shards.py)."""

from __future__ import annotations

import argparse
import sys

from rl.evaluation.ablation import merged_ablation
from rl.evaluation.ablation_report import write_ablation
from rl.evaluation.gate_run import merged_gate, write_gate
from rl.evaluation.merge import merged_benchmark
from rl.evaluation.results import results_json, write_results
from rl.evaluation.shards import ABLATION_SHARD, BENCHMARK_SHARD, ShardError, join


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def command(args: argparse.Namespace) -> int:
    try:
        schema, plan, runs = join(args.shards)
        if schema == ABLATION_SHARD:
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
            if args.plot:
                raise ShardError("--plot: a benchmark's option; these are gate shards")
            document = merged_gate(plan, runs)
    except ShardError as exc:
        print(f"kubejoule-rl merge: {exc}", file=sys.stderr)
        return 2
    if schema == BENCHMARK_SHARD:
        write_results(document, args.out, args.plot, result.timelines)
    else:
        write_gate(document, args.out, args.report)
    return 0
