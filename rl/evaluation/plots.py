"""PNG plots of a benchmark (issue 33's picture): energy per policy, sorted, each bar stacked by
where its energy goes (rl/simulation/engine/energy.py's parts) with its paired 95 % interval against
the baseline, the baseline, bin packing and the recommended setup marked, the oracle bound's
split beneath; and cluster power over time (first seed) for those three (every policy with
`all_timelines`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rl.evaluation.rows import BenchmarkDocument, document_of
from rl.simulation.engine.energy import ENERGY_PARTS
from rl.simulation.traces.headline import PACKING_REFERENCE, RECOMMENDED

PART_COLOURS = {
    "work": "#4c72b0",
    "idle_with_pods": "#dd8452",
    "idle_empty": "#c44e52",
    "daemonsets": "#8172b3",
    "boots": "#937860",
    "standby": "#bbbbbb",
}
PART_LABELS = {
    "work": "work (pods' dynamic power)",
    "idle_with_pods": "idle of nodes with pods",
    "idle_empty": "idle of empty nodes",
    "daemonsets": "DaemonSets",
    "boots": "boots",
    "standby": "standby (off)",
}


def binned_mean_watts(
    timeline: Sequence[tuple[float, float]], end_s: float, bin_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Mean power in consecutive bins of a step function (exact: energy in the bin / width).

    `timeline` is [(time, watts from then on)], sorted; returns (bin starts, mean watts).
    """
    if not timeline or end_s <= 0:
        return np.zeros(0), np.zeros(0)
    edges = np.arange(0.0, end_s + bin_s, bin_s)
    times = np.array([t for t, _ in timeline] + [max(end_s, timeline[-1][0])])
    watts = np.array([w for _, w in timeline])
    # Cumulative energy at each change point, then interpolated at the bin edges (the
    # integral of a step function is piecewise linear, so linear interpolation is exact).
    cumulative = np.concatenate([[0.0], np.cumsum(watts * np.diff(times))])
    energy_at_edges = np.interp(np.minimum(edges, times[-1]), times, cumulative)
    widths = np.diff(np.minimum(edges, times[-1]))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(widths > 0, np.diff(energy_at_edges) / widths, np.nan)
    return edges[:-1], means


def marked_policies(document: BenchmarkDocument) -> dict[str, str]:
    """The rows the picture marks, by role, among those the document has."""
    roles: dict[str, str] = {}
    for role, key in (("baseline", document.baseline), ("bin packing", PACKING_REFERENCE), ("recommended", RECOMMENDED)):
        if key is not None and key in document.policies:
            roles[key] = f"{roles[key]} = {role}" if key in roles else role
    return roles


def _interval_kwh(document: BenchmarkDocument, name: str) -> tuple[float, float] | None:
    """The paired 95 % interval against the baseline, in kWh about the baseline's mean."""
    interval = document.policies[name].paired.energy_vs_baseline_pct
    baseline = document.baseline
    if not interval or interval.low is None or interval.high is None or baseline not in document.policies:
        return None
    base = document.policies[baseline].energy_kwh
    return base * (1 + interval.low / 100.0), base * (1 + interval.high / 100.0)


def _energy_panel(axes: Any, document: BenchmarkDocument, roles: Mapping[str, str]) -> None:
    rows = document.policies
    names = sorted(rows, key=lambda n: rows[n].energy_kwh, reverse=True)
    labels = [f"{n}  [{roles[n]}]" if n in roles else n for n in names]
    oracle_split = document.oracle.split_kwh
    if oracle_split:
        labels.insert(0, "oracle bound")
    positions = np.arange(len(labels))
    left = np.zeros(len(labels))
    for part in ENERGY_PARTS:
        values = [oracle_split[part] or 0.0] if oracle_split else []
        values += [(rows[n].energy_split_kwh or {}).get(part) or 0.0 for n in names]
        axes.barh(positions, values, left=left, color=PART_COLOURS[part], label=PART_LABELS[part], height=0.7)
        left += np.array(values)
    offset = 1 if oracle_split else 0
    for position, name in enumerate(names, start=offset):
        energy = rows[name].energy_kwh
        interval = _interval_kwh(document, name)
        if interval is not None and name != document.baseline:
            axes.plot(interval, [position, position], color="black", linewidth=2)
        vs = rows[name].paired.energy_vs_baseline_pct
        text = f"{energy:.2f} kWh"
        if vs and vs.low is not None and vs.high is not None and name != document.baseline:
            text += f"  {vs.mean:+.1f} % [{vs.low:+.1f}, {vs.high:+.1f}]"
        axes.annotate(text, (max(energy, *(interval or ())) , position), xytext=(4, 0),
                      textcoords="offset points", va="center", fontsize="small")
    axes.set_yticks(positions, labels, fontsize="small")
    for tick, label in zip(axes.get_yticklabels(), labels, strict=True):
        if "[" in label:
            tick.set_fontweight("bold")
    axes.set_xlabel("energy (kWh, mean over seeds; black: paired 95 % interval vs the baseline)")
    axes.set_title("Energy per policy, by where it goes (sorted; oracle bound at the bottom)")
    axes.set_xlim(0, max(left) * 1.35)
    # Below the axes, in rows: beside them it would cover the labels of the best rows.
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=3, fontsize="small")
    axes.grid(axis="x", alpha=0.3)


def plot_benchmark(
    document: BenchmarkDocument | Mapping[str, Any],
    timelines: Mapping[str, Sequence[tuple[float, float]]],
    path: str | Path,
    bin_s: float = 900.0,
    all_timelines: bool = False,
) -> None:
    """Write a PNG with two panels: energy per policy (module docstring) and power over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    document = document_of(document)
    roles = marked_policies(document)
    count = len(document.policies) + 1
    fig, (bottom, top) = plt.subplots(
        2, 1, figsize=(13, 5 + 0.38 * count), height_ratios=[0.38 * count, 4],
        constrained_layout=True,
    )
    _energy_panel(bottom, document, roles)
    shown = list(document.policies) if all_timelines else [n for n in document.policies if n in roles]
    for name in shown:
        timeline = timelines.get(name)
        if not timeline:
            continue
        end_s = document.policies[name].runs[0].end_s
        starts, means = binned_mean_watts(timeline, end_s, bin_s)
        label = f"{name} ({roles[name]})" if name in roles else name
        top.step(starts / 3600.0, means / 1000.0, where="post", label=label, linewidth=1.4)
    top.set_xlabel("time (h)")
    top.set_ylabel(f"cluster power (kW, {bin_s / 60:.0f}-min mean)")
    top.set_title("Cluster power over time (seed 0)")
    top.grid(alpha=0.3)
    if top.get_legend_handles_labels()[0]:
        top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0)
    fig.savefig(Path(path), dpi=100)
    plt.close(fig)
