"""Fitting power curves to measured windows and choosing one by held-out error."""

from __future__ import annotations

import random

import numpy as np
import pytest

from agent.calibration.fit import FitError, Window, fit_fan, fit_points, hat_basis, select_model
from common.curves import PowerCurve

# SPECpower_ssj2008 average active power of an IBM System x3550 with two Xeon X5675
# (agent/power_profiles/ibm-x3550-m3-xeon-x5675.yaml): a steep first step no smooth model follows.
SPEC_POINTS = [58.4, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222]
LEVELS = [i / 10 for i in range(11)]


def windows_from(curve: PowerCurve, levels: list[float], per_level: int = 5, noise_watts: float = 0.5,
                 jitter: float = 0.02, seed: int = 1) -> list[Window]:
    rng = random.Random(seed)
    out = []
    for index, level in enumerate(levels):
        for _ in range(per_level):
            u = min(1.0, max(0.0, level + rng.gauss(0.0, jitter)))
            out.append(Window(u, curve.watts(u) + rng.gauss(0.0, noise_watts), 0.5, f"level-{index}"))
    return out


def max_point_error(fitted: PowerCurve, true: PowerCurve) -> float:
    return max(abs(a - b) / b for a, b in zip(fitted.as_points(), true.as_points(), strict=True))


@pytest.mark.parametrize(
    ("true", "expected_model"),
    [
        (PowerCurve.fan(40.0, 120.0, 1.7), "fan"),
        (PowerCurve.linear(30.0, 90.0), "linear"),
        (PowerCurve.from_points(SPEC_POINTS), "points"),
    ],
)
def test_each_shape_is_recovered_by_its_own_model(true: PowerCurve, expected_model: str) -> None:
    result = select_model(windows_from(true, LEVELS))
    assert result.chosen.model == expected_model, result.reason
    assert max_point_error(result.curve, true) < 0.02
    assert result.error_watts == result.chosen.heldout_rmse_watts
    # held-out error is honest: never below the in-sample error of the same model
    for fit in result.fits.values():
        assert fit.heldout_rmse_watts is not None
        assert fit.heldout_rmse_watts >= fit.insample_rmse_watts - 1e-9


def test_fan_fit_finds_the_exponent_and_its_end_points() -> None:
    true = PowerCurve.fan(35.0, 140.0, 1.45)
    u = np.linspace(0.0, 1.0, 41)
    curve = fit_fan(u, np.array([true.watts(x) for x in u]), np.ones_like(u))
    assert curve.r == pytest.approx(1.45, abs=0.006)
    assert curve.idle_watts == pytest.approx(35.0, rel=1e-3)
    assert curve.max_watts == pytest.approx(140.0, rel=1e-3)


def test_points_fit_fills_levels_without_data_smoothly() -> None:
    # data only at 0 %, 50 % and 100 %: the levels between follow from the neighbours
    u = np.array([0.0, 0.0, 0.5, 0.5, 1.0, 1.0])
    straight = fit_points(u, 50.0 + 60.0 * u, np.ones_like(u)).as_points()
    assert straight == pytest.approx([50.0 + 6.0 * i for i in range(11)], rel=1e-3)
    kinked = fit_points(u, np.array([50.0, 50.0, 90.0, 90.0, 110.0, 110.0]), np.ones_like(u)).as_points()
    assert kinked[0] == pytest.approx(50.0, rel=1e-3)
    assert kinked[5] == pytest.approx(90.0, rel=1e-3)
    assert kinked[10] == pytest.approx(110.0, rel=1e-3)
    assert all(b > a for a, b in zip(kinked, kinked[1:], strict=False))  # no wiggles


def test_hat_basis_rows_interpolate_between_neighbouring_levels() -> None:
    basis = hat_basis(np.array([0.0, 0.25, 1.0, 1.3]))
    assert basis.sum(axis=1) == pytest.approx([1.0, 1.0, 1.0, 1.0])
    assert basis[1, 2] == pytest.approx(0.5) and basis[1, 3] == pytest.approx(0.5)
    assert basis[2, 10] == 1.0 and basis[3, 10] == 1.0  # clamped to 100 %


def test_a_simpler_model_wins_when_it_is_as_good() -> None:
    # a nearly linear fan curve: the fan model gains nothing worth its parameter
    result = select_model(windows_from(PowerCurve.fan(40.0, 100.0, 1.02), LEVELS, noise_watts=1.0))
    assert result.chosen.model == "linear"
    assert "simpler" in result.reason or "lowest" in result.reason


def test_too_few_phases_to_hold_one_out_use_the_simplest_model() -> None:
    result = select_model(windows_from(PowerCurve.linear(30.0, 90.0), [0.0, 1.0]))
    assert result.chosen.model == "linear"
    assert result.chosen.heldout_rmse_watts is None
    assert "too few" in result.reason


def test_no_spread_in_utilization_is_an_error_not_a_curve() -> None:
    flat = windows_from(PowerCurve.linear(30.0, 90.0), [0.5, 0.55, 0.6])
    with pytest.raises(FitError, match="only spans"):
        select_model(flat)
    with pytest.raises(FitError, match="no measured windows"):
        select_model([])
