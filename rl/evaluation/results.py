"""The benchmark's results document (`kubejoule.rl-benchmark/v1`): per results key the means over
seeds and each seed's run, against the baseline and the oracle bound (the fields are described
in rl/evaluation/benchmark.py's docstring and docs/rl.md).

Issue 33 extends it (nothing is removed or renamed): per key `energy_split_kwh` (where the
energy goes, rl/simulation/engine/energy.py's parts, mean over seeds; per run too) and `node_hours`;
`paired` — the paired per-seed differences with 95 % intervals (rl/evaluation/paired.py):
`energy_vs_baseline_pct` against the baseline, and `vs_packing` (energy %, lost CPU-hours,
evictions, p99 pending seconds) against bin packing with our expander (`PACKING_REFERENCE`)
when it ran; the oracle's `split_kwh`.

Issue 37, with an intensity series (`--carbon-intensity-csv`): per key `carbon_g` (mean over seeds;
null when any seed's is unknown) and per run `carbon_g` and `carbon_gap` (why it is unknown);
`units.carbon`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl.evaluation.benchmark import JOULES_PER_KWH, BenchmarkResult, RunSummary
from rl.evaluation.paired import paired_axes, relative_pct
from rl.simulation.engine.energy import ENERGY_PARTS
from rl.simulation.traces.headline import PACKING_REFERENCE

SCHEMA = "kubejoule.rl-benchmark/v1"


def baseline_key(keys: Sequence[str]) -> str | None:
    """The run energy is compared with (module docstring)."""
    for key in ("default", "default@least-waste", "default@random"):
        if key in keys:
            return key
    return next((k for k in keys if k.startswith("default@")), None)


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _split_kwh(runs: Sequence[RunSummary]) -> dict[str, float | None] | None:
    if not runs or not all(r.energy_split_joules for r in runs):
        return None
    return {
        part: _round(_mean([r.energy_split_joules[part] / JOULES_PER_KWH for r in runs]))
        for part in ENERGY_PARTS
    }


def _has_carbon(result: BenchmarkResult) -> bool:
    return any(r.carbon_grams is not None or r.carbon_gap for runs in result.runs.values() for r in runs)


def _carbon_mean(runs: Sequence[RunSummary]) -> float | None:
    grams = [r.carbon_grams for r in runs]
    return None if not grams or any(g is None for g in grams) else _round(_mean(grams), 3)


def add_paired(policies: dict[str, Any], baseline: str | None) -> None:
    """Each row's `paired` block (module docstring), from its runs and the references' runs."""
    for row in policies.values():
        paired: dict[str, Any] = {}
        if baseline is not None:
            base = {r["seed"]: r["energy_kwh"] for r in policies[baseline]["runs"]}
            runs = [r for r in row["runs"] if r["seed"] in base]
            if runs and all(base[r["seed"]] for r in runs):
                paired["energy_vs_baseline_pct"] = relative_pct(
                    [r["energy_kwh"] for r in runs], [base[r["seed"]] for r in runs]
                ).as_json()
        if PACKING_REFERENCE in policies:
            axes = paired_axes(row["runs"], policies[PACKING_REFERENCE]["runs"])
            paired["vs_packing"] = {axis: interval.as_json() for axis, interval in axes.items()}
        row["paired"] = paired


def results_json(result: BenchmarkResult, scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results document (see the module docstring for every field)."""
    oracle_j = result.oracle.energy_joules
    baseline = baseline_key(result.policies)
    default_j = result.mean_energy_joules(baseline) if baseline is not None else None
    policies: dict[str, Any] = {}
    carbon = _has_carbon(result)
    for name in result.policies:
        runs = result.runs[name]
        energy_j = result.mean_energy_joules(name)
        vs_default = gap = None
        if default_j is not None and default_j > 0:
            vs_default = 100.0 * (energy_j - default_j) / default_j
            if default_j > oracle_j:
                gap = 100.0 * (default_j - energy_j) / (default_j - oracle_j)
        policies[name] = {
            "energy_kwh": _round(energy_j / JOULES_PER_KWH),
            "energy_vs_default_pct": _round(vs_default, 2),
            "slowdown_mean": _round(_mean([r.slowdown_mean_pct for r in runs]), 3),
            "slowdown_p99": _round(_mean([r.slowdown_p99_pct for r in runs]), 3),
            "unschedulable": _round(_mean([float(r.unschedulable) for r in runs]), 2),
            "gap_closed_pct": _round(gap, 2),
            "never_scheduled": _round(_mean([float(r.never_scheduled) for r in runs]), 2),
            "boots": _round(_mean([float(r.boots) for r in runs]), 2),
            "pending_seconds_mean": _round(_mean([r.pending_mean_s for r in runs]), 3),
            "pending_seconds_p99": _round(_mean([r.pending_p99_s for r in runs]), 3),
            "scale_ups": _round(_mean([float(r.scale_ups) for r in runs]), 2),
            "scale_downs": _round(_mean([float(r.scale_downs) for r in runs]), 2),
            "evictions": _round(_mean([float(r.evictions) for r in runs]), 2),
            "restarted_pods": _round(_mean([float(r.restarted_pods) for r in runs]), 2),
            "lost_cpu_hours": _round(_mean([r.lost_cpu_seconds / 3600.0 for r in runs]), 3),
            "disrupted_workloads": _round(_mean([float(r.disrupted_workloads) for r in runs]), 2),
            "deleted_pods": _round(_mean([float(r.deleted_pods) for r in runs]), 2),
            "below_oracle": any(r.energy_joules < oracle_j for r in runs),
            "energy_split_kwh": _split_kwh(runs),
            "node_hours": _round(_mean([r.node_seconds / 3600.0 for r in runs]), 2),
            "runs": [
                {
                    "seed": r.seed,
                    "energy_kwh": _round(r.energy_joules / JOULES_PER_KWH),
                    "slowdown_mean": _round(r.slowdown_mean_pct, 3),
                    "slowdown_p99": _round(r.slowdown_p99_pct, 3),
                    "unschedulable": r.unschedulable,
                    "never_scheduled": r.never_scheduled,
                    "boots": r.boots,
                    "end_s": _round(r.end_s, 3),
                    "pending_seconds_mean": _round(r.pending_mean_s, 3),
                    "pending_seconds_p99": _round(r.pending_p99_s, 3),
                    "scale_ups": r.scale_ups,
                    "scale_downs": r.scale_downs,
                    "evictions": r.evictions,
                    "restarted_pods": r.restarted_pods,
                    "lost_cpu_hours": _round(r.lost_cpu_seconds / 3600.0, 3),
                    "disrupted_workloads": r.disrupted_workloads,
                    "deleted_pods": r.deleted_pods,
                    "energy_split_kwh": _split_kwh([r]),
                    "node_hours": _round(r.node_seconds / 3600.0, 3),
                }
                for r in runs
            ],
        }
        if carbon:
            policies[name]["carbon_g"] = _carbon_mean(runs)
            for run, r in zip(policies[name]["runs"], runs, strict=True):
                run["carbon_g"] = _round(r.carbon_grams, 3)
                run["carbon_gap"] = r.carbon_gap
    add_paired(policies, baseline)
    bound = result.oracle
    return {
        "schema": SCHEMA,
        "scenario": scenario or {},
        "seeds": result.seeds,
        "baseline": baseline,
        "units": {
            "energy": "kWh",
            "slowdown": "percent: 100 × ((finish − submit) / duration − 1) per pod",
            "pending": "seconds from arrival to (first) start, per pod",
            **({"carbon": "gCO2eq"} if carbon else {}),
        },
        "policies": policies,
        "oracle": {
            "energy_kwh": _round(bound.energy_kwh),
            "idle_kwh": _round(bound.idle_joules / JOULES_PER_KWH),
            "work_core_hours": _round(bound.work_core_seconds / 3600.0, 3),
            "watts_per_core": _round(bound.watts_per_core, 4),
            "horizon_s": _round(bound.horizon_s, 3),
            "split_kwh": {k: _round(v / JOULES_PER_KWH) for k, v in bound.split_joules().items()},
        },
    }


def write_results(
    document: dict[str, Any],
    out: str,
    plot: str | None = None,
    timelines: dict[str, list[tuple[float, float]]] | None = None,
    all_timelines: bool = False,
) -> None:
    """Write the results document to `out` (and the plots to `plot`, which need the runs'
    timelines); print the table and, for the headline's runs, the targets."""
    from rl.evaluation.report import (
        format_carbon_table,
        format_packing_table,
        format_split_table,
        format_table,
        format_targets,
        has_headline,
        headline_targets,
    )

    Path(out).write_text(json.dumps(document, indent=2) + "\n")
    if plot:
        from rl.evaluation.plots import plot_benchmark

        plot_benchmark(document, timelines or {}, plot, all_timelines=all_timelines)
    print(format_table(document))
    if any("carbon_g" in row for row in document["policies"].values()):
        print()
        print(format_carbon_table(document))
    print()
    print("Where the energy goes (kWh, mean over seeds):")
    print(format_split_table(document))
    packing = format_packing_table(document)
    if packing.count("\n") > 1:
        print()
        print(packing)
    if has_headline(document):
        print()
        print(format_targets(headline_targets(document)))

