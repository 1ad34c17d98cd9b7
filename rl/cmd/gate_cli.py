"""`kubejoule-rl gate`: its options and the command (the gate itself: rl/evaluation/gate_run.py)."""

from __future__ import annotations

import argparse

from rl.cmd.parallel_options import add_options
from rl.evaluation.gate_run import (
    DEFAULT_BASELINES,
    DEFAULT_BOOT_SECONDS,
    DEFAULT_SCALE_DOWN_UNNEEDED_S,
    GatePlan,
    candidate_policy,
    gate_cluster,
    load_cases,
    plan_description,
    run_gate,
    run_side,
    write_gate,
)
from rl.evaluation.parallel import run_tasks
from rl.simulation.traces.scenario import (
    ScenarioError,
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gate = sub.add_parser(
        "gate",
        help="promotion gate: a candidate against the baselines on held-out cases",
        description="Exit 0 with a verdict (promote or refuse) in --out; 2 for bad input.",
    )
    gate.add_argument("--candidate", required=True, help="model checkpoint (PATH) or policy name")
    gate.add_argument(
        "--baseline",
        action="append",
        help="a baseline policy; repeat for several, the candidate must pass against each "
        f"(default: {' and '.join(DEFAULT_BASELINES)}: the shipped default profile and bin "
        "packing)",
    )
    gate.add_argument(
        "--heldout", required=True, help="directory of case folders (nodes.yaml, trace.csv)"
    )
    gate.add_argument("--out", required=True, help="gate.json path")
    gate.add_argument("--report", help="gate.md path (Markdown report)")
    gate.add_argument("--seed", type=int, default=0, help="tie-breaking seed for both sides (0)")
    gate.add_argument(
        "--scale-down-unneeded",
        type=float,
        default=DEFAULT_SCALE_DOWN_UNNEEDED_S,
        help="autoscaler: power a node off after it is unneeded this long "
        f"(default {DEFAULT_SCALE_DOWN_UNNEEDED_S:g} s)",
    )
    gate.add_argument(
        "--boot-seconds",
        type=float,
        default=DEFAULT_BOOT_SECONDS,
        help=f"boot time of a powered-off node (default {DEFAULT_BOOT_SECONDS:g} s)",
    )
    gate.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_options(gate)


def command(args: argparse.Namespace) -> int:
    import sys
    from dataclasses import asdict

    from rl.evaluation import shards
    from rl.evaluation.parallel import default_jobs
    from rl.evaluation.progress import ProgressBar
    from rl.policies.catalog import make_policy

    candidate = candidate_policy(args.candidate)
    baselines = tuple(dict.fromkeys(args.baseline or DEFAULT_BASELINES))
    try:
        cluster = gate_cluster((), args.scale_down_unneeded, args.boot_seconds)
        cases = load_cases(args.heldout)
        for policy in (candidate, *baselines):  # refuse a bad name before any simulation
            make_policy(policy, cases[0].nodes, cluster.policy_power_off())
        plan = GatePlan(
            candidate, baselines, tuple(cases), args.scale_down_unneeded, args.boot_seconds,
            args.seed,
        )
        description = plan_description(plan, str(args.heldout))
        jobs = args.jobs or default_jobs()
        if args.shard is not None:
            indices = args.shard.indices(len(plan.tasks))
            tasks = [plan.tasks[i] for i in indices]
            bar = None if args.no_progress else ProgressBar(len(tasks), f"gate {args.shard}")
            sides = run_tasks(
                run_side, plan, tasks, jobs,
                lambda position, side: bar.advance(1) if bar is not None else None,
            )
            if bar is not None:
                bar.close()
            runs = [{"task": i, **asdict(side)} for i, side in zip(indices, sides, strict=True)]
            shards.write(
                args.out, shards.shard_document(shards.GATE_SHARD, args.shard, description, runs)
            )
            print(f"shard {args.shard}: {len(runs)} of {len(plan.tasks)} runs in {args.out}")
            return 0
        bar = None if args.no_progress else ProgressBar(len(plan.tasks), "gate")
        document = run_gate(
            plan,
            str(args.heldout),
            jobs,
            progress=(lambda name: bar.advance(1, name)) if bar is not None else None,
        )
        if bar is not None:
            bar.close()
    except (ScenarioError, ValueError, OSError) as exc:
        print(f"kubejoule-rl gate: {exc}", file=sys.stderr)
        return 2
    write_gate(document, args.out, args.report)
    return 0
