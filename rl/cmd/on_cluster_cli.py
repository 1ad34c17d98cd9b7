"""`kubejoule-rl benchmark --on-cluster [--speedup N] [--fidelity]`: the benchmark's plan run on a
real control plane (rl/evaluation/on_cluster.py), written as the simulated benchmark's results
document (rl/evaluation/results.py) with, when a run failed, `complete: false` and the failed run
under `partial` (never in `policies`, never in the table); with `--fidelity` the same plan also
runs in the simulator and the document gains `fidelity` (rl/evaluation/fidelity.py), printed as
a table. `--fidelity-of FILE` (without --on-cluster) simulates the plan again and compares it
with the cluster's side a saved `--fidelity` document recorded: after a change to the simulator,
its fidelity is measured again without running the cluster (the plan must be the saved one's:
the same scenario description). Exit status: 0, 1 when a run failed (what was measured is still
written), 2 on bad input."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.cluster.autoscaler import CA_BIN_ENV
from rl.evaluation.benchmark import BenchmarkPlan, RunOutcome, assemble, run_plan
from rl.evaluation.fidelity import as_run_on_cluster, fidelity, format_fidelity, refidelity
from rl.evaluation.on_cluster import (
    AUTOSCALER_BLOCKED,
    PartialRun,
    check_fits,
    check_static,
    run_on_cluster,
)
from rl.evaluation.results import results_json, write_results
from rl.simulation.cluster import ClusterModel

__all__ = ["AUTOSCALER_BLOCKED", "add_arguments", "document", "load_saved", "run", "write", "write_refidelity"]

BIN_ENV = "KUBEJOULE_K8S_BIN"
DEFAULT_SPEEDUP = 60.0


def add_arguments(bench: argparse.ArgumentParser) -> None:
    group = bench.add_argument_group("on a real control plane (docs/how-to/real-kubernetes.md)")
    group.add_argument("--on-cluster", action="store_true",
                       help="run the policies' real schedulers on a real control plane with KWOK nodes")
    group.add_argument("--speedup", type=float, default=DEFAULT_SPEEDUP,
                       help=f"the trace's times (arrivals, durations) ÷ N on the cluster (default {DEFAULT_SPEEDUP:g})")
    group.add_argument("--fidelity", action="store_true",
                       help="with --on-cluster: also simulate the same plan (every node without an agent, as the KWOK nodes) and report the differences")
    group.add_argument("--fidelity-of", metavar="FILE", type=Path,
                       help="without --on-cluster: simulate the plan again and compare it with the cluster's side of "
                       "this saved --on-cluster --fidelity results document (the same benchmark options)")
    group.add_argument("--bin-dir", type=Path, default=os.environ.get(BIN_ENV),
                       help=f"the components' binaries (default ${BIN_ENV}; `make -s k8s-bin-dir` prints it)")
    group.add_argument("--ca-bin", type=Path, default=os.environ.get(CA_BIN_ENV),
                       help=f"a cluster-autoscaler binary built from its GitHub source (default ${CA_BIN_ENV}; "
                       "tools/k8s/build-ca-from-source.sh builds one): with it --autoscaler, --expanders and "
                       "POLICY@EXPANDER run on the real cluster-autoscaler; without it --on-cluster is static only")
    group.add_argument("--cluster-dir", type=Path,
                       help="where the control plane keeps its files and logs (default: a temporary directory)")


@dataclass
class OnClusterRun:
    outcomes: list[RunOutcome]
    partial: PartialRun | None
    simulated: list[RunOutcome] | None


def progress(message: str) -> None:
    print(f"kubejoule-rl: on-cluster: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace, plan: BenchmarkPlan, cluster: ClusterModel, expanders: Sequence[str],
        policies: Sequence[str]) -> OnClusterRun:
    """The plan on the cluster (and in the simulator with --fidelity). ValueError on bad input."""
    check_static(cluster, expanders, policies, args.ca_bin, [p for s in range(plan.seeds) for p in plan.pods_of(s)])
    if args.shard is not None:
        raise ValueError("--on-cluster runs the whole plan: no --shard")
    if args.bin_dir is None:
        raise ValueError(f"--on-cluster: give --bin-dir or set ${BIN_ENV} (`make -s k8s-bin-dir` prints it)")
    for seed in range(plan.seeds):
        check_fits(plan.nodes, plan.pods_of(seed), cluster.daemonsets)
    simulated = simulate_as_cluster(plan, args.speedup) if args.fidelity else None
    if args.cluster_dir is not None:
        outcomes, partial = run_on_cluster(plan, cluster.daemonsets, args.bin_dir, args.cluster_dir, args.speedup,
                                           progress, args.ca_bin)
    else:
        with tempfile.TemporaryDirectory(prefix="kj-on-cluster-") as tmp:
            outcomes, partial = run_on_cluster(plan, cluster.daemonsets, args.bin_dir, Path(tmp), args.speedup,
                                               progress, args.ca_bin)
    return OnClusterRun(outcomes, partial, simulated)


def simulate_as_cluster(plan: BenchmarkPlan, speedup: float) -> list[RunOutcome]:
    """The fidelity check's simulated side of `plan`, as the cluster runs it at `speedup`
    (rl/evaluation/fidelity.py `as_run_on_cluster`)."""
    return run_plan(as_run_on_cluster(plan, speedup), None, 1, False)


# What a saved document's scenario holds that the plan's description does not.
RUN_KEYS = ("engine", "speedup")
# What the scenario block leaves out when the option is not given.
OMITTED_WHEN_OFF = ("window_hours", "carbon")


def load_saved(path: Path, description: dict[str, Any]) -> dict[str, Any]:
    """A saved `--on-cluster --fidelity` document whose plan is `description`'s. ValueError when
    it cannot be read, has no fidelity rows, or was run with other options (naming them). Files
    are compared by name (a saved run read from another checkout); a setting the saved document
    does not record (one the simulator gained since) is not a difference: it is named on stderr."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"--fidelity-of {path}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("fidelity"), dict) or not doc["fidelity"]:
        raise ValueError(f"--fidelity-of {path}: not a results document of --on-cluster --fidelity")
    saved = {k: v for k, v in doc.get("scenario", {}).items() if k not in RUN_KEYS}
    differing: list[str] = []
    unrecorded: list[str] = []
    asked = json.loads(json.dumps(description))
    for key in OMITTED_WHEN_OFF:
        saved.setdefault(key, None)
        asked.setdefault(key, None)
    _compare(saved, asked, "", differing, unrecorded)
    if differing:
        raise ValueError(f"--fidelity-of {path}: run with other options: {', '.join(differing)} differ")
    if unrecorded:
        print(f"kubejoule-rl: note: {path} does not record {', '.join(unrecorded)} (taken as this run's)",
              file=sys.stderr)
    return doc


def _compare(saved: object, asked: object, where: str, differing: list[str], unrecorded: list[str]) -> None:
    if isinstance(saved, dict) and isinstance(asked, dict):
        differing += [f"{where}{k}" for k in saved if k not in asked]
        for key, value in asked.items():
            if key not in saved:
                unrecorded.append(f"{where}{key}")
            elif key.endswith("_file") and isinstance(value, str) and isinstance(saved[key], str):
                if Path(value).name != Path(saved[key]).name:
                    differing.append(f"{where}{key}")
            else:
                _compare(saved[key], value, f"{where}{key}.", differing, unrecorded)
    elif saved != asked:
        differing.append(where.rstrip("."))


def write_refidelity(args: argparse.Namespace, plan: BenchmarkPlan, saved: dict[str, Any]) -> int:
    """The saved document with its fidelity rows measured again (module docstring)."""
    simulated = assemble(plan.keys, plan.seeds, plan.oracle, simulate_as_cluster(plan, saved["scenario"]["speedup"]))
    doc = {**saved, "fidelity": refidelity(simulated, saved["fidelity"], len(plan.pods)),
           "fidelity_of": str(args.fidelity_of)}
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"Fidelity, simulated again: the cluster's side as {args.fidelity_of} recorded it "
          f"(speedup {saved['scenario']['speedup']:g}; Δ = cluster vs simulator)")
    print(format_fidelity(doc["fidelity"]))
    return 0


def document(plan: BenchmarkPlan, run: OnClusterRun, description: dict[str, Any], speedup: float) -> dict[str, Any]:
    """The results document of the complete runs, marked (module docstring)."""
    complete = [k for k in plan.keys if any(o.summary.policy == k for o in run.outcomes)]
    result = assemble(complete, plan.seeds, plan.oracle, run.outcomes)
    engine = "real control plane (KWOK nodes)"
    if any(t.expander is not None for t in plan.tasks):
        engine += ", real cluster-autoscaler (its kwok cloud provider)"
    doc = results_json(result, {**description, "engine": engine, "speedup": speedup})
    doc["complete"] = run.partial is None
    if run.partial is not None:
        doc["partial"] = run.partial.as_json()
    if run.simulated is not None:
        simulated = assemble(plan.keys, plan.seeds, plan.oracle, run.simulated)
        doc["fidelity"] = fidelity(simulated, result, len(plan.pods))
    return doc


def write(args: argparse.Namespace, plan: BenchmarkPlan, run: OnClusterRun, description: dict[str, Any]) -> int:
    doc = document(plan, run, description, args.speedup)
    if run.partial is not None:
        Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
        p = run.partial
        print(f"kubejoule-rl: on-cluster: run {p.task.key} seed {p.task.seed} failed: {p.reason}", file=sys.stderr)
        print(f"kubejoule-rl: the {len(run.outcomes)} complete runs and the partial one are in {args.out} "
              "(marked complete: false; no table printed)", file=sys.stderr)
        return 1
    write_results(doc, args.out, args.plot, None, args.plot_all_timelines)
    if "fidelity" in doc:
        print()
        print(f"Fidelity: simulator vs real control plane (speedup {args.speedup:g}; Δ = cluster vs simulator; "
              "both without agents and with the nodes' curves configured, as on KWOK nodes)")
        print(format_fidelity(doc["fidelity"]))
    return 0
