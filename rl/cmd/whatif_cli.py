"""`kubejoule-rl whatif`: its options and the run (rl/evaluation/whatif.py: the grid, the table,
the plot)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rl.cmd.benchmark_cli import scenario_setup
from rl.cmd.parallel_options import add_options
from rl.evaluation.parallel import default_jobs
from rl.evaluation.whatif import plan_whatif, plot_whatif, run_whatif, whatif_table
from rl.simulation.traces.headline import RECOMMENDED


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    whatif = sub.add_parser(
        "whatif",
        help="cluster-autoscaler's unneeded time × utilization threshold for one setup: energy "
        "against evictions, lost work and pending time",
    )
    whatif.add_argument("--scenario", default="heterogeneous-autoscaler", help="a bundled scenario with the autoscaler")
    whatif.add_argument("--policy", help="the setup (default: the recommended one)")
    whatif.add_argument("--seeds", type=int, default=5, help="seeds per cell, each its own workload (5)")
    whatif.add_argument("--out", required=True, help="what-if JSON path")
    whatif.add_argument("--report", help="Markdown path for the table")
    whatif.add_argument("--plot", help="PNG path for the plot")
    add_options(whatif)


def command(args: argparse.Namespace) -> int:
    if args.shard is not None:
        print("kubejoule-rl whatif: --shard is not supported here", file=sys.stderr)
        return 2
    try:
        if args.seeds < 1:
            raise ValueError(f"--seeds {args.seeds}: the what-if needs at least one seed")
        nodes, pods, cluster = scenario_setup(args.scenario)
        cells = plan_whatif(nodes, pods, cluster, args.policy or RECOMMENDED, args.seeds)
    except ValueError as exc:
        print(f"kubejoule-rl whatif: {exc}", file=sys.stderr)
        return 2
    document = run_whatif(cells, args.jobs or default_jobs())
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    table = whatif_table(document)
    if args.report:
        Path(args.report).write_text(table + "\n")
    if args.plot:
        plot_whatif(document, args.plot)
    print(table)
    return 0
