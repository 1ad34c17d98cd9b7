"""`kubejoule-rl`: the cluster energy simulator's command line.

kubejoule-rl benchmark --nodes FILE --trace FILE --policies a,b,... [--seeds N]
                       [--autoscaler [--expanders least-waste,random,...] [--scan-interval S]
                        [cluster-autoscaler's scale-down flags, rl/cmd/cluster_options.py]
                        [--old-autoscaler-defaults] [--pdbs FILE] [--pod-startup-seconds S]]
                       [--power-off-visible | --power-off-after S]
                       [--boot-seconds S] [--boot-joules J] [--daemonsets FILE]
                       [--sample-seconds S | --perfect-telemetry]
                       --out results.json [--plot results.png]
kubejoule-rl benchmark --scenario heterogeneous-autoscaler --out results.json   # the headline
kubejoule-rl benchmark ... --policies default,kubejoule,default+extender:5,profile:FILE,peaks@kubejoule
kubejoule-rl trace --out trace.csv [--pdbs pdbs.yaml] [--family diurnal|batch-services|bursts] [--seed S] ...
kubejoule-rl trace import openb_pod_list_default.csv --out trace.csv [--from-day D --to-day D]
                   [--request-scale F] [--usage-ratio R] [--max-cpu C] [--owner QOS=KIND] ...
kubejoule-rl benchmark|gate ... [--jobs N] [--shard K/N];  kubejoule-rl merge SHARD... --out FILE
kubejoule-rl gate --candidate PATH|POLICY [--baseline kubejoule --baseline mostallocated]
                  --heldout DIR --out gate.json
                  [--report gate.md]
kubejoule-rl train --algo dqn --minutes M --seed S [--steps N] --out models/dqn.pt
kubejoule-rl train --algo mlp --decisions FILE... --out models/mlp.pt
kubejoule-rl ablation (--scenario NAME | --heldout DIR) [--seeds N] [--rows A,B] --out FILE
                      [--report FILE] [--jobs N] [--shard K/N]
kubejoule-rl whatif [--scenario NAME] [--policy P] [--seeds N] --out FILE [--report FILE] [--plot PNG]
kubejoule-rl scenarios
kubejoule-rl cluster up --dir DIR [--nodes FILE] [--scheduler-config FILE] [--metrics-server]
kubejoule-rl cluster down --dir DIR
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from rl.cmd import (
    ablation_cli,
    benchmark_cli,
    cluster_cli,
    gate_cli,
    merge_cli,
    trace_import_cli,
    train_cli,
    whatif_cli,
)
from rl.simulation.traces.scenario import (
    SCENARIOS,
    format_pdbs,
    format_trace,
    load_node_groups,
    load_trace,
    scenario_path,
)
from rl.simulation.traces.tracegen import FAMILIES, TraceConfig, family_pdbs, generate_family


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubejoule-rl", description="Cluster energy simulator and scheduling benchmark."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    benchmark_cli.add_parser(sub)
    trace = sub.add_parser(
        "trace",
        help="generate a synthetic workload trace (CSV); `trace import FILE` imports a "
        "production pod list (see `kubejoule-rl trace import --help`)",
    )
    trace.add_argument("--out", help="CSV path, or - for stdout (required)")
    trace.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    trace.add_argument(
        "--pdbs",
        metavar="FILE",
        help="also write the workloads' PodDisruptionBudgets (YAML; services: max_unavailable 1) "
        "for `benchmark --pdbs`",
    )
    trace.add_argument(
        "--family",
        choices=FAMILIES,
        default="diurnal",
        help="trace family (default diurnal; see rl/simulation/traces/tracegen.py)",
    )
    for f in _trace_options():
        trace.add_argument(
            "--" + f.name.replace("_", "-"),
            type=float,
            default=f.default,
            help=f"{f.metadata['help']} (default {f.default:g})",
        )
    trace_import_cli.add_parser(trace.add_subparsers(dest="trace_command", metavar="import"))

    sub.add_parser("scenarios", help="list the bundled scenarios")
    gate_cli.add_parser(sub)
    ablation_cli.add_parser(sub)
    merge_cli.add_parser(sub)
    whatif_cli.add_parser(sub)
    train_cli.add_parser(sub)
    cluster_cli.add_parser(sub)
    return parser


def _usage(message: str) -> int:
    print(f"kubejoule-rl: {message}", file=sys.stderr)
    return 2


def _trace_options() -> list[Field[Any]]:
    """TraceConfig's numeric fields; the size menus stay as documented in rl/simulation/traces/tracegen.py."""
    return [f for f in fields(TraceConfig) if "help" in f.metadata]


def _trace(args: argparse.Namespace) -> int:
    if args.out is None:
        return _usage("trace: --out is required")
    values = {f.name: getattr(args, f.name) for f in _trace_options()}
    try:
        config = TraceConfig(**values)
    except ValueError as exc:
        print(f"kubejoule-rl: {exc}", file=sys.stderr)
        return 2
    pods = generate_family(args.family, config, args.seed)
    text = format_trace(pods)
    if args.pdbs:
        pdbs = family_pdbs(pods)
        Path(args.pdbs).write_text(format_pdbs(pdbs))
        print(f"wrote {len(pdbs)} PDBs to {args.pdbs}", file=sys.stderr)
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
        if s.autoscaler:
            power = f"autoscaler, scale-down after {s.scale_down_unneeded_s:g} s, boot {s.boot_seconds:g} s"
        elif s.power_off_after_s is not None:
            power = f"visible power-off after {s.power_off_after_s:g} s, boot {s.boot_seconds:g} s"
        else:
            power = "always on"
        size = f"{len(nodes)} nodes, {sum(n.cpu_cores for n in nodes):g} CPUs, {len(pods)} pods"
        print(f"{s.name}: {s.description} [{size}; {s.nodes_file}, {s.trace_file}; {power}]")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "benchmark":
        return benchmark_cli.command(args)
    if args.command == "trace":
        return trace_import_cli.command(args) if args.trace_command == "import" else _trace(args)
    if args.command == "gate":
        return gate_cli.command(args)
    if args.command == "ablation":
        return ablation_cli.command(args)
    if args.command == "merge":
        return merge_cli.command(args)
    if args.command == "whatif":
        return whatif_cli.command(args)
    if args.command == "train":
        return train_cli.command(args)
    if args.command == "cluster":
        return cluster_cli.command(args)
    return _scenarios()


if __name__ == "__main__":
    raise SystemExit(main())
