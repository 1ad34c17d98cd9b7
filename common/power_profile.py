"""Power profiles (`--power-profile FILE`): schema `kubejoule.calibration/v1`.

`kubejoule-calibrate run` writes them; the agent loads one to use the node's measured static
power as idle power, and — on a node without RAPL — its power curve to estimate node power from
CPU utilization (source `estimated`). A hand-written file with only `idle_watts` is a valid
profile; every other field is optional, and checked when present. A bad field is an error that
names the field, never a silent default.

Fields (see docs/calibration.md):
  schema            "kubejoule.calibration/v1"
  idle_watts        static power at 0 % utilization, W (required)
  max_watts         power at 100 %, W
  points            11 watts values at 0 %, 10 % … 100 %
  model             linear | fan | points — the curve chosen; `parameters: {r: …}` for fan
  fit_error_watts   held-out RMS error of that curve, W
  wall_correction   {intercept_watts, slope}: wall watts = intercept + slope × RAPL watts
  reading           rapl (default) | platform: what the curve measures — RAPL's node power, or the
                    BMC's reading of the whole platform (`kubejoule-calibrate run --bmc-url`)
  rapl              with reading platform: the CPU side's own fit (idle_watts, points, model, …),
                    for the agent's idle split and for estimates on nodes without RAPL
  node, cpu_model, cores, rapl_zones, date, kubejoule_version, example, source, …
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from common.curves import POINT_COUNT, UTILIZATION_LEVELS, PowerCurve

SCHEMA = "kubejoule.calibration/v1"
MODELS = ("linear", "fan", "points")
READING_RAPL = "rapl"
READING_PLATFORM = "platform"
FAN_R_RANGE = (1.0, 2.0)


class PowerProfileError(ValueError):
    """A power profile that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class WallCorrection:
    """wall watts = intercept_watts + slope × RAPL (or estimated) node watts."""

    intercept_watts: float
    slope: float
    error_watts: float | None = None
    phases: int | None = None

    def wall_watts(self, node_watts: float) -> float:
        return self.intercept_watts + self.slope * node_watts

    def to_mapping(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "intercept_watts": round(self.intercept_watts, 4),
            "slope": round(self.slope, 6),
        }
        if self.error_watts is not None:
            out["error_watts"] = round(self.error_watts, 4)
        if self.phases is not None:
            out["phases"] = self.phases
        return out


@dataclass(frozen=True)
class PowerProfile:
    idle_watts: float
    curve: PowerCurve | None  # None when the file gives only idle_watts
    max_watts: float | None = None
    model: str | None = None
    fit_error_watts: float | None = None
    wall: WallCorrection | None = None
    node: str | None = None
    cpu_model: str | None = None
    cores: int | None = None
    example: bool = False
    path: str | None = None
    document: Mapping[str, object] = field(default_factory=dict)
    reading: str = READING_RAPL  # what the curve measures: RAPL's node power, or the whole platform
    rapl: PowerProfile | None = None  # with reading platform: the CPU side's own fit
    # A curve estimated from published coefficients, not measured: its provenance, e.g.
    # `ccf:aws:m5.xlarge` (common/cloud_estimates.py); None for a measured profile.
    estimate: str | None = None

    @property
    def cpu(self) -> PowerProfile | None:
        """The profile of the CPU side, which the agent splits by CPU time: this one when it was
        fitted against RAPL, a platform profile's `rapl` section otherwise (None without one)."""
        return self if self.reading == READING_RAPL else self.rapl

    @property
    def cpu_idle_watts(self) -> float | None:
        return self.cpu.idle_watts if self.cpu is not None else None

    @property
    def cpu_curve(self) -> PowerCurve | None:
        return self.cpu.curve if self.cpu is not None else None

    def estimate_cpu_watts(self, utilization: float) -> float | None:
        """The CPU side's power from its curve at this utilization (node power on a node
        without RAPL; GPUs add to it); None without such a curve."""
        return self.cpu.estimate_watts(utilization) if self.cpu is not None else None

    def estimate_watts(self, utilization: float) -> float | None:
        """Node power from the curve at this utilization; None without a curve."""
        if self.curve is None:
            return None
        return self.curve.watts(utilization)

    def model_points(self) -> tuple[tuple[float, float], ...]:
        """(utilization, watts) at 0 %, 10 % … 100 %, for `kubejoule_node_power_model_watts`."""
        if self.curve is None:
            return ()
        return tuple(zip(UTILIZATION_LEVELS, self.curve.as_points(), strict=True))

    def wall_watts(self, node_watts: float | None) -> float | None:
        if self.wall is None or node_watts is None:
            return None
        return self.wall.wall_watts(node_watts)


def _number(doc: Mapping[str, object], key: str, where: str, *, minimum: float | None = 0.0) -> float | None:
    if key not in doc or doc[key] is None:
        return None
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PowerProfileError(f"{where}: field '{key}' must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise PowerProfileError(f"{where}: field '{key}' must be finite, got {value!r}")
    if minimum is not None and number < minimum:
        raise PowerProfileError(f"{where}: field '{key}' must be at least {minimum:g}, got {value!r}")
    return number


def _points(doc: Mapping[str, object], where: str) -> tuple[float, ...] | None:
    raw = doc.get("points")
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != POINT_COUNT:
        got = f"{len(raw)} values" if isinstance(raw, list) else repr(raw)
        raise PowerProfileError(
            f"{where}: field 'points' must be a list of {POINT_COUNT} numbers "
            f"(watts at 0 %, 10 % … 100 %), got {got}"
        )
    values: list[float] = []
    for index, value in enumerate(raw):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise PowerProfileError(
                f"{where}: field 'points' item {index} ({10 * index} %) must be a non-negative number, got {value!r}"
            )
        values.append(float(value))
    return tuple(values)


def _wall(doc: Mapping[str, object], where: str) -> WallCorrection | None:
    raw = doc.get("wall_correction")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise PowerProfileError(f"{where}: field 'wall_correction' must be a mapping, got {raw!r}")
    inner = f"{where}: wall_correction"
    intercept = _number(raw, "intercept_watts", inner, minimum=None)
    slope = _number(raw, "slope", inner, minimum=None)
    if intercept is None or slope is None:
        missing = "intercept_watts" if intercept is None else "slope"
        raise PowerProfileError(f"{inner}: field '{missing}' is required")
    if slope <= 0:
        raise PowerProfileError(f"{inner}: field 'slope' must be positive, got {slope:g}")
    phases = raw.get("phases")
    return WallCorrection(
        intercept,
        slope,
        _number(raw, "error_watts", inner),
        phases if isinstance(phases, int) and not isinstance(phases, bool) else None,
    )


def _fan_r(doc: Mapping[str, object], where: str) -> float:
    parameters = doc.get("parameters") or {}
    if not isinstance(parameters, Mapping):
        raise PowerProfileError(f"{where}: field 'parameters' must be a mapping, got {parameters!r}")
    r = _number(parameters, "r", f"{where}: parameters") if "r" in parameters else _number(doc, "r", where)
    if r is None:
        raise PowerProfileError(f"{where}: model 'fan' needs 'parameters: {{r: …}}' (Fan et al.'s exponent)")
    low, high = FAN_R_RANGE
    if not low <= r <= high:
        raise PowerProfileError(f"{where}: field 'parameters.r' must be between {low:g} and {high:g}, got {r:g}")
    return r


def parse_power_profile(doc: object, where: str = "power profile") -> PowerProfile:
    """Validate a loaded YAML document and build the profile."""
    if not isinstance(doc, Mapping):
        raise PowerProfileError(f"{where}: expected a mapping of fields, got {type(doc).__name__}")
    schema = doc.get("schema")
    if schema is not None and schema != SCHEMA:
        raise PowerProfileError(f"{where}: field 'schema' must be {SCHEMA!r}, got {schema!r}")
    idle = _number(doc, "idle_watts", where)
    if idle is None:
        raise PowerProfileError(f"{where}: field 'idle_watts' is required (the node's static power in watts)")
    peak = _number(doc, "max_watts", where)
    if peak is not None and peak < idle:
        raise PowerProfileError(f"{where}: field 'max_watts' ({peak:g}) is below 'idle_watts' ({idle:g})")
    points = _points(doc, where)
    model = doc.get("model")
    if model is not None and model not in MODELS:
        raise PowerProfileError(f"{where}: field 'model' must be one of {', '.join(MODELS)}, got {model!r}")
    if model is None:
        model = "points" if points is not None else "linear" if peak is not None else None
    curve: PowerCurve | None = None
    if model == "points":
        if points is None:
            raise PowerProfileError(f"{where}: model 'points' needs the field 'points'")
        curve = PowerCurve.from_points(points)
    elif model in ("linear", "fan"):
        if peak is None:
            raise PowerProfileError(f"{where}: model {model!r} needs the field 'max_watts'")
        curve = PowerCurve.linear(idle, peak) if model == "linear" else PowerCurve.fan(idle, peak, _fan_r(doc, where))
    cores = doc.get("cores")
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
        raise PowerProfileError(f"{where}: field 'cores' must be a positive integer, got {cores!r}")
    example = doc.get("example", False)
    if not isinstance(example, bool):
        raise PowerProfileError(f"{where}: field 'example' must be true or false, got {example!r}")
    reading = doc.get("reading", READING_RAPL)
    if reading not in (READING_RAPL, READING_PLATFORM):
        raise PowerProfileError(f"{where}: field 'reading' must be {READING_RAPL} or {READING_PLATFORM}, got {reading!r}")
    rapl = None
    if doc.get("rapl") is not None:
        if reading != READING_PLATFORM:
            raise PowerProfileError(f"{where}: field 'rapl' belongs to a profile with 'reading: platform'")
        rapl = parse_power_profile({**doc["rapl"], "reading": READING_RAPL} if isinstance(doc["rapl"], Mapping)
                             else doc["rapl"], f"{where}: rapl")
    return PowerProfile(
        idle_watts=idle,
        curve=curve,
        max_watts=peak if peak is not None else (curve.watts(1.0) if curve is not None else None),
        model=model,
        fit_error_watts=_number(doc, "fit_error_watts", where),
        wall=_wall(doc, where),
        node=_optional_str(doc, "node", where),
        cpu_model=_optional_str(doc, "cpu_model", where),
        cores=cores,
        example=example,
        document=dict(doc),
        reading=reading,
        rapl=rapl,
    )


def _optional_str(doc: Mapping[str, object], key: str, where: str) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise PowerProfileError(f"{where}: field '{key}' must be text, got {value!r}")
    return str(value)


def load_power_profile(path: str | Path) -> PowerProfile:
    """Read and validate a profile file; PowerProfileError on any problem, naming file and field."""
    where = f"power profile {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PowerProfileError(f"{where}: cannot read it: {exc.strerror or exc}") from exc
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PowerProfileError(f"{where}: not valid YAML: {exc}") from exc
    profile = parse_power_profile(doc, where)
    return PowerProfile(**{**profile.__dict__, "path": str(path)})
