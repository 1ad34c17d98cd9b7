"""`kubejoule-rl ablation`: the ablation table (rl/evaluation/ablation.py) on a scenario or a held-out
directory, in `--jobs` processes or as one `--shard K/N` whose files `kubejoule-rl merge` joins.

    kubejoule-rl ablation --scenario heterogeneous-autoscaler --seeds 3 --out ablation.json
    kubejoule-rl ablation --heldout rl/heldout --seeds 1 --out heldout.json --report heldout.md

A scenario's cluster is what `kubejoule-rl benchmark --scenario NAME` runs (its autoscaler at
cluster-autoscaler's shipped defaults, DaemonSets, PDBs, lagging telemetry; `--nodes`,
`--trace`, `--pdbs` override its files as they do there); a held-out case's is the promotion
gate's. Exit 2 with the reason on bad input.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from rl.cmd.benchmark_cli import scenario_setup
from rl.cmd.parallel_options import add_options
from rl.evaluation.ablation import (
    ROWS,
    AblationPlan,
    Case,
    Row,
    ablation_document,
    plan_ablation,
)
from rl.evaluation.ablation_report import write_ablation
from rl.evaluation.benchmark import RunOutcome


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "ablation",
        help="each lever alone and together, beside the baseline, bin packing, hindsight and "
        "the oracle bound, on a scenario or on every held-out case",
        description="Writes the ablation's JSON (--out) and its Markdown table (stdout, and "
        "--report); exit 2 on bad input.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--scenario", help="a bundled scenario (the headline: heterogeneous-autoscaler)")
    where.add_argument("--heldout", metavar="DIR", help="every case folder of DIR (rl/heldout)")
    parser.add_argument("--nodes", help="with --scenario: node-groups YAML instead of its own")
    parser.add_argument("--trace", help="with --scenario: trace CSV instead of its own")
    parser.add_argument("--pdbs", help="with --scenario: PodDisruptionBudgets YAML instead of its own")
    parser.add_argument(
        "--seeds",
        type=int,
        default=3,
        help="seeds per row and case, each its own workload drawn from the trace (3)",
    )
    parser.add_argument(
        "--tie-seeds-only",
        action="store_true",
        help="ABLATION, the old behaviour: every seed runs the trace as given, breaking ties only",
    )
    parser.add_argument(
        "--rows",
        help="comma-separated row labels to run (default every row: "
        + ", ".join(r.label for r in ROWS) + ")",
    )
    parser.add_argument("--out", required=True, help="ablation JSON path (a shard file with --shard)")
    parser.add_argument("--report", help="Markdown path for the table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_options(parser)


def scenario_case(args: argparse.Namespace) -> Case:
    """The scenario's cluster exactly as `kubejoule-rl benchmark` builds it."""
    nodes, pods, cluster = scenario_setup(args.scenario, args.nodes, args.trace, args.pdbs)
    return Case(args.scenario, tuple(nodes), tuple(pods), cluster)


def heldout_cases(directory: str) -> list[Case]:
    """Every held-out case under the promotion gate's cluster rules."""
    from rl.evaluation.gate_run import gate_cluster, load_cases

    return [
        Case(c.name, tuple(c.nodes), tuple(c.pods), gate_cluster(c.daemonsets, pdbs=c.pdbs))
        for c in load_cases(directory)
    ]


def _rows(text: str | None) -> tuple[Row, ...]:
    if text is None:
        return ROWS
    by_label = {r.label: r for r in ROWS}
    labels = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [label for label in labels if label not in by_label]
    if unknown or not labels:
        raise ValueError(
            f"--rows: unknown row(s) {', '.join(unknown) or '(none given)'}; known: "
            + ", ".join(by_label)
        )
    return tuple(by_label[label] for label in labels)


def _source(args: argparse.Namespace) -> dict[str, object]:
    if args.heldout:
        return {"heldout": str(args.heldout)}
    return {"scenario": args.scenario, "nodes": args.nodes, "trace": args.trace, "pdbs": args.pdbs}


def build_plan(args: argparse.Namespace) -> AblationPlan:
    if args.seeds < 1:
        raise ValueError("--seeds must be at least 1")
    if args.heldout and (args.nodes or args.trace or args.pdbs):
        raise ValueError("--nodes, --trace and --pdbs go with --scenario, not --heldout")
    cases = heldout_cases(args.heldout) if args.heldout else [scenario_case(args)]
    return plan_ablation(cases, _rows(args.rows), args.seeds, not args.tie_seeds_only)


def command(args: argparse.Namespace) -> int:
    from rl.evaluation import shards
    from rl.evaluation.parallel import default_jobs
    from rl.evaluation.progress import ProgressBar
    from rl.simulation.traces.scenario import ScenarioError

    try:
        plan = build_plan(args)
        description = plan.describe(_source(args))
        tasks = plan.tasks
        indices = args.shard.indices(len(tasks)) if args.shard is not None else list(range(len(tasks)))
        bar = None if args.no_progress else ProgressBar(len(indices), "ablation")
        names = description["tasks"]

        def done(position: int, outcome: RunOutcome) -> None:
            if bar is not None:
                case, key, seed = names[indices[position]]
                bar.advance(1, f"{case}: {key} seed {seed}")

        from rl.evaluation.ablation import run_ablation

        outcomes = run_ablation(plan, indices, args.jobs or default_jobs(), done)
        if bar is not None:
            bar.close()
        if args.shard is not None:
            runs = [{"task": i, **asdict(o.summary)} for i, o in zip(indices, outcomes, strict=True)]
            shards.write(args.out, shards.shard_document(shards.ABLATION_SHARD, args.shard, description, runs))
            print(f"shard {args.shard}: {len(runs)} of {len(tasks)} runs in {args.out}")
            return 0
        document = ablation_document(description, outcomes)
    except (ScenarioError, ValueError, OSError) as exc:
        print(f"kubejoule-rl ablation: {exc}", file=sys.stderr)
        return 2
    write_ablation(document, args.out, args.report)
    return 0
