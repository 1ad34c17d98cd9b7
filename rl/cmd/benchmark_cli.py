"""`kubejoule-rl benchmark`: its options, the cluster they describe (`cluster_model`, the scenario's
defaults filling what they leave out; the ablation builds a scenario's cluster with it too) and
the run: the plan over the policies, expanders and seeds, in `--jobs` processes or as one
`--shard K/N`, written as results JSON (rl/evaluation/results.py) or a shard file. With
`--carbon-intensity-csv` each run's grams of CO2-equivalent too (rl/evaluation/carbon.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from common.carbon_options import add_carbon_arguments, carbon_start, intensity_from_args
from common.options import deprecated_alias
from rl.cmd import cluster_options, on_cluster_cli
from rl.cmd.parallel_options import add_options
from rl.evaluation import shards
from rl.evaluation.benchmark import assemble, plan_benchmark, run_plan, split_pair
from rl.evaluation.carbon import CarbonWindow
from rl.evaluation.parallel import default_jobs
from rl.evaluation.results import benchmark_document, write_results
from rl.policies.catalog import BUILTIN_POLICIES
from rl.simulation.autoscaler.model import DEFAULT_EXPANDER, EXPANDERS
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.simulator import PowerOffModel
from rl.simulation.engine.telemetry import TelemetryModel
from rl.simulation.traces.scenario import (
    DEFAULT_DAEMONSETS_FILE,
    SCENARIOS,
    NodeSpec,
    PodSpec,
    Scenario,
    ScenarioError,
    load_daemonsets,
    load_node_groups,
    load_trace,
    scenario_path,
)
from rl.simulation.traces.seeded_workload import ARRIVAL_JITTER_S
from rl.simulation.traces.trace import parse_window, window_trace
from scheduler.domain.cluster_defaults import BOOT_SECONDS, SCALE_DOWN_UNNEEDED_S, SCAN_INTERVAL_S

# Seeds for the headline's paired 95 % interval against the baseline to be within ±1 %
# (measured: docs/results.md).
DEFAULT_SEEDS = 8


def add_parser(sub: Any) -> None:
    add_arguments(sub.add_parser("benchmark", help="run policies on a cluster and a trace"))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """`kubejoule-rl benchmark ARGV`'s options."""
    parser = argparse.ArgumentParser(prog="kubejoule-rl benchmark")
    add_arguments(parser)
    return parser.parse_args(argv)


def add_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("--scenario", choices=sorted(SCENARIOS), help="a bundled scenario")
    bench.add_argument("--nodes", help="node-groups YAML (overrides the scenario's)")
    bench.add_argument("--trace", help="workload trace CSV (overrides the scenario's)")
    bench.add_argument(
        "--window",
        metavar="[START:]END",
        help="only the trace's pods arriving in this window of hours (from START, default 0), "
        "moved to start at 0; each runs its whole duration (e.g. 4, or 6:10)",
    )
    bench.add_argument(
        "--policies",
        help="comma-separated; POLICY@EXPANDER runs that pair only (default: the scenario's "
        f"policies, else {','.join(BUILTIN_POLICIES)}); also default+extender:W, profile:FILE, "
        "learned:PATH, py:MODULE:ATTR",
    )
    bench.add_argument(
        "--seeds",
        type=int,
        default=DEFAULT_SEEDS,
        help="seeds per policy: each draws its own workload from the trace (arrivals jittered, "
        "run times resampled per workload, the telemetry's phase) and breaks ties; every policy "
        f"runs the same seeds, so they pair (default {DEFAULT_SEEDS})",
    )
    bench.add_argument(
        "--tie-seeds-only",
        action="store_true",
        help="ABLATION, the old behaviour: every seed runs the trace as given and only breaks ties",
    )
    bench.add_argument(
        "--autoscaler",
        action="store_true",
        default=None,
        help="cluster-autoscaler semantics: only powered-on nodes are candidates, Pending pods "
        "make the autoscaler boot nodes, unneeded nodes power off",
    )
    bench.add_argument(
        "--expanders",
        help=f"comma-separated autoscaler expanders, one run each ({', '.join(EXPANDERS)}; "
        f"default {DEFAULT_EXPANDER}, cluster-autoscaler's)",
    )
    bench.add_argument("--scan-interval", type=float, metavar="SECONDS", help=f"autoscaler scan period ({SCAN_INTERVAL_S:g})")
    cluster_options.add_options(bench)
    bench.add_argument(
        "--power-off-visible",
        action="store_true",
        help="ABLATION, the old model: powered-off nodes stay candidates and placing a pod on "
        "one boots it; a node empty for --scale-down-unneeded seconds powers off",
    )
    bench.add_argument(
        "--power-off-after",
        type=float,
        metavar="SECONDS",
        help="the --power-off-visible ablation with this empty time",
    )
    bench.add_argument("--boot-seconds", type=float, help=f"boot time of a powered-off node ({BOOT_SECONDS:g})")
    bench.add_argument(
        "--boot-joules",
        type=float,
        help="energy of one boot (default: boot seconds × the node's full-load watts)",
    )
    bench.add_argument(
        "--daemonsets",
        metavar="FILE",
        help="DaemonSet pods on every powered-on node, YAML (default: the bundled "
        f"{DEFAULT_DAEMONSETS_FILE}: our agent, kube-proxy, a CNI; a file with [] for none)",
    )
    bench.add_argument(
        "--sample-seconds",
        type=float,
        help="policies see the agents' samples taken this often, as of the telemetry store's "
        "last refresh (default 5)",
    )
    bench.add_argument(
        "--refresh-seconds", type=float, help="the telemetry store's refresh period (default 5)"
    )
    bench.add_argument(
        "--telemetry-dropout",
        type=float,
        metavar="P",
        default=0.0,
        help="FAULT MODE: each node's agent is missing for the run with probability P (per "
        "seed), to measure what missing telemetry costs (default 0)",
    )
    bench.add_argument(
        "--perfect-telemetry",
        action="store_true",
        help="ABLATION: policies see every node's instantaneous state",
    )
    bench.add_argument("--out", required=True, help="results JSON path")
    bench.add_argument("--plot", help="PNG path for the power-over-time and energy plots")
    bench.add_argument(
        "--plot-all-timelines",
        action="store_true",
        help="the power-over-time panel shows every policy (default: the baseline, bin packing "
        "and the recommended setup)",
    )
    bench.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    bench.add_argument(
        "--decision-log",
        metavar="FILE",
        help="write every decision and its outcome 60 s later as decision-log JSONL "
        "(feature schema v2; training data for --algo mlp)",
    )
    deprecated_alias(bench, "--collector", "--decision-log")
    add_carbon_arguments(bench, constant=False, start=True)
    add_options(bench)
    on_cluster_cli.add_arguments(bench)


def usage(message: str) -> int:
    print(f"kubejoule-rl: {message}", file=sys.stderr)
    return 2


def cluster_model(args: argparse.Namespace, scenario: Scenario | None) -> ClusterModel:
    """The power regime, DaemonSets and telemetry from the options, the scenario's defaults
    filling what the options leave out. ValueError/ScenarioError/OSError on bad input."""

    def pick(value: Any, field: str, default: Any) -> Any:
        if value is not None:
            return value
        return getattr(scenario, field) if scenario is not None else default

    boot_seconds = pick(args.boot_seconds, "boot_seconds", BOOT_SECONDS)
    boot_joules = pick(args.boot_joules, "boot_joules", None)
    unneeded = pick(args.scale_down_unneeded, "scale_down_unneeded_s", SCALE_DOWN_UNNEEDED_S)
    autoscaler_on = pick(args.autoscaler, "autoscaler", False)
    visible_after = args.power_off_after
    if args.power_off_visible:
        visible_after = unneeded if visible_after is None else visible_after
    if visible_after is None and not autoscaler_on and not args.power_off_visible:
        visible_after = scenario.power_off_after_s if scenario is not None else None
    if visible_after is not None and autoscaler_on and (args.power_off_visible or args.power_off_after is not None):
        autoscaler_on = False  # the ablation asked for explicitly replaces the scenario's autoscaler
    power_off = autoscaler = None
    if autoscaler_on:
        autoscaler = cluster_options.autoscaler_model(
            args, pick(args.scan_interval, "scan_interval_s", SCAN_INTERVAL_S), boot_seconds, boot_joules,
            unneeded,
        )
    elif visible_after is not None:
        power_off = PowerOffModel(visible_after, boot_seconds, boot_joules)
    daemonsets_file = args.daemonsets or str(
        scenario_path(scenario.daemonsets_file if scenario is not None else DEFAULT_DAEMONSETS_FILE)
    )
    telemetry = None
    if not args.perfect_telemetry:
        telemetry = TelemetryModel(
            sample_seconds=5.0 if args.sample_seconds is None else args.sample_seconds,
            refresh_seconds=5.0 if args.refresh_seconds is None else args.refresh_seconds,
        )
    return ClusterModel(
        power_off=power_off,
        autoscaler=autoscaler,
        daemonsets=tuple(load_daemonsets(daemonsets_file)),
        telemetry=telemetry,
        telemetry_dropout=args.telemetry_dropout,
    )


def scenario_setup(
    name: str, nodes: str | None = None, trace: str | None = None, pdbs: str | None = None
) -> tuple[list[NodeSpec], list[PodSpec], ClusterModel]:
    """A bundled scenario's nodes, trace and cluster exactly as `kubejoule-rl benchmark
    --scenario NAME` builds them, the files given replacing its own (`--nodes`, `--trace`,
    `--pdbs`). ValueError for an unknown scenario."""
    scenario = SCENARIOS.get(name)
    if scenario is None:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}")
    argv = ["--scenario", name, "--out", "-"]
    for option, value in (("nodes", nodes), ("trace", trace), ("pdbs", pdbs)):
        if value:
            argv += [f"--{option}", value]
    args = parse_args(argv)
    cluster = cluster_model(args, scenario)
    pods = load_trace(trace or scenario_path(scenario.trace_file))
    node_specs = load_node_groups(nodes or scenario_path(scenario.nodes_file))
    cluster = replace(cluster, workloads=cluster_options.workload_model(args, scenario, pods))
    return node_specs, pods, cluster


def command(args: argparse.Namespace) -> int:
    scenario = SCENARIOS.get(args.scenario) if args.scenario else None
    nodes_file = args.nodes or (str(scenario_path(scenario.nodes_file)) if scenario else None)
    trace_file = args.trace or (str(scenario_path(scenario.trace_file)) if scenario else None)
    if not nodes_file or not trace_file:
        return usage("give --scenario, or both --nodes and --trace")
    given = args.policies
    if given is None:
        given = ",".join(scenario.policies if scenario and scenario.policies else BUILTIN_POLICIES)
    policies = [p.strip() for p in given.split(",") if p.strip()]
    if not policies:
        return usage("--policies is empty")
    expanders = [e.strip() for e in (args.expanders or "").split(",") if e.strip()]
    if args.fidelity_of is not None and (args.on_cluster or args.fidelity):
        return usage("--fidelity-of simulates a saved --on-cluster --fidelity run again: give it without --on-cluster")
    if args.on_cluster and args.ca_bin is None and (args.autoscaler or expanders or any("@" in p for p in policies)):
        return usage(on_cluster_cli.AUTOSCALER_BLOCKED)
    if args.power_off_visible and args.autoscaler:
        return usage("--power-off-visible is an ablation of --autoscaler: give one of them")
    try:
        cluster = cluster_model(args, scenario)
        if args.policies is None and cluster.autoscaler is None:
            # The scenario's list without its expanders: an ablation without the autoscaler.
            policies = list(dict.fromkeys(split_pair(p)[0] for p in policies))
        for expander in expanders:  # (an unknown POLICY@X is an unknown policy)
            if expander not in EXPANDERS:
                return usage(f"unknown expander {expander!r}; known: {', '.join(EXPANDERS)}")
        paired = any(split_pair(p)[1] is not None for p in policies)
        if (expanders or paired) and cluster.autoscaler is None:
            return usage("--expanders (and POLICY@EXPANDER) need --autoscaler")
        if cluster.autoscaler is not None and not expanders and not paired:
            expanders = [cluster.autoscaler.expander]
        nodes = load_node_groups(nodes_file)
        pods = load_trace(trace_file)
        window = parse_window(args.window) if args.window else None
        if window is not None:
            pods = window_trace(pods, *window)
        cluster = replace(cluster, workloads=cluster_options.workload_model(args, scenario, pods))
        intensity = intensity_from_args(args)  # CarbonIntensityError is a ValueError: a usage error
        carbon = CarbonWindow(intensity, carbon_start(args, intensity)) if intensity is not None else None
        plan = plan_benchmark(
            nodes, pods, policies, args.seeds, cluster, expanders, not args.tie_seeds_only, carbon
        )
        for note in plan.notes:
            print(f"kubejoule-rl: note: {note}", file=sys.stderr)
        jobs = args.jobs or (1 if args.decision_log else default_jobs())
        indices = args.shard.indices(len(plan.tasks)) if args.shard is not None else None
        if args.on_cluster:
            on_cluster = on_cluster_cli.run(args, plan, cluster, expanders, policies)
        elif args.fidelity_of is None:
            log = _decision_log(args.decision_log, nodes, cluster)
            try:
                outcomes = run_plan(plan, indices, jobs, not args.no_progress, log)
            finally:
                if log is not None:
                    log.decision_log.close()
    except (ScenarioError, ValueError, OSError) as exc:
        return usage(str(exc))
    power_off, autoscaler = cluster.power_off, cluster.autoscaler
    boot = autoscaler or power_off
    description = {
        "name": scenario.name if scenario else None,
        "nodes_file": nodes_file,
        "trace_file": trace_file,
        "nodes": len(nodes),
        "cpu_cores": sum(n.cpu_cores for n in nodes),
        "pods": len(pods),
        **({"window_hours": list(window)} if window is not None else {}),
        "autoscaler": (
            {
                **cluster_options.describe(autoscaler),
                "expanders": list(
                    dict.fromkeys(e for e in [*expanders, *(split_pair(p)[1] for p in policies)] if e)
                ),
            }
            if autoscaler
            else None
        ),
        "power_off_visible_after_s": power_off.after_seconds if power_off else None,
        "boot_seconds": boot.boot_seconds if boot else None,
        "boot_joules": boot.boot_joules if boot else None,
        "daemonsets": [d.name for d in cluster.daemonsets],
        "telemetry": (
            {
                "sample_seconds": cluster.telemetry.sample_seconds,
                "refresh_seconds": cluster.telemetry.refresh_seconds,
            }
            if cluster.telemetry
            else "perfect"
        ),
        "telemetry_dropout": cluster.telemetry_dropout,
        "seeds_vary": (
            "tie-breaking only (--tie-seeds-only)"
            if args.tie_seeds_only
            else {
                "arrival_jitter_s": ARRIVAL_JITTER_S,
                "durations": "resampled per workload",
                "telemetry_phase": "drawn per seed",
                "notes": list(plan.notes),
            }
        ),
        "workloads": {
            "pdbs_file": cluster_options.pdbs_path(args, scenario),
            "pdbs": len(cluster.workloads.pdbs),
            "pod_startup_s": cluster.workloads.pod_startup_s,
        },
        **({"carbon": carbon.describe()} if carbon is not None else {}),
    }
    if args.on_cluster:
        return on_cluster_cli.write(args, plan, on_cluster, description)
    if args.fidelity_of is not None:
        try:
            saved = on_cluster_cli.load_saved(args.fidelity_of, description)
        except ValueError as exc:
            return usage(str(exc))
        return on_cluster_cli.write_refidelity(args, plan, saved)
    if indices is not None:
        runs = shards.benchmark_runs(indices, outcomes)
        plan_shared = shards.benchmark_plan(plan, description)
        shards.write(
            args.out, shards.shard_document(shards.BENCHMARK_SHARD, args.shard, plan_shared, runs)
        )
        print(f"shard {args.shard}: {len(runs)} of {len(plan.tasks)} runs in {args.out}")
        return 0
    result = assemble(plan.keys, plan.seeds, plan.oracle, outcomes)
    write_results(
        benchmark_document(result, description), args.out, args.plot, result.timelines,
        args.plot_all_timelines,
    )
    return 0


def _decision_log(path: str | None, nodes: Any, cluster: ClusterModel) -> Any:
    if path is None:
        return None
    from rl.learning.sim_decision_log import SimDecisionLog
    from scheduler.decisionlog.logfile import DecisionLog, DecisionLogConfig

    decision_log = DecisionLog(DecisionLogConfig(path, max_candidates=4, max_bytes=2**40))
    return SimDecisionLog(decision_log, nodes, cluster)
