"""`kubejoule-rl benchmark`'s cluster-autoscaler and workload options: each of cluster-autoscaler's
settings the simulator models, with its shipped default (rl/simulation/autoscaler/scan.py, rl/simulation/autoscaler/scaledown.py), the
ablation of the old defaults, and the trace's PodDisruptionBudgets and pod startup time."""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from typing import Any

from rl.simulation.autoscaler.model import AutoscalerModel, old_defaults
from rl.simulation.engine.workloads import DEFAULT_POD_STARTUP_S, WorkloadModel
from rl.simulation.traces.scenario import Scenario, load_pdbs, scenario_path
from rl.simulation.traces.trace import PodSpec

SHIPPED = AutoscalerModel()

# (option, AutoscalerModel field, type, help) — the defaults are SHIPPED's.
_SETTINGS: tuple[tuple[str, str, type, str], ...] = (
    ("--scale-down-delay-after-add", "delay_after_add_s", float,
     "no scale-down for this long after a scale-up (s)"),
    ("--scale-down-delay-after-delete", "delay_after_delete_s", float,
     "no scale-down for this long after a node deletion started (s)"),
    ("--scale-down-delay-after-failure", "delay_after_failure_s", float,
     "no scale-down for this long after a failed one (s)"),
    ("--max-scale-down-parallelism", "max_scale_down_parallelism", int,
     "most node deletions (empty and drained) in progress at once"),
    ("--max-drain-parallelism", "max_drain_parallelism", int,
     "most non-empty nodes drained at once"),
    ("--max-pod-eviction-time", "max_pod_eviction_s", float,
     "how long a drain retries a refused eviction before it fails (s)"),
    ("--unremovable-node-recheck-timeout", "unremovable_recheck_s", float,
     "a node found unremovable (a PDB without room, pods with nowhere to go) is not "
     "considered again for this long (s)"),
    ("--max-bulk-soft-taint-count", "max_bulk_soft_taint_count", int,
     "most nodes a loop soft-taints as unneeded (DeletionCandidateOfClusterAutoscaler, "
     "PreferNoSchedule: the scheduler places pods elsewhere) or untaints; 0: none"),
)


def _threshold(text: str) -> float | None:
    """A utilization threshold: a number (AutoscalerModel checks its range) or "off"."""
    if text.strip().lower() == "off":
        return None
    try:
        return float(text)
    except ValueError as exc:
        raise ValueError(f"--scale-down-utilization-threshold: not a number or off: {text!r}") from exc


def _boolean(text: str) -> bool:
    """A flag's true or false, as cluster-autoscaler's flags take them."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"not true or false: {text!r}")
    return value == "true"


def add_options(bench: argparse.ArgumentParser) -> None:
    """cluster-autoscaler's settings and the workload options, on the benchmark's parser."""
    bench.add_argument(
        "--scale-down-unneeded", "--scale-down-unneeded-time",
        dest="scale_down_unneeded", type=float, metavar="SECONDS",
        help=f"a node unneeded this long is removed ({SHIPPED.scale_down_unneeded_s:g})",
    )
    bench.add_argument(
        "--scale-down-utilization-threshold", metavar="FRACTION",
        help="a node whose larger of CPU and memory requests over allocatable is at or below "
        f"this is unneeded if its pods can move ({SHIPPED.utilization_threshold:g}; off: only "
        "empty nodes)",
    )
    bench.add_argument(
        "--ignore-daemonsets-utilization", action="store_true", default=None,
        help="leave DaemonSet pods out of that utilization (default: counted)",
    )
    for option, name, kind, text in _SETTINGS:
        bench.add_argument(
            option, dest=name, type=kind, metavar="N" if kind is int else "SECONDS",
            help=f"{text} ({getattr(SHIPPED, name):g})",
        )
    bench.add_argument(
        "--frequent-loops-enabled", type=_boolean, metavar="true|false",
        help="a loop at once after a scale-up or scale-down and when a pod turns unschedulable, "
        "else one every --scan-interval (true, as cluster-autoscaler ships; false in "
        "--old-autoscaler-defaults)",
    )
    bench.add_argument(
        "--old-autoscaler-defaults", action="store_true",
        help="ABLATION: cluster-autoscaler as this project first modelled it — random "
        "expander, only empty nodes scaled down, no scale-down cool-downs, a loop every scan "
        "interval only, no soft taint on unneeded nodes (options above still override)",
    )
    bench.add_argument(
        "--pdbs", metavar="FILE",
        help="PodDisruptionBudgets, YAML list of {workload, max_unavailable | min_available} "
        "(default: the scenario's, for its own trace)",
    )
    bench.add_argument(
        "--pod-startup-seconds", type=float, metavar="SECONDS",
        help=f"an evicted pod's replacement: from placement to Ready ({DEFAULT_POD_STARTUP_S:g})",
    )


def autoscaler_model(
    args: argparse.Namespace, scan_interval_s: float, boot_seconds: float,
    boot_joules: float | None, unneeded_s: float,
) -> AutoscalerModel:
    """The shipped defaults (or the old ones), with every option given on top.
    ValueError on a bad combination."""
    base = AutoscalerModel(
        scan_interval_s=scan_interval_s, boot_seconds=boot_seconds, boot_joules=boot_joules,
        scale_down_unneeded_s=unneeded_s,
    )
    if args.old_autoscaler_defaults:
        base = old_defaults(base)
    given: dict[str, Any] = {
        name: getattr(args, name) for _, name, _, _ in _SETTINGS if getattr(args, name) is not None
    }
    if args.scale_down_utilization_threshold is not None:
        given["utilization_threshold"] = _threshold(args.scale_down_utilization_threshold)
    if args.ignore_daemonsets_utilization:
        given["ignore_daemonsets_utilization"] = True
    if args.frequent_loops_enabled is not None:
        given["frequent_loops_enabled"] = args.frequent_loops_enabled
    return replace(base, **given)


def pdbs_path(args: argparse.Namespace, scenario: Scenario | None) -> str | None:
    """--pdbs, else the scenario's PDB file when its own trace runs."""
    if args.pdbs is not None:
        return str(args.pdbs)
    if scenario is not None and scenario.pdbs_file and args.trace is None:
        return str(scenario_path(scenario.pdbs_file))
    return None


def workload_model(
    args: argparse.Namespace, scenario: Scenario | None, pods: list[PodSpec]
) -> WorkloadModel:
    """The PDBs (`pdbs_path`) and the pod startup time; ScenarioError on a bad PDB file,
    ValueError on a bad startup time."""
    path = pdbs_path(args, scenario)
    pdbs = load_pdbs(path, pods) if path else ()
    startup = DEFAULT_POD_STARTUP_S if args.pod_startup_seconds is None else args.pod_startup_seconds
    return WorkloadModel(pdbs, startup)


def describe(model: AutoscalerModel) -> dict[str, Any]:
    """The autoscaler's settings for the results document's scenario block (its expanders are
    listed by the caller)."""
    settings = asdict(model)
    del settings["expander"], settings["boot_seconds"], settings["boot_joules"]
    settings["scale_down_utilization_threshold"] = settings.pop("utilization_threshold")
    return settings
