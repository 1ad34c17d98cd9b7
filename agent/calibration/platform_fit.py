"""Calibrating against the platform: the BMC's reading of the whole server, the power the
scheduler should minimise (docs/calibration.md, "Against the platform reading").

While `kubejoule-calibrate run --bmc-url …` measures, a poller reads the BMC every
`--bmc-interval` and keeps every reading with its time. Each steady phase then has a platform
level — the mean of the readings inside it, its first fifth left out as for a wall meter, since a
BMC averages over its own window — beside the utilization and RAPL power it measured. The curve is
fitted to those levels with the same models and held-out selection as RAPL's windows (one level
a phase, held out as the phase); RAPL's own fit is kept beside it for the agent's idle split, and
the RAPL-to-platform line is the profile's wall correction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.calibration.fit import FitError, FitResult, Window, select_model
from agent.calibration.measure import Phase
from agent.calibration.output import curve_parameters, phase_record, phase_spans
from agent.calibration.wall import WallMeterError, WallReading, fit_wall_correction, phase_means
from common.power_profile import WallCorrection

MIN_PLATFORM_PHASES = 3  # a curve through fewer levels is not a curve


@dataclass(frozen=True)
class PlatformFit:
    fit: FitResult
    wall: WallCorrection  # platform watts = intercept + slope × RAPL watts
    windows: tuple[Window, ...]  # one a phase: its utilization and mean platform watts
    readings: int


def platform_windows(phases: Sequence[Phase], readings: Sequence[WallReading]) -> list[Window]:
    """Each used phase the readings cover, as one window of its utilization and platform watts."""
    by_name = {p.group: p for p in phases if p.used and p.utilization is not None and p.windows}
    spans = [s for s in phase_spans([phase_record(p) for p in by_name.values()]) if s.name in by_name]
    windows = []
    for span, watts in phase_means(readings, spans):
        phase = by_name[span.name]
        assert phase.utilization is not None
        windows.append(Window(phase.utilization, watts, phase.seconds, phase.group, span.start, span.end, phase.target))
    return windows


def fit_platform(phases: Sequence[Phase], readings: Sequence[WallReading], models: Sequence[str]) -> PlatformFit:
    """The platform curve and the RAPL-to-platform line; WallMeterError when the readings do not
    cover enough phases (the BMC was down, or refreshes more slowly than the phases last)."""
    if not readings:
        raise WallMeterError("the BMC gave no reading during the calibration")
    windows = platform_windows(phases, readings)
    if len(windows) < MIN_PLATFORM_PHASES:
        raise WallMeterError(
            f"the BMC's readings cover {len(windows)} steady phase(s), {MIN_PLATFORM_PHASES} are needed: lengthen "
            "--step-seconds beyond the BMC's refresh period, or shorten --bmc-interval"
        )
    try:
        fit = select_model(windows, models)
    except FitError as exc:
        raise WallMeterError(f"the platform curve cannot be fitted: {exc}") from None
    wall = fit_wall_correction(readings, phase_spans([phase_record(p) for p in phases]))
    return PlatformFit(fit, wall, tuple(windows), len(readings))


def with_platform(doc: Mapping[str, Any], platform: PlatformFit, rapl: FitResult,
                  source: Mapping[str, Any] | None) -> dict[str, Any]:
    """A profile fitted against the platform reading (`doc` built from its fit): marked so, with
    RAPL's own fit as its `rapl` section and the BMC's phase levels."""
    curve = rapl.curve
    points = [round(w, 3) for w in curve.as_points()]
    out = dict(doc)
    out["reading"] = "platform"
    out["rapl"] = {
        "idle_watts": points[0], "max_watts": points[-1], "points": points, "model": curve.model,
        "parameters": curve_parameters(curve), "fit_error_watts": round(rapl.error_watts, 3),
    }
    out["platform"] = {
        **(dict(source) if source else {}),
        "readings": platform.readings,
        "phases": [{"name": w.group, "utilization": round(w.utilization, 4), "watts": round(w.watts, 3)}
                   for w in platform.windows],
    }
    return out
