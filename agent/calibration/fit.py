"""Power curves P(u) fitted to measured windows, and one chosen by held-out error.

Three models, evaluated through `common.curves.PowerCurve` so the agent, the scheduler and the
simulator read a fitted curve exactly as it was judged here:

- linear: `P = a + b·u`, weighted least squares;
- Fan et al.: `P = P_idle + (P_max − P_idle)(2u − u^r)`; for each r on a grid the two watts
  parameters are a linear least-squares problem, so r is fitted by scanning;
- points: 11 values at 0 %, 10 % … 100 %, linear between them (a hat basis), with a small
  second-difference penalty so a level without data is interpolated from its neighbours instead of
  left undetermined.

Selection is by leave-one-group-out error: each phase of the calibration (an idle attempt, a load
step) is held out in turn, the model fitted on the rest predicts it. Among models whose held-out
error is within a tolerance of the best, the simplest wins: a points curve must earn its 11
parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from common.curves import POINT_COUNT, PowerCurve

Array = NDArray[np.float64]

MODELS: tuple[str, ...] = ("linear", "fan", "points")  # simplest first
FAN_R_MIN = 1.0  # r = 1 is the linear curve
FAN_R_MAX = 2.0  # beyond 2, 2u − u^r falls before u = 1: power would drop at full load
FAN_R_GRID: Array = np.linspace(FAN_R_MIN, FAN_R_MAX, 201)
POINTS_SMOOTHING = 1e-3  # penalty weight relative to the mean data weight per level
MIN_GROUPS_FOR_SELECTION = 3
MIN_UTILIZATION_SPAN = 0.2


class FitError(ValueError):
    """The windows cannot give a curve; the message says why."""


@dataclass(frozen=True)
class Window:
    """One measured interval: mean utilization and node watts over `seconds`."""

    utilization: float
    watts: float
    seconds: float
    group: str  # the calibration phase it belongs to ("idle-1", "step-04"); held out together
    start: float = 0.0  # wall-clock bounds (time.time()), to match a wall meter's readings
    end: float = 0.0
    target: float | None = None  # the load level the generator aimed at, if any


def arrays(windows: Sequence[Window]) -> tuple[Array, Array, Array]:
    u = np.array([w.utilization for w in windows], dtype=float)
    p = np.array([w.watts for w in windows], dtype=float)
    weight = np.array([w.seconds for w in windows], dtype=float)
    return u, p, weight


def _weighted_lstsq(design: Array, p: Array, weight: Array) -> tuple[Array, float]:
    """Coefficients and the weighted sum of squared residuals."""
    root = np.sqrt(weight)
    solution, *_ = np.linalg.lstsq(design * root[:, None], p * root, rcond=None)
    coef = np.asarray(solution, dtype=float)
    residual = p - design @ coef
    return coef, float(np.sum(weight * residual**2))


def fit_linear(u: Array, p: Array, weight: Array) -> PowerCurve:
    design = np.column_stack([np.ones_like(u), u])
    (idle, slope), _ = _weighted_lstsq(design, p, weight)
    return PowerCurve.linear(idle, idle + slope)


def fit_fan(u: Array, p: Array, weight: Array) -> PowerCurve:
    best: tuple[float, float, float, float] | None = None  # (sse, r, idle, span)
    for r in FAN_R_GRID:
        design = np.column_stack([np.ones_like(u), 2 * u - u**r])
        (idle, span), sse = _weighted_lstsq(design, p, weight)
        if best is None or sse < best[0]:
            best = (sse, float(r), float(idle), float(span))
    assert best is not None
    _, r, idle, span = best
    return PowerCurve.fan(idle, idle + span, r)


def hat_basis(u: Array) -> Array:
    """Row i holds the weights of the 11 levels whose linear interpolation gives P(u_i)."""
    scaled = np.clip(u, 0.0, 1.0) * (POINT_COUNT - 1)
    low = np.minimum(np.floor(scaled).astype(int), POINT_COUNT - 2)
    frac = scaled - low
    basis = np.zeros((len(u), POINT_COUNT))
    rows = np.arange(len(u))
    basis[rows, low] = 1.0 - frac
    basis[rows, low + 1] = frac
    return basis


def fit_points(u: Array, p: Array, weight: Array) -> PowerCurve:
    basis = hat_basis(u)
    gram = basis.T @ (basis * weight[:, None])
    rhs = basis.T @ (weight * p)
    second_diff = np.zeros((POINT_COUNT - 2, POINT_COUNT))
    for i in range(POINT_COUNT - 2):
        second_diff[i, i : i + 3] = (1.0, -2.0, 1.0)
    penalty = POINTS_SMOOTHING * max(float(np.trace(gram)) / POINT_COUNT, 1e-12)
    values = np.linalg.solve(gram + penalty * second_diff.T @ second_diff, rhs)
    return PowerCurve.from_points([float(v) for v in values])


FITTERS: dict[str, Callable[[Array, Array, Array], PowerCurve]] = {
    "linear": fit_linear,
    "fan": fit_fan,
    "points": fit_points,
}


def predict(curve: PowerCurve, u: Array) -> Array:
    return np.array([curve.watts(float(x)) for x in u], dtype=float)


def weighted_rmse(curve: PowerCurve, u: Array, p: Array, weight: Array) -> float:
    residual = p - predict(curve, u)
    return float(np.sqrt(np.sum(weight * residual**2) / np.sum(weight)))


@dataclass(frozen=True)
class ModelFit:
    model: str
    curve: PowerCurve  # fitted on every window
    heldout_rmse_watts: float | None  # None when there were too few groups to hold one out
    insample_rmse_watts: float


@dataclass(frozen=True)
class FitResult:
    chosen: ModelFit
    fits: dict[str, ModelFit]
    groups: int
    reason: str  # why this model, in words

    @property
    def curve(self) -> PowerCurve:
        return self.chosen.curve

    @property
    def error_watts(self) -> float:
        """The chosen model's held-out error where known, else its in-sample error."""
        held = self.chosen.heldout_rmse_watts
        return held if held is not None else self.chosen.insample_rmse_watts


def heldout_rmse(model: str, windows: Sequence[Window]) -> float:
    """Leave one group out: fit on the others, predict the one left out; RMSE over all."""
    fitter = FITTERS[model]
    groups = sorted({w.group for w in windows})
    squared = 0.0
    total_weight = 0.0
    for group in groups:
        train = [w for w in windows if w.group != group]
        test = [w for w in windows if w.group == group]
        curve = fitter(*arrays(train))
        u, p, weight = arrays(test)
        squared += float(np.sum(weight * (p - predict(curve, u)) ** 2))
        total_weight += float(np.sum(weight))
    return float(np.sqrt(squared / total_weight))


def check_coverage(windows: Sequence[Window]) -> None:
    if not windows:
        raise FitError("no measured windows: every interval had a gap")
    u = [w.utilization for w in windows]
    if max(u) - min(u) < MIN_UTILIZATION_SPAN:
        raise FitError(
            f"the measured utilization only spans {100 * min(u):.0f}–{100 * max(u):.0f} %: the load "
            "could not be varied (is the calibration confined to a few CPUs by a cgroup limit?)"
        )


def select_model(
    windows: Sequence[Window], models: Sequence[str] = MODELS, tolerance: float = 0.05
) -> FitResult:
    """Fit every model and choose by held-out error, preferring the simpler within `tolerance`.

    `tolerance` is relative: a simpler model wins when its held-out error is at most
    (1 + tolerance) times the best one's.
    """
    check_coverage(windows)
    unknown = [m for m in models if m not in FITTERS]
    if unknown:
        raise FitError(f"unknown model(s): {', '.join(unknown)}")
    ordered = [m for m in MODELS if m in models]
    u, p, weight = arrays(windows)
    groups = len({w.group for w in windows})
    can_hold_out = groups >= MIN_GROUPS_FOR_SELECTION
    fits: dict[str, ModelFit] = {}
    for model in ordered:
        curve = FITTERS[model](u, p, weight)
        fits[model] = ModelFit(
            model=model,
            curve=curve,
            heldout_rmse_watts=heldout_rmse(model, windows) if can_hold_out else None,
            insample_rmse_watts=weighted_rmse(curve, u, p, weight),
        )
    if not can_hold_out:
        chosen = fits[ordered[0]]
        reason = (
            f"only {groups} calibration phase(s): too few to hold one out, so the simplest "
            f"model ({chosen.model}) is used"
        )
        return FitResult(chosen, fits, groups, reason)
    best = min(fits.values(), key=lambda f: f.heldout_rmse_watts or 0.0)
    best_error = best.heldout_rmse_watts or 0.0
    chosen = next(f for f in fits.values() if (f.heldout_rmse_watts or 0.0) <= best_error * (1 + tolerance))
    if chosen is best:
        reason = f"{chosen.model} has the lowest held-out error ({best_error:.2f} W)"
    else:
        reason = (
            f"{chosen.model} is within {100 * tolerance:.0f} % of the lowest held-out error "
            f"({chosen.heldout_rmse_watts:.2f} W vs {best.model} {best_error:.2f} W) and simpler"
        )
    return FitResult(chosen, fits, groups, reason)
