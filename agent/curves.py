"""Node power curves P(u), shared by calibration, the scheduler and the simulator.

u is CPU utilization in [0, 1]; P is watts. Three shapes, as DESIGN.md lists:
linear, Fan et al. (`P_idle + (P_max - P_idle)(2u - u^r)`), and 11 points at 0%, 10% … 100%
(SPECpower's load levels), interpolated linearly between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

POINT_COUNT = 11
UTILIZATION_LEVELS: tuple[float, ...] = tuple(i / 10 for i in range(POINT_COUNT))


def _clamp_unit(u: float) -> float:
    return 0.0 if u < 0.0 else 1.0 if u > 1.0 else u


@dataclass(frozen=True)
class PowerCurve:
    """A node's power as a function of CPU utilization."""

    model: str  # "linear" | "fan" | "points"
    idle_watts: float
    max_watts: float
    r: float = 1.4  # Fan et al.'s exponent; only used by "fan"
    points: tuple[float, ...] = ()  # 11 watts values; only used by "points"

    def __post_init__(self) -> None:
        if self.model not in ("linear", "fan", "points"):
            raise ValueError(f"unknown power curve model {self.model!r}")
        if self.model == "points" and len(self.points) != POINT_COUNT:
            raise ValueError(f"a points curve needs {POINT_COUNT} values, got {len(self.points)}")

    @classmethod
    def linear(cls, idle_watts: float, max_watts: float) -> PowerCurve:
        return cls("linear", float(idle_watts), float(max_watts))

    @classmethod
    def fan(cls, idle_watts: float, max_watts: float, r: float) -> PowerCurve:
        return cls("fan", float(idle_watts), float(max_watts), r=float(r))

    @classmethod
    def from_points(cls, points: Sequence[float]) -> PowerCurve:
        values = tuple(float(p) for p in points)
        if len(values) != POINT_COUNT:
            raise ValueError(f"a points curve needs {POINT_COUNT} values, got {len(values)}")
        return cls("points", values[0], values[-1], points=values)

    @classmethod
    def from_mapping(cls, spec: Mapping[str, Any]) -> PowerCurve:
        """Build from a node-group `power:` block or a calibration profile."""
        if spec.get("points") is not None and spec.get("model") in (None, "points", "piecewise"):
            return cls.from_points(spec["points"])
        model = spec.get("model", spec.get("curve", "linear"))
        idle = float(spec["idle_watts"])
        peak = float(spec["max_watts"])
        if model == "fan":
            return cls.fan(idle, peak, float(spec.get("r", 1.4)))
        if model == "linear":
            return cls.linear(idle, peak)
        if model in ("points", "piecewise"):
            return cls.from_points(spec["points"])
        raise ValueError(f"unknown power curve model {model!r}")

    def watts(self, utilization: float) -> float:
        u = _clamp_unit(utilization)
        if self.model == "linear":
            return self.idle_watts + (self.max_watts - self.idle_watts) * u
        if self.model == "fan":
            return self.idle_watts + (self.max_watts - self.idle_watts) * (2 * u - u**self.r)
        scaled = u * (POINT_COUNT - 1)
        low = min(int(scaled), POINT_COUNT - 2)
        frac = scaled - low
        return self.points[low] + (self.points[low + 1] - self.points[low]) * frac

    def as_points(self) -> tuple[float, ...]:
        """The curve sampled at 0%, 10% … 100%."""
        return tuple(self.watts(u) for u in UTILIZATION_LEVELS)
