"""The power profile written by `kubejoule-calibrate run` (schema `kubejoule.calibration/v1`).

The document holds what the agent needs (idle_watts, the curve, the wall correction) and what a
reader needs to judge it: every model's held-out error, why one was chosen, the measured phases
with their wall-clock bounds (so a wall meter's log can be fitted later with
`kubejoule-calibrate wall`), the RAPL zones used, the settings, the date and the version.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from agent.calibration.fit import FitResult
from agent.calibration.measure import Phase
from agent.calibration.wall import PhaseSpan
from agent.device.hostfs import HostFS
from common.curves import PowerCurve
from common.power_profile import SCHEMA, WallCorrection

HEADER = (
    "# kubejoule power profile, written by `kubejoule-calibrate run`.\n"
    "# Use it with `kubejoule-agent run --power-profile FILE`. Format: docs/calibration.md\n"
)


def kubejoule_version() -> str:
    try:
        return metadata.version("kubejoule")
    except metadata.PackageNotFoundError:
        return "unknown"


def cpu_model(fs: HostFS) -> str | None:
    try:
        text = fs.read_text(fs.proc("cpuinfo"))
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return None


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def curve_parameters(curve: PowerCurve) -> dict[str, float]:
    return {"r": round(curve.r, 4)} if curve.model == "fan" else {}


def phase_record(phase: Phase) -> dict[str, Any]:
    return {
        "name": phase.group,
        "target": phase.target,
        "utilization": _round(phase.utilization, 4),
        "watts": _round(phase.watts),
        "seconds": _round(phase.seconds, 2),
        "start": _round(phase.windows[0].start, 3) if phase.windows else None,
        "end": _round(phase.windows[-1].end, 3) if phase.windows else None,
        "windows": len(phase.windows),
        "gaps": len(phase.gaps),
        "used": phase.used,  # in the fit (steady); unsteady attempts are kept for the record
        **({"problem": phase.problem} if phase.problem else {}),
    }


def phase_spans(phases: Sequence[Mapping[str, Any]]) -> list[PhaseSpan]:
    """The steady phases of a written profile (or of phase_record()s) as wall-meter spans."""
    spans = []
    for phase in phases:
        if phase.get("start") is None or phase.get("end") is None or phase.get("watts") is None:
            continue
        if phase.get("used") is False:
            continue  # an unsteady phase has no single level to pair with the wall
        spans.append(PhaseSpan(str(phase["name"]), float(phase["start"]), float(phase["end"]), float(phase["watts"])))
    return spans


def build_profile(
    *,
    node: str,
    fs: HostFS,
    cores: int | None,
    fit: FitResult,
    idle_phases: Sequence[Phase],
    steps: Sequence[Phase],
    node_power: str,
    zones: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any],
    quiet_utilization: float,
    wall: WallCorrection | None = None,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    curve = fit.curve
    points = [round(w, 3) for w in curve.as_points()]
    measured_idle = [p for p in idle_phases if p.utilization is not None]
    quietest = min(measured_idle, key=lambda p: p.utilization or 0.0) if measured_idle else None
    lowest_u = min(  # the quietest phase the fit used
        (p.utilization for p in (*idle_phases, *steps) if p.used and p.utilization is not None), default=None
    )
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "node": node,
        "cpu_model": cpu_model(fs),
        "cores": cores,
        "idle_watts": points[0],
        "max_watts": points[-1],
        "points": points,
        "model": curve.model,
        "parameters": curve_parameters(curve),
        "fit_error_watts": round(fit.error_watts, 3),
        "fits": {
            name: {
                "heldout_error_watts": _round(result.heldout_rmse_watts),
                "insample_error_watts": _round(result.insample_rmse_watts),
                **({"parameters": curve_parameters(result.curve)} if name == "fan" else {}),
            }
            for name, result in fit.fits.items()
        },
        "selection": fit.reason,
        "idle": {
            "measured_watts": _round(quietest.watts) if quietest else None,
            "utilization": _round(quietest.utilization, 4) if quietest else None,
            "seconds": _round(quietest.seconds, 2) if quietest else None,
            "attempts": len(idle_phases),
            "extrapolated": lowest_u is None or lowest_u > quiet_utilization,
        },
        "rapl_zones": [dict(z) for z in zones],
        "node_power": node_power,
        "phases": [phase_record(p) for p in (*idle_phases, *steps)],
        "settings": dict(settings),
        "date": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
        "kubejoule_version": kubejoule_version(),
    }
    if wall is not None:
        doc["wall_correction"] = wall.to_mapping()
    return doc


def write_profile(doc: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = HEADER + yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=None, width=100)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
