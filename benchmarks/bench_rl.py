"""`make bench` for the simulator: the headline scenario `heterogeneous-autoscaler`, its policies
(`rl.evaluation.report.HEADLINE_POLICIES`), 3 seeds each drawing its own workload from the trace
(as `kubejoule-rl benchmark` does by default), and the headline's targets.

The cluster is one that can exist: cluster-autoscaler as it ships (powered-off nodes are no
candidates; Pending pods make the autoscaler boot a node group the expander picks; unneeded
nodes, half-empty ones included, are drained through the workloads' PDBs and removed),
DaemonSet pods on every node, telemetry that lags (5 s samples, 5 s store refresh). Targets
(measured, never asserted by a test): `kubejoule@kubejoule` ≥ 25 % less energy than
`default@least-waste` (kube-scheduler and cluster-autoscaler as they ship),
`default+extender:5@kubejoule` ≥ 15 % less, each with mean slowdown ≤ the baseline's + 2 points
and p99 pending ≤ the baseline's + 10 %, no pod left unscheduled, and `kubejoule@kubejoule`
below `mostallocated@least-waste`. The table marks each met or
MISSED; the simulator's speed is given with the load average.

    python benchmarks/bench_rl.py [--seeds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from rl.cmd.benchmark_cli import scenario_setup
from rl.evaluation.benchmark import assemble, plan_benchmark, run_plan
from rl.evaluation.report import (
    HEADLINE_POLICIES,
    HEADLINE_SCENARIO,
    format_table,
    format_targets,
    headline_targets,
)
from rl.evaluation.results import benchmark_document
from rl.evaluation.rows import BenchmarkDocument

SEEDS = 3


def measure(seeds: int = SEEDS) -> dict[str, Any]:
    """The headline runs as the CLI's defaults set them up, the targets and the speed."""
    # The cluster exactly as `kubejoule-rl benchmark --scenario heterogeneous-autoscaler` sets it up.
    nodes, pods, cluster = scenario_setup(HEADLINE_SCENARIO)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    plan = plan_benchmark(nodes, pods, list(HEADLINE_POLICIES), seeds, cluster, vary_workload=True)
    outcomes = run_plan(plan, show_progress=sys.stderr.isatty())
    result = assemble(plan.keys, plan.seeds, plan.oracle, outcomes)
    elapsed = time.monotonic() - started
    document = benchmark_document(result, {"name": HEADLINE_SCENARIO})
    placements = len(pods) * seeds * len(HEADLINE_POLICIES)
    return {
        "document": document,
        "targets": headline_targets(document),
        "nodes": len(nodes),
        "pods": len(pods),
        "seeds": seeds,
        "elapsed_s": elapsed,
        "placements_per_s": placements / elapsed,
        "loadavg": (load_before, os.getloadavg()[0]),
    }


def as_json(measured: dict[str, Any]) -> dict[str, Any]:
    keys = ("energy_kwh", "energy_vs_default_pct", "gap_closed_pct", "slowdown_mean",
            "slowdown_p99", "pending_seconds_mean", "pending_seconds_p99", "boots",
            "scale_ups", "scale_downs", "evictions", "restarted_pods", "lost_cpu_hours",
            "disrupted_workloads", "unschedulable", "never_scheduled")
    document: BenchmarkDocument = measured["document"]
    return {
        "benchmark": "rl",
        "scenario": HEADLINE_SCENARIO,
        "seeds": measured["seeds"],
        "policies": {k: {f: getattr(row, f) for f in keys} for k, row in document.policies.items()},
        "oracle_kwh": document.oracle.energy_kwh,
        "targets": [t.as_json() for t in measured["targets"]],
        "all_targets_met": all(t.met for t in measured["targets"]),
        "elapsed_s": round(measured["elapsed_s"], 2),
        "placements_per_s": round(measured["placements_per_s"], 1),
        "loadavg_1min": [round(v, 2) for v in measured["loadavg"]],
    }


def table(measured: dict[str, Any]) -> str:
    before, after = measured["loadavg"]
    return "\n".join(
        [
            f"Scenario `{HEADLINE_SCENARIO}`: {measured['nodes']} nodes, {measured['pods']} pods, "
            f"{measured['seeds']} seeds per run (means).",
            "",
            format_table(measured["document"]),
            "",
            format_targets(measured["targets"]),
            "",
            f"Simulator speed: {measured['placements_per_s']:,.0f} placements/s "
            f"({measured['elapsed_s']:.1f} s; load average {before:.2f} → {after:.2f}).",
        ]
    )


def main() -> str:
    return table(measure())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    options = parser.parse_args()
    figures = measure(options.seeds)
    print(json.dumps(as_json(figures), indent=2) if options.json else table(figures))
