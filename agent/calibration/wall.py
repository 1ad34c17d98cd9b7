"""A linear RAPL-to-wall correction, fitted from a wall power meter's readings.

RAPL sees the CPU packages and DRAM; the wall sees the whole box (fans, disks, NICs, power
supply losses). A PDU, IPMI (`ipmitool dcmi power reading`) or Redfish (`PowerControl`) export
logged while the calibration runs gives, per calibration phase, the mean wall watts next to the
mean RAPL watts; `wall = intercept + slope × rapl` is fitted to those pairs.

CSV format: `timestamp,watts`, one reading per row, an optional header row. A timestamp is Unix
seconds or ISO 8601; an ISO time without an offset is read as the calibrating host's local time.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from common.kubetime import parse_time
from common.power_profile import WallCorrection

MIN_PHASES = 2
EDGE_SECONDS = 1.0  # at most this much of each phase's start is skipped


class WallMeterError(ValueError):
    """The CSV cannot be used; the message names the line or the reason."""


@dataclass(frozen=True)
class WallReading:
    timestamp: float  # Unix seconds
    watts: float


@dataclass(frozen=True)
class PhaseSpan:
    """A calibration phase: its wall-clock bounds and its mean RAPL watts."""

    name: str
    start: float
    end: float
    rapl_watts: float


def read_wall_csv(path: Path, allow_empty: bool = False) -> list[WallReading]:
    """Readings sorted by time; `allow_empty` for a log that is only about to be written."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except OSError as exc:
        raise WallMeterError(f"cannot read wall meter CSV {path}: {exc.strerror or exc}") from exc
    return parse_wall_rows(rows, str(path), allow_empty)


def parse_wall_rows(
    rows: Iterable[Sequence[str]], source: str = "CSV", allow_empty: bool = False
) -> list[WallReading]:
    readings: list[WallReading] = []
    header_seen = False
    for number, row in enumerate(rows, start=1):
        cells = [c.strip() for c in row]
        if not cells or all(not c for c in cells) or cells[0].startswith("#"):
            continue
        if len(cells) < 2:
            raise WallMeterError(f"{source} line {number}: expected `timestamp,watts`, got {','.join(cells)!r}")
        try:
            timestamp = parse_time(cells[0], naive_is_utc=False)  # naive: local time
            watts = float(cells[1])
        except ValueError:
            if not readings and not header_seen:
                header_seen = True  # one header row, before any reading
                continue
            raise WallMeterError(
                f"{source} line {number}: cannot read {cells[0]!r},{cells[1]!r} as timestamp,watts"
            ) from None
        if not math.isfinite(watts) or watts < 0:
            raise WallMeterError(f"{source} line {number}: watts must be a non-negative number, got {cells[1]!r}")
        readings.append(WallReading(timestamp, watts))
    if not readings and not allow_empty:
        raise WallMeterError(f"{source} has no readings")
    readings.sort(key=lambda r: r.timestamp)
    return readings


def phase_means(readings: Sequence[WallReading], phases: Sequence[PhaseSpan]) -> list[tuple[PhaseSpan, float]]:
    """Each phase the readings cover, with their mean. A meter's reading describes the time before
    its timestamp (an average over its own period), so readings in the first fifth of a phase (at
    most `EDGE_SECONDS`) are left out: they may still hold the previous load level."""
    means = []
    for phase in phases:
        begin = phase.start + min(EDGE_SECONDS, 0.2 * (phase.end - phase.start))
        inside = [r.watts for r in readings if begin <= r.timestamp <= phase.end]
        if inside:
            means.append((phase, sum(inside) / len(inside)))
    return means


def fit_wall_correction(readings: Sequence[WallReading], phases: Sequence[PhaseSpan]) -> WallCorrection:
    """Fit wall = intercept + slope × rapl over the phases the readings cover (`phase_means`)."""
    pairs = [(phase.rapl_watts, watts) for phase, watts in phase_means(readings, phases)]
    if len(pairs) < MIN_PHASES:
        first, last = readings[0].timestamp, readings[-1].timestamp
        began = min(p.start for p in phases) if phases else float("nan")
        ended = max(p.end for p in phases) if phases else float("nan")
        raise WallMeterError(
            f"only {len(pairs)} calibration phase(s) overlap the wall meter's readings "
            f"(readings {_iso(first)} – {_iso(last)}, calibration {_iso(began)} – {_iso(ended)}); "
            "check the meter's clock and time zone, and log it during the whole calibration"
        )
    rapl = np.array([p[0] for p in pairs])
    wall = np.array([p[1] for p in pairs])
    if float(np.ptp(rapl)) <= 0:
        raise WallMeterError("the RAPL power did not vary across the phases the wall meter covers")
    design = np.column_stack([np.ones_like(rapl), rapl])
    (intercept, slope), *_ = np.linalg.lstsq(design, wall, rcond=None)
    residual = wall - design @ np.array([intercept, slope])
    return WallCorrection(
        intercept_watts=float(intercept),
        slope=float(slope),
        error_watts=float(np.sqrt(np.mean(residual**2))),
        phases=len(pairs),
    )


def _iso(timestamp: float) -> str:
    if not math.isfinite(timestamp):
        return "?"
    return datetime.fromtimestamp(timestamp).isoformat(timespec="seconds")
