"""`kubejoule-rl whatif`: cluster-autoscaler's own settings for one setup (issue 33) — the
trade-off an operator can choose: energy against evictions, lost work and pending time.

The grid: `--scale-down-unneeded-time` 3, 5 and 10 min × `--scale-down-utilization-threshold`
0.5, 0.6 and 0.7 (cluster-autoscaler ships 10 min and 0.5), every cell the benchmark's own runs
(`plan_benchmark`, `run_task`: each seed its own workload, the same seeds in every cell, so cells
pair with the shipped settings' cell). Per cell: energy (mean over seeds) and its paired
difference with the shipped cell (95 % interval), where the energy goes, evictions, lost
CPU-hours, p99 pending time. A table (`whatif_table`) and a plot (`plot_whatif`: energy against
evictions, one point per cell). The command line: rl/cmd/whatif_cli.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rl.evaluation.benchmark import BenchmarkPlan, RunOutcome, assemble, plan_benchmark, run_task
from rl.evaluation.paired import format_interval, relative_pct
from rl.evaluation.parallel import run_tasks
from rl.evaluation.results import benchmark_document
from rl.simulation.cluster import ClusterModel
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from scheduler.domain.cluster_defaults import (
    SCALE_DOWN_UNNEEDED_S,
    SCALE_DOWN_UTILIZATION_THRESHOLD,
)

SCHEMA = "kubejoule.rl-whatif/v1"
UNNEEDED_S = (180.0, 300.0, SCALE_DOWN_UNNEEDED_S)
THRESHOLDS = (SCALE_DOWN_UTILIZATION_THRESHOLD, 0.6, 0.7)
SHIPPED = (SCALE_DOWN_UNNEEDED_S, SCALE_DOWN_UTILIZATION_THRESHOLD)


def plan_whatif(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    cluster: ClusterModel,
    policy: str,
    seeds: int,
    vary_workload: bool = True,
) -> list[tuple[tuple[float, float], BenchmarkPlan]]:
    """Each cell's plan. ValueError without the autoscaler."""
    if cluster.autoscaler is None:
        raise ValueError("the what-if varies cluster-autoscaler's settings: the scenario needs --autoscaler")
    cells = []
    for unneeded in UNNEEDED_S:
        for threshold in THRESHOLDS:
            model = replace(
                cluster,
                autoscaler=replace(
                    cluster.autoscaler, scale_down_unneeded_s=unneeded, utilization_threshold=threshold
                ),
            )
            plan = plan_benchmark(nodes, pods, [policy], seeds, model, (), vary_workload)
            cells.append(((unneeded, threshold), plan))
    return cells


def _run_cell_task(plans: Sequence[BenchmarkPlan], task: tuple[int, int]) -> RunOutcome:
    cell, index = task
    return RunOutcome(run_task(plans[cell], plans[cell].tasks[index]).summary, None)


def run_whatif(
    cells: Sequence[tuple[tuple[float, float], BenchmarkPlan]], jobs: int = 1
) -> dict[str, Any]:
    """Every cell's runs, in `jobs` processes; the what-if document."""
    plans = [plan for _, plan in cells]
    tasks = [(c, i) for c, plan in enumerate(plans) for i in range(len(plan.tasks))]
    outcomes = run_tasks(_run_cell_task, plans, tasks, jobs)
    documents = []
    position = 0
    for (settings, plan) in cells:
        runs = outcomes[position:position + len(plan.tasks)]
        position += len(plan.tasks)
        result = assemble(plan.keys, plan.seeds, plan.oracle, runs)
        documents.append((settings, benchmark_document(result).policies[plan.keys[0]]))
    shipped = dict(documents)[SHIPPED]
    shipped_energy = [r.energy_kwh for r in shipped.runs]
    rows = []
    for (unneeded, threshold), row in documents:
        rows.append({
            "scale_down_unneeded_s": unneeded,
            "utilization_threshold": threshold,
            "energy_kwh": row.energy_kwh,
            "vs_shipped_pct": relative_pct([r.energy_kwh for r in row.runs], shipped_energy).as_json(2),
            "energy_split_kwh": row.energy_split_kwh,
            "evictions": row.evictions,
            "lost_cpu_hours": row.lost_cpu_hours,
            "pending_seconds_p99": row.pending_seconds_p99,
            "slowdown_mean": row.slowdown_mean,
            "never_scheduled": row.never_scheduled,
        })
    return {"schema": SCHEMA, "policy": cells[0][1].keys[0], "seeds": cells[0][1].seeds, "cells": rows}


def whatif_table(document: Mapping[str, Any]) -> str:
    lines = [
        "| unneeded time | utilization threshold | energy kWh "
        f"| vs shipped ({SHIPPED[0] / 60:g} min, {SHIPPED[1]:g}) | idle of empty nodes kWh "
        "| evictions | lost CPU h | pending p99 s | slowdown mean % |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in document["cells"]:
        split = cell["energy_split_kwh"] or {}
        shipped = (cell["scale_down_unneeded_s"], cell["utilization_threshold"]) == SHIPPED
        vs = "—" if shipped else format_interval(cell["vs_shipped_pct"], "+.1f", "%")
        lines.append(
            f"| {cell['scale_down_unneeded_s'] / 60:g} min | {cell['utilization_threshold']:g} "
            f"| {cell['energy_kwh']:.2f} | {vs} | {split.get('idle_empty', 0.0):.2f} "
            f"| {cell['evictions']:g} | {cell['lost_cpu_hours']:.2f} | {cell['pending_seconds_p99']:.0f} "
            f"| {cell['slowdown_mean']:.2f} |"
        )
    return "\n".join(lines)


def plot_whatif(document: Mapping[str, Any], path: str | Path) -> None:
    """Energy against evictions, one point per cell, labelled with its settings."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(figsize=(8, 5.5), constrained_layout=True)
    for threshold, marker in zip(THRESHOLDS, "os^", strict=True):
        cells = [c for c in document["cells"] if c["utilization_threshold"] == threshold]
        axes.plot([c["evictions"] for c in cells], [c["energy_kwh"] for c in cells], marker=marker,
                  linestyle="-", label=f"utilization threshold {threshold:g}")
        for c in cells:
            axes.annotate(f"{c['scale_down_unneeded_s'] / 60:g} min", (c["evictions"], c["energy_kwh"]),
                          xytext=(4, 4), textcoords="offset points", fontsize="small")
    axes.set_xlabel("evictions per run (mean over seeds)")
    axes.set_ylabel("energy (kWh, mean over seeds)")
    axes.set_title(f"cluster-autoscaler's settings for\n{document['policy']}: energy against evictions", fontsize="medium")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    fig.savefig(Path(path), dpi=100)
    plt.close(fig)
