"""Node power curves P(u), shared by calibration, the scheduler and the simulator.

u is CPU utilization in [0, 1]; P is watts. Three shapes, as DESIGN.md lists:
linear, Fan et al. (`P_idle + (P_max - P_idle)(2u - u^r)`), and 11 points at 0%, 10% … 100%
(SPECpower's load levels), interpolated linearly between them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, SupportsFloat

if TYPE_CHECKING:  # numpy is imported where the array functions run: the agent never needs it
    import numpy as np  # (about 20 MB of its RSS and a quarter second of its start-up)

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
    def from_mapping(cls, spec: Mapping[str, object]) -> PowerCurve:
        """Build from a node-group `power:` block or a power profile."""
        if spec.get("points") is not None and spec.get("model") in (None, "points", "piecewise"):
            return cls.from_points(_floats(spec["points"]))
        model = spec.get("model", spec.get("curve", "linear"))
        idle = _float(spec["idle_watts"])
        peak = _float(spec["max_watts"])
        if model == "fan":
            return cls.fan(idle, peak, _float(spec.get("r", 1.4)))
        if model == "linear":
            return cls.linear(idle, peak)
        if model in ("points", "piecewise"):
            return cls.from_points(_floats(spec["points"]))
        raise ValueError(f"unknown power curve model {model!r}")

    def watts(self, utilization: float) -> float:
        """P(u), u clamped to [0, 1]. `points_watts()` is the same for many curves at once."""
        u = _clamp_unit(utilization)
        if self.model == "linear":
            return self.idle_watts + (self.max_watts - self.idle_watts) * u
        if self.model == "fan":
            return self.idle_watts + (self.max_watts - self.idle_watts) * (2 * u - u**self.r)
        scaled = u * (POINT_COUNT - 1)
        low = min(int(scaled), POINT_COUNT - 2)
        frac = scaled - low
        return self.points[low] + (self.points[low + 1] - self.points[low]) * frac

    def extended_watts(self, utilization: float) -> float:
        """P(u), continued past u = 1 with the slope of the curve's last tenth (never negative).

        Demand beyond a node's cores still has to be served and costs at least the marginal
        power of a full node; without this a saturated node would look free."""
        if utilization <= 1.0:
            return self.watts(utilization)
        top = self.watts(1.0)
        return top + top_slope(top, self.watts(0.9)) * (utilization - 1.0)

    def as_points(self) -> tuple[float, ...]:
        """The curve sampled at 0%, 10% … 100%."""
        return tuple(self.watts(u) for u in UTILIZATION_LEVELS)


def _float(value: object) -> float:
    """`float(value)` for what float() reads (a number or its text); TypeError for anything else."""
    if isinstance(value, str | SupportsFloat):
        return float(value)
    raise TypeError(f"float() argument must be a string or a real number, not {type(value).__name__!r}")


def _floats(value: object) -> tuple[float, ...]:
    """Each item as `_float`; TypeError when `value` is not iterable."""
    if not isinstance(value, Iterable):
        raise TypeError(f"{type(value).__name__!r} object is not iterable")
    return tuple(_float(item) for item in value)


def top_slope(full_watts: float, ninety_watts: float) -> float:
    """Watts per unit of utilization past u = 1: the last tenth's slope, never negative."""
    slope = (full_watts - ninety_watts) * (POINT_COUNT - 1)
    return slope if slope > 0.0 else 0.0


def _per_row(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """A per-row array shaped to broadcast against `like` (rows, or rows × k)."""
    return values.reshape((-1,) + (1,) * (like.ndim - 1))


def points_watts(points: np.ndarray, utilization: np.ndarray) -> np.ndarray:
    """PowerCurve.extended_watts() row by row for curves given as their 11 points
    (`points`: rows × 11, `utilization`: one value per row, or rows × k values; may exceed 1).

    Up to u = 1 the points are interpolated linearly, as PowerCurve.watts() does for a points
    curve (linear curves are exactly their points); past it, the last tenth's slope.
    """
    import numpy as np

    u = np.asarray(utilization, dtype=np.float64)
    scaled = np.clip(u, 0.0, 1.0) * (POINT_COUNT - 1)
    low = np.minimum(scaled.astype(np.intp), POINT_COUNT - 2)
    rows = _per_row(np.arange(len(u)), u)
    below = points[rows, low]
    inside = below + (points[rows, low + 1] - below) * (scaled - low)
    slope = np.maximum((points[:, -1] - points[:, -2]) * (POINT_COUNT - 1), 0.0)
    beyond = _per_row(points[:, -1], u) + _per_row(slope, u) * (u - 1.0)
    return np.where(u > 1.0, beyond, inside)


def fan_watts(
    idle_watts: np.ndarray, max_watts: np.ndarray, r: np.ndarray, utilization: np.ndarray
) -> np.ndarray:
    """PowerCurve.extended_watts() row by row for Fan et al. curves (utilization: one value per
    row, or rows × k values)."""
    import numpy as np

    u = np.asarray(utilization, dtype=np.float64)
    idle_watts, max_watts, r = (_per_row(v, u) for v in (idle_watts, max_watts, r))
    span = max_watts - idle_watts

    def at(v: np.ndarray) -> np.ndarray:
        return idle_watts + span * (2 * v - v**r)

    inside = at(np.clip(u, 0.0, 1.0))
    top = at(np.ones_like(u))
    slope = np.maximum((top - at(np.full_like(u, 0.9))) * (POINT_COUNT - 1), 0.0)
    return np.where(u > 1.0, top + slope * (u - 1.0), inside)


CURVE_COLUMNS = ("curve_points", "curve_is_fan", "curve_fan_idle", "curve_fan_max", "curve_fan_r")


def curve_columns(curves: Sequence[PowerCurve | None]) -> dict[str, np.ndarray]:
    """Many nodes' power curves as arrays (CURVE_COLUMNS), one row per node, for
    `columns_watts()`. Points and linear curves become their 11 points; Fan et al. curves keep
    their exact formula. Rows without a curve (None) evaluate to 0 W: callers mask them."""
    import numpy as np

    count = len(curves)
    points = np.zeros((count, POINT_COUNT))
    is_fan = np.zeros(count, dtype=bool)
    fan = np.zeros((3, count))
    fan[2] = 1.0
    for i, curve in enumerate(curves):
        if curve is None:
            continue
        if curve.model == "fan":
            is_fan[i] = True
            fan[:, i] = (curve.idle_watts, curve.max_watts, curve.r)
        else:
            points[i] = curve.points if curve.model == "points" else curve.as_points()
    return {
        "curve_points": points,
        "curve_is_fan": is_fan,
        "curve_fan_idle": fan[0],
        "curve_fan_max": fan[1],
        "curve_fan_r": fan[2],
    }


def columns_watts(columns: Mapping[str, np.ndarray], utilization: np.ndarray) -> np.ndarray:
    """PowerCurve.extended_watts() of each row of `curve_columns()` (or any row subset of
    them) at that row's utilization (one value per row, or rows × k values)."""
    import numpy as np

    watts = points_watts(columns["curve_points"], utilization)
    is_fan = columns["curve_is_fan"]
    if is_fan.any():
        exact = fan_watts(
            columns["curve_fan_idle"], columns["curve_fan_max"], columns["curve_fan_r"], utilization
        )
        watts = np.where(_per_row(is_fan, watts), exact, watts)
    return watts
