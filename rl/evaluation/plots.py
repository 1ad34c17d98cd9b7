"""PNG plots of a benchmark: cluster power over time per policy, and energy per policy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


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


def plot_benchmark(
    document: Mapping[str, Any],
    timelines: Mapping[str, Sequence[tuple[float, float]]],
    path: str | Path,
    bin_s: float = 900.0,
) -> None:
    """Write a PNG with two panels: power over time (first seed) and energy per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(document["policies"])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 8), constrained_layout=True)
    for name in policies:
        timeline = timelines.get(name)
        if not timeline:
            continue
        end_s = document["policies"][name]["runs"][0]["end_s"]
        starts, means = binned_mean_watts(timeline, end_s, bin_s)
        top.step(starts / 3600.0, means / 1000.0, where="post", label=name, linewidth=1.2)
    top.set_xlabel("time (h)")
    top.set_ylabel(f"cluster power (kW, {bin_s / 60:.0f}-min mean)")
    top.set_title("Cluster power over time (seed 0)")
    top.grid(alpha=0.3)
    # Legend beside the axes: inside, a dozen policies hide the peak hours they describe.
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0)

    energies = [document["policies"][n]["energy_kwh"] for n in policies]
    bars = bottom.bar(policies, energies, color="tab:blue", alpha=0.8)
    for bar, name in zip(bars, policies, strict=True):
        runs = document["policies"][name]["runs"]
        low = min(r["energy_kwh"] for r in runs)
        high = max(r["energy_kwh"] for r in runs)
        middle = bar.get_x() + bar.get_width() / 2
        bottom.plot([middle, middle], [low, high], color="black", linewidth=1)
        bottom.annotate(
            f"{bar.get_height():.1f}",
            (middle, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize="small",
        )
    oracle = document["oracle"]["energy_kwh"]
    bottom.axhline(oracle, color="tab:red", linestyle="--", label=f"oracle bound {oracle:.1f} kWh")
    bottom.set_ylabel("energy (kWh, mean over seeds; line = min–max)")
    bottom.set_title("Energy per policy")
    bottom.set_ylim(0, max(energies + [oracle]) * 1.2)  # headroom: the legend above the bars
    bottom.legend(loc="upper right", fontsize="small")
    bottom.grid(axis="y", alpha=0.3)
    if len(policies) > 6:  # long POLICY@EXPANDER names: slanted, so they do not overlap
        bottom.tick_params(axis="x", labelrotation=30, labelsize="small")
        for label in bottom.get_xticklabels():
            label.set_horizontalalignment("right")
    fig.savefig(Path(path), dpi=110)
    plt.close(fig)
