"""Grid carbon intensity (grams of CO2-equivalent per kWh) over time, and the grams an amount of
energy emitted: one implementation for the agent (`kubejoule_*_carbon_grams_total`) and the
benchmark (`carbon_g` per run).

An intensity is either a configured constant (`--carbon-intensity G_PER_KWH`) or a time series
from a CSV the user provides (`--carbon-intensity-csv PATH`, `load_intensity_csv`):

* Electricity Maps' exports (its data portal's hourly, daily… CSVs): the `Datetime (UTC)` column
  and `Carbon Intensity gCO₂eq/kWh (direct)` — or, with `basis="lca"`, the life-cycle column
  (`… (LCA)` or `… (life cycle assessment)`); the `Zone Id` names the zone;
* or a plain `timestamp,g_per_kwh` file: ISO 8601 times (no offset: UTC) or Unix seconds.

A row's value holds from its time until the next row, and for at most `max_age_s` seconds: past
that the series is stale, a gap. A row whose value is empty, not a number, negative or not finite
is a gap of its own (from its time to the next row), with its line in the reason — never the last
good value carried over it. Before the first row and after the last one's `max_age_s` the
intensity is unknown. A file that cannot be placed in time at all (no header found, a time that
does not parse, one time given twice) is refused as a whole: `CarbonIntensityError`.

`integral(t0, t1)` is ∫ intensity dt over [t0, t1] (g·s/kWh), `None` with the reason when any of
the interval is a gap: grams over an interval of known, constant power are
`joules / 3.6e6 × integral / (t1 − t0)` (`interval_grams`). Energy measured in an interval whose
intensity is unknown emits no grams: the counters hold, the reason is reported.
"""

from __future__ import annotations

import bisect
import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from common.kubetime import parse_time

JOULES_PER_KWH = 3.6e6
DEFAULT_MAX_AGE_S = 3600.0  # an hourly series: each value covers its hour
SOURCE_CONFIGURED = "configured"
SOURCE_CSV = "csv"
BASES = ("direct", "lca")

_EM_TIME = "datetime (utc)"
_EM_INTENSITY = "carbon intensity gco"  # "Carbon Intensity gCO₂eq/kWh (direct)" and its kin
_PLAIN_TIME = "timestamp"
_PLAIN_VALUE = "g_per_kwh"


class CarbonIntensityError(ValueError):
    """A carbon intensity that cannot be used at all (a bad value, an unreadable file)."""


@dataclass(frozen=True)
class Reading:
    """An intensity (g/kWh, or its integral over an interval) or, when unknown, why not."""

    value: float | None
    reason: str | None = None


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def interval_grams(joules: float | None, intensity: Reading, seconds: float) -> float | None:
    """Grams emitted by `joules` spent evenly over `seconds` whose intensity integral is
    `intensity` (`integral(t0, t1)`); None when either is unknown."""
    if joules is None or intensity.value is None:
        return None
    if seconds <= 0:
        return None
    return max(joules, 0.0) / JOULES_PER_KWH * intensity.value / seconds


@dataclass(frozen=True)
class ConstantIntensity:
    """One intensity at every time."""

    g_per_kwh: float
    source: str = SOURCE_CONFIGURED
    zone: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.g_per_kwh) and self.g_per_kwh >= 0):
            raise CarbonIntensityError(f"carbon intensity must be a finite number >= 0 g/kWh: {self.g_per_kwh!r}")

    def at(self, t: float) -> Reading:
        return Reading(self.g_per_kwh)

    def integral(self, t0: float, t1: float) -> Reading:
        return Reading(self.g_per_kwh * max(t1 - t0, 0.0))

    def start(self) -> float | None:
        return None


@dataclass(frozen=True)
class IntensitySeries:
    """A step series: `values[i]` (None: a gap, `reasons[i]` says why) from `times[i]` until
    `times[i + 1]`, for at most `max_age_s`. Times are Unix seconds, strictly increasing."""

    times: tuple[float, ...]
    values: tuple[float | None, ...]
    reasons: tuple[str, ...]
    max_age_s: float = DEFAULT_MAX_AGE_S
    source: str = SOURCE_CSV
    zone: str = ""
    name: str = ""  # the file, for reasons

    def __post_init__(self) -> None:
        if not self.times:
            raise CarbonIntensityError(f"{self.name or 'carbon intensity series'}: no rows")
        if not (len(self.times) == len(self.values) == len(self.reasons)):
            raise CarbonIntensityError("times, values and reasons differ in length")
        if any(b <= a for a, b in zip(self.times, self.times[1:], strict=False)):
            raise CarbonIntensityError("times must be strictly increasing")
        if not (self.max_age_s > 0 and math.isfinite(self.max_age_s)):
            raise CarbonIntensityError(f"--carbon-max-age must be a finite number > 0: {self.max_age_s!r}")

    def start(self) -> float:
        return self.times[0]

    def _end_of(self, i: int) -> float:
        """Where row i's value stops holding: the next row, or its time + max_age_s."""
        end = self.times[i] + self.max_age_s
        return min(end, self.times[i + 1]) if i + 1 < len(self.times) else end

    def _gap_reason(self, i: int, t: float) -> str | None:
        """Why the intensity at t (within row i's reach or past it) is unknown; None if known."""
        if i < 0:
            return f"no carbon intensity at {iso(t)}: {self.name or 'the series'} starts at {iso(self.times[0])}"
        if t >= self._end_of(i):
            return (
                f"carbon intensity stale at {iso(t)}: the last value ({iso(self.times[i])}) is older than "
                f"--carbon-max-age {self.max_age_s:g} s"
                + ("" if i + 1 < len(self.times) else f" ({self.name or 'the series'} ends there)")
            )
        if self.values[i] is None:
            return self.reasons[i]
        return None

    def at(self, t: float) -> Reading:
        i = bisect.bisect_right(self.times, t) - 1
        reason = self._gap_reason(i, t)
        return Reading(None, reason) if reason else Reading(self.values[i])

    def integral(self, t0: float, t1: float) -> Reading:
        """∫ intensity over [t0, t1] in g·s/kWh; unknown (with the first gap's reason) when any
        part of it is a gap."""
        if t1 <= t0:
            reading = self.at(t0)
            return Reading(0.0) if reading.value is not None else reading
        i = bisect.bisect_right(self.times, t0) - 1
        total, t = 0.0, t0
        while t < t1:
            reason = self._gap_reason(i, t)
            if reason:
                return Reading(None, reason)
            end = min(self._end_of(i), t1)
            value = self.values[i]
            assert value is not None  # no gap reason: a value
            total += value * (end - t)
            t = end
            if t < t1 and i + 1 < len(self.times) and self.times[i + 1] <= t:
                i += 1
        return Reading(total)


CarbonIntensity = ConstantIntensity | IntensitySeries


def _columns(header: Sequence[str], basis: str, name: str) -> tuple[int, int, int | None]:
    """(time column, intensity column, zone column or None) of a header."""
    lowered = [h.strip().lstrip("\ufeff").lower() for h in header]
    if _PLAIN_TIME in lowered and _PLAIN_VALUE in lowered:
        return lowered.index(_PLAIN_TIME), lowered.index(_PLAIN_VALUE), None
    if _EM_TIME in lowered:
        wanted = ("(direct)",) if basis == "direct" else ("(lca)", "(life cycle assessment)")
        for i, column in enumerate(lowered):
            if column.startswith(_EM_INTENSITY) and column.endswith(wanted):
                zone = lowered.index("zone id") if "zone id" in lowered else None
                return lowered.index(_EM_TIME), i, zone
        raise CarbonIntensityError(
            f"{name}: an Electricity Maps export without a 'Carbon Intensity gCO₂eq/kWh {wanted[0]}' column"
        )
    raise CarbonIntensityError(
        f"{name}: no header found: expected Electricity Maps' 'Datetime (UTC)' and 'Carbon Intensity "
        "gCO₂eq/kWh (direct)' columns, or 'timestamp,g_per_kwh'"
    )


def _value(text: str, line: int, name: str) -> tuple[float | None, str]:
    """A row's intensity, or None and why it is a gap."""
    where = f"line {line} of {name}"
    text = text.strip()
    if not text:
        return None, f"no carbon intensity at {where} (empty value)"
    try:
        value = float(text)
    except ValueError:
        return None, f"no carbon intensity at {where}: not a number {text!r}"
    if not math.isfinite(value):
        return None, f"no carbon intensity at {where}: not finite {text!r}"
    if value < 0:
        return None, f"no carbon intensity at {where}: negative value {value:g} g/kWh"
    return value, ""


def parse_intensity_csv(
    text: str, name: str = "carbon intensity CSV", basis: str = "direct", max_age_s: float = DEFAULT_MAX_AGE_S
) -> IntensitySeries:
    """The series in a CSV's text (module docstring). CarbonIntensityError for a file that cannot
    be placed in time; rows with bad values are gaps with their reason."""
    if basis not in BASES:
        raise CarbonIntensityError(f"unknown carbon intensity basis {basis!r}; known: {', '.join(BASES)}")
    rows = [(number, row) for number, row in enumerate(csv.reader(text.splitlines()), start=1) if any(c.strip() for c in row)]
    if not rows:
        raise CarbonIntensityError(f"{name}: empty")
    (_, header), body = rows[0], rows[1:]
    time_col, value_col, zone_col = _columns(header, basis, name)
    points: dict[float, tuple[float | None, str]] = {}
    zones: set[str] = set()
    for line, row in body:
        if len(row) <= max(time_col, value_col):
            raise CarbonIntensityError(f"{name}: line {line} has {len(row)} columns, the header {len(header)}")
        try:
            t = parse_time(row[time_col])
        except ValueError:
            raise CarbonIntensityError(f"{name}: line {line}: not a time: {row[time_col]!r}") from None
        if t in points:
            raise CarbonIntensityError(f"{name}: line {line}: {iso(t)} is given twice")
        points[t] = _value(row[value_col], line, name)
        if zone_col is not None and zone_col < len(row) and row[zone_col].strip():
            zones.add(row[zone_col].strip())
    if not points:
        raise CarbonIntensityError(f"{name}: a header and no rows")
    if len(zones) > 1:
        raise CarbonIntensityError(f"{name}: rows of several zones ({', '.join(sorted(zones))}): give one zone's file")
    times = sorted(points)
    return IntensitySeries(
        tuple(times), tuple(points[t][0] for t in times), tuple(points[t][1] for t in times),
        max_age_s=max_age_s, zone=next(iter(zones), ""), name=name,
    )


def load_intensity_csv(path: Path | str, basis: str = "direct", max_age_s: float = DEFAULT_MAX_AGE_S) -> IntensitySeries:
    """The series in a CSV file; CarbonIntensityError (with the reason) if it cannot be read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CarbonIntensityError(f"cannot read carbon intensity CSV {path}: {exc}") from None
    return parse_intensity_csv(text, path.name, basis, max_age_s)
