"""`kubejoule-rl`: the cluster energy simulator's command line.

kubejoule-rl benchmark --nodes FILE --trace FILE --policies a,b,... [--seeds N]
                       [--power-off-after S] [--boot-seconds S] [--boot-joules J]
                       --out results.json [--plot results.png]
kubejoule-rl benchmark --scenario heterogeneous-poweroff --out results.json
kubejoule-rl trace --out trace.csv [--family diurnal|batch-services|bursts] [--hours H] [--seed S] ...
kubejoule-rl gate --candidate PATH|POLICY [--baseline heuristic] --heldout DIR --out gate.json
                  [--report gate.md]
kubejoule-rl scenarios
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from rl import gate_run
from rl.benchmark import format_table, results_json, run_benchmark
from rl.policies import BUILTIN_POLICIES
from rl.scenario import (
    SCENARIOS,
    ScenarioError,
    format_trace,
    load_node_groups,
    load_trace,
    scenario_path,
)
from rl.simulator import PowerOffModel
from rl.tracegen import FAMILIES, TraceConfig, generate_family


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubejoule-rl", description="Cluster energy simulator and scheduling benchmark."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser("benchmark", help="run policies on a cluster and a trace")
    bench.add_argument("--scenario", choices=sorted(SCENARIOS), help="a bundled scenario")
    bench.add_argument("--nodes", help="node-groups YAML (overrides the scenario's)")
    bench.add_argument("--trace", help="workload trace CSV (overrides the scenario's)")
    bench.add_argument(
        "--policies",
        default=",".join(BUILTIN_POLICIES),
        help=f"comma-separated (default: {','.join(BUILTIN_POLICIES)}); py:MODULE:ATTR for a Scorer",
    )
    bench.add_argument("--seeds", type=int, default=3, help="tie-breaking seeds per policy")
    bench.add_argument(
        "--power-off-after",
        type=float,
        metavar="SECONDS",
        help="power a node off after it has been empty this long (default: never)",
    )
    bench.add_argument("--boot-seconds", type=float, help="boot time of a powered-off node (120)")
    bench.add_argument(
        "--boot-joules",
        type=float,
        help="energy of one boot (default: boot seconds × the node's full-load watts)",
    )
    bench.add_argument("--out", required=True, help="results JSON path")
    bench.add_argument("--plot", help="PNG path for the power-over-time and energy plots")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    trace = sub.add_parser("trace", help="generate a synthetic workload trace (CSV)")
    trace.add_argument("--out", required=True, help="CSV path, or - for stdout")
    trace.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    trace.add_argument(
        "--family",
        choices=FAMILIES,
        default="diurnal",
        help="trace family (default diurnal; see rl/tracegen.py)",
    )
    for f in _trace_options():
        trace.add_argument(
            "--" + f.name.replace("_", "-"),
            type=float,
            default=f.default,
            help=f"{f.metadata['help']} (default {f.default:g})",
        )

    sub.add_parser("scenarios", help="list the bundled scenarios")
    gate_run.add_parser(sub)
    return parser


def _benchmark(args: argparse.Namespace) -> int:
    scenario = SCENARIOS.get(args.scenario) if args.scenario else None
    nodes_file = args.nodes or (str(scenario_path(scenario.nodes_file)) if scenario else None)
    trace_file = args.trace or (str(scenario_path(scenario.trace_file)) if scenario else None)
    if not nodes_file or not trace_file:
        print("kubejoule-rl: give --scenario, or both --nodes and --trace", file=sys.stderr)
        return 2
    power_off_after = args.power_off_after
    boot_seconds = args.boot_seconds
    boot_joules = args.boot_joules
    if scenario is not None:
        if power_off_after is None:
            power_off_after = scenario.power_off_after_s
        if boot_seconds is None:
            boot_seconds = scenario.boot_seconds
        if boot_joules is None:
            boot_joules = scenario.boot_joules
    power_off = None
    if power_off_after is not None:
        power_off = PowerOffModel(
            power_off_after, 120.0 if boot_seconds is None else boot_seconds, boot_joules
        )
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        print("kubejoule-rl: --policies is empty", file=sys.stderr)
        return 2
    try:
        nodes = load_node_groups(nodes_file)
        pods = load_trace(trace_file)
        result = run_benchmark(
            nodes, pods, policies, args.seeds, power_off, show_progress=not args.no_progress
        )
    except (ScenarioError, ValueError, OSError) as exc:
        print(f"kubejoule-rl: {exc}", file=sys.stderr)
        return 2
    description = {
        "name": scenario.name if scenario else None,
        "nodes_file": nodes_file,
        "trace_file": trace_file,
        "nodes": len(nodes),
        "cpu_cores": sum(n.cpu_cores for n in nodes),
        "pods": len(pods),
        "power_off_after_s": power_off.after_seconds if power_off else None,
        "boot_seconds": power_off.boot_seconds if power_off else None,
        "boot_joules": power_off.boot_joules if power_off else None,
    }
    document = results_json(result, description)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    if args.plot:
        from rl.plots import plot_benchmark

        plot_benchmark(document, result.timelines, args.plot)
    print(format_table(document))
    return 0


def _trace_options() -> list[Field[Any]]:
    """TraceConfig's numeric fields; the size menus stay as documented in rl/tracegen.py."""
    return [f for f in fields(TraceConfig) if "help" in f.metadata]


def _trace(args: argparse.Namespace) -> int:
    values = {f.name: getattr(args, f.name) for f in _trace_options()}
    try:
        config = TraceConfig(**values)
    except ValueError as exc:
        print(f"kubejoule-rl: {exc}", file=sys.stderr)
        return 2
    text = format_trace(generate_family(args.family, config, args.seed))
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {text.count(chr(10)) - 1} pods to {args.out}", file=sys.stderr)
    return 0


def _scenarios() -> int:
    for s in SCENARIOS.values():
        nodes = load_node_groups(scenario_path(s.nodes_file))
        pods = load_trace(scenario_path(s.trace_file))
        power = (
            f"power-off after {s.power_off_after_s:g} s, boot {s.boot_seconds:g} s"
            if s.power_off_after_s is not None
            else "always on"
        )
        size = f"{len(nodes)} nodes, {sum(n.cpu_cores for n in nodes):g} CPUs, {len(pods)} pods"
        print(f"{s.name}: {s.description} [{size}; {s.nodes_file}, {s.trace_file}; {power}]")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "benchmark":
        return _benchmark(args)
    if args.command == "trace":
        return _trace(args)
    if args.command == "gate":
        return gate_run.command(args)
    return _scenarios()


if __name__ == "__main__":
    raise SystemExit(main())
