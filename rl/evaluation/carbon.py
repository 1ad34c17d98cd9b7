"""Grams of CO2-equivalent of a benchmark run: its cluster power over time (the simulator's
timeline, piecewise constant, and the joules spent at once) times the grid's carbon intensity at
those times (common/carbon.py, the same implementation as the agent's counters), the run's t = 0
placed at `CarbonWindow.start_s` on the intensity series (`--carbon-start`).

With a time-varying intensity *when* the energy is spent matters: two runs of the same kWh at
different times emit different grams. A run that spends energy where the intensity is unknown
(past the series' end, a stale or missing value) has no grams: `carbon_g` is null and
`carbon_gap` says why — never a partial sum presented as the run's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from common.carbon import JOULES_PER_KWH, CarbonIntensity, IntensitySeries, iso


@dataclass(frozen=True)
class CarbonWindow:
    intensity: CarbonIntensity
    start_s: float  # Unix seconds where the trace's t = 0 falls

    def describe(self) -> dict[str, object]:
        series = self.intensity
        file: str | None = None  # a constant intensity has no file and no age limit
        max_age_s: float | None = None
        if isinstance(series, IntensitySeries):
            file, max_age_s = series.name, series.max_age_s
        return {
            "source": series.source,
            "zone": series.zone,
            "start": iso(self.start_s),
            "file": file,
            "max_age_s": max_age_s,
            "units": "gCO2eq (energy × grid carbon intensity)",
        }


def run_grams(
    window: CarbonWindow,
    timeline: Sequence[tuple[float, float]],
    lumps: Sequence[tuple[float, float]],
    end_s: float,
) -> tuple[float | None, str | None]:
    """(grams, None), or (None, why not) when any energy falls where the intensity is unknown.
    `timeline`: (time s, cluster watts from then on) until `end_s`; `lumps`: (time s, joules)."""
    start = window.start_s
    grams = 0.0
    for i, (t, watts) in enumerate(timeline):
        until = min(timeline[i + 1][0] if i + 1 < len(timeline) else end_s, end_s)
        if watts <= 0 or until <= t:
            continue  # no energy: the intensity does not matter
        integral = window.intensity.integral(start + t, start + until)
        if integral.value is None:
            return None, integral.reason
        grams += watts * integral.value / JOULES_PER_KWH
    for t, joules in lumps:
        if joules <= 0:
            continue
        reading = window.intensity.at(start + t)
        if reading.value is None:
            return None, reading.reason
        grams += joules / JOULES_PER_KWH * reading.value
    return grams, None
