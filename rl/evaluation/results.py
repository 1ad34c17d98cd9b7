"""The benchmark's results document (`kubejoule.rl-benchmark/v1`): per results key the means over
seeds and each seed's run, against the baseline and the oracle bound (the fields are described
in rl/evaluation/benchmark.py's docstring and docs/rl.md). `benchmark_document` builds them as
typed records (rl/evaluation/rows.py: a row per results key, a row per run); `results_json` is
their serialization, and `write_results` writes it and prints the tables.

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
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rl.evaluation.benchmark import JOULES_PER_KWH, BenchmarkResult, RunSummary
from rl.evaluation.paired import paired_axes, relative_pct
from rl.evaluation.rows import (
    SCHEMA,
    BenchmarkDocument,
    OracleRow,
    Paired,
    PolicyRow,
    RunRow,
    Split,
    document_of,
    round_value,
    rounded,
)
from rl.simulation.engine.energy import ENERGY_PARTS
from rl.simulation.traces.headline import PACKING_REFERENCE

__all__ = ["SCHEMA", "add_paired", "baseline_key", "benchmark_document", "results_json", "write_results"]


def baseline_key(keys: Sequence[str]) -> str | None:
    """The run energy is compared with (module docstring)."""
    for key in ("default", "default@least-waste", "default@random"):
        if key in keys:
            return key
    return next((k for k in keys if k.startswith("default@")), None)


def _mean(values: Sequence[Any]) -> Any:
    """The mean of the values present (None when none is); of splits, part by part."""
    present = [v for v in values if v is not None]
    if present and isinstance(present[0], dict):
        if len(present) < len(values):
            return None
        return {part: _mean([v[part] for v in present]) for part in present[0]}
    return sum(float(v) for v in present) / len(present) if present else None


def _split_kwh(run: RunSummary) -> Split | None:
    if not run.energy_split_joules:
        return None
    return {part: run.energy_split_joules[part] / JOULES_PER_KWH for part in ENERGY_PARTS}


def run_row(r: RunSummary) -> RunRow:
    """One run's row, before rounding (the means are taken of these)."""
    return RunRow(
        seed=r.seed,
        energy_kwh=r.energy_joules / JOULES_PER_KWH,
        slowdown_mean=r.slowdown_mean_pct,
        slowdown_p99=r.slowdown_p99_pct,
        unschedulable=r.unschedulable,
        never_scheduled=r.never_scheduled,
        boots=r.boots,
        end_s=r.end_s,
        pending_seconds_mean=r.pending_mean_s,
        pending_seconds_p99=r.pending_p99_s,
        scale_ups=r.scale_ups,
        scale_downs=r.scale_downs,
        evictions=r.evictions,
        restarted_pods=r.restarted_pods,
        lost_cpu_hours=r.lost_cpu_seconds / 3600.0,
        disrupted_workloads=r.disrupted_workloads,
        deleted_pods=r.deleted_pods,
        energy_split_kwh=_split_kwh(r),
        node_hours=r.node_seconds / 3600.0,
        carbon_g=r.carbon_grams,
        carbon_gap=r.carbon_gap,
    )


def _carbon_mean(runs: Sequence[RunSummary]) -> float | None:
    grams = [r.carbon_grams for r in runs]
    return None if not grams or any(g is None for g in grams) else _mean(grams)


def policy_row(
    result: BenchmarkResult, name: str, default_j: float | None, carbon: bool
) -> PolicyRow:
    """A results key's row (rl/evaluation/rows.py), as its document holds it."""
    runs = result.runs[name]
    oracle_j = result.oracle.energy_joules
    energy_j = result.mean_energy_joules(name)
    vs_default = gap = None
    if default_j is not None and default_j > 0:
        vs_default = 100.0 * (energy_j - default_j) / default_j
        if default_j > oracle_j:
            gap = 100.0 * (default_j - energy_j) / (default_j - oracle_j)
    raw = [run_row(r) for r in runs]
    means = {key: _mean([getattr(r, key) for r in raw]) for key in PolicyRow.mean_fields()}
    return rounded(
        PolicyRow(
            energy_kwh=energy_j / JOULES_PER_KWH,
            energy_vs_default_pct=vs_default,
            gap_closed_pct=gap,
            below_oracle=any(r.energy_joules < oracle_j for r in runs),
            energy_split_kwh=_mean([r.energy_split_kwh for r in raw]) if raw else None,
            runs=tuple(rounded(r) for r in raw),
            carbon_g=_carbon_mean(runs) if carbon else None,
            **means,
        )
    )


def add_paired(policies: Mapping[str, PolicyRow], baseline: str | None) -> dict[str, PolicyRow]:
    """Each row with its `paired` block (module docstring), from its runs and the references'."""
    out = {}
    for name, row in policies.items():
        energy = packing = None
        if baseline is not None:
            base = {r.seed: r.energy_kwh for r in policies[baseline].runs}
            runs = [r for r in row.runs if r.seed in base]
            if runs and all(base[r.seed] for r in runs):
                energy = relative_pct([r.energy_kwh for r in runs], [base[r.seed] for r in runs])
        if PACKING_REFERENCE in policies:
            packing = paired_axes(row.runs, policies[PACKING_REFERENCE].runs)
        out[name] = replace(row, paired=_rounded_paired(Paired(energy, packing)))
    return out


def _rounded_paired(paired: Paired) -> Paired:
    """As the document holds it (3 decimals), so a document read back is the same record."""
    return Paired.from_json(paired.as_json())


def benchmark_document(result: BenchmarkResult, scenario: Mapping[str, Any] | None = None) -> BenchmarkDocument:
    """The results as records (rl/evaluation/rows.py; every field: the module docstring)."""
    baseline = baseline_key(result.policies)
    default_j = result.mean_energy_joules(baseline) if baseline is not None else None
    carbon = any(r.carbon_grams is not None or r.carbon_gap for runs in result.runs.values() for r in runs)
    rows = {name: policy_row(result, name, default_j, carbon) for name in result.policies}
    bound = result.oracle
    split = {k: v / JOULES_PER_KWH for k, v in bound.split_joules().items()}
    oracle = OracleRow(
        energy_kwh=round_value(bound.energy_kwh, 4),
        idle_kwh=round_value(bound.idle_joules / JOULES_PER_KWH, 4),
        work_core_hours=round_value(bound.work_core_seconds / 3600.0, 3),
        watts_per_core=round_value(bound.watts_per_core, 4),
        horizon_s=round_value(bound.horizon_s, 3),
        split_kwh=round_value(split, 4),
    )
    return BenchmarkDocument(scenario or {}, result.seeds, baseline, add_paired(rows, baseline), oracle, carbon)


def results_json(result: BenchmarkResult, scenario: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The results document (rl/evaluation/rows.py's records, serialized)."""
    return benchmark_document(result, scenario).as_json()


def write_results(
    document: BenchmarkDocument | Mapping[str, Any],
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

    records = document_of(document)
    written = document.as_json() if isinstance(document, BenchmarkDocument) else document
    Path(out).write_text(json.dumps(written, indent=2) + "\n")
    if plot:
        from rl.evaluation.plots import plot_benchmark

        plot_benchmark(records, timelines or {}, plot, all_timelines=all_timelines)
    print(format_table(records))
    if records.carbon:
        print()
        print(format_carbon_table(records))
    print()
    print("Where the energy goes (kWh, mean over seeds):")
    print(format_split_table(records))
    packing = format_packing_table(records)
    if packing.count("\n") > 1:
        print()
        print(packing)
    if has_headline(records):
        print()
        print(format_targets(headline_targets(records)))
