"""common/curves.py: the vectorized curve evaluation equals PowerCurve.extended_watts()."""

from __future__ import annotations

import numpy as np
import pytest

from common.curves import PowerCurve, columns_watts, curve_columns

CURVES = [
    PowerCurve.linear(100, 200),
    PowerCurve.fan(80, 250, 1.4),
    PowerCurve.from_points([86, 89.4, 92.6, 96, 99.5, 102, 106, 108, 112, 114, 117]),
    PowerCurve.from_points([100, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90]),  # falling: no slope past 1
]
UTILIZATIONS = [0.0, 0.05, 0.1, 0.37, 0.9, 0.999, 1.0, 1.25, 3.0, -0.2]


@pytest.mark.parametrize("u", UTILIZATIONS)
def test_columns_equal_the_scalar_curve(u: float) -> None:
    columns = curve_columns([*CURVES, None])
    got = columns_watts(columns, np.full(len(CURVES) + 1, u))
    want = [curve.extended_watts(u) for curve in CURVES]
    np.testing.assert_allclose(got[:-1], want, rtol=1e-12)
    assert got[-1] == 0.0  # no curve


def test_extended_watts_by_hand() -> None:
    line = PowerCurve.linear(100, 200)
    assert line.extended_watts(0.5) == 150.0
    assert line.extended_watts(1.5) == pytest.approx(250.0)  # slope 100 W per unit past 1
    assert CURVES[3].extended_watts(2.0) == 90.0  # a falling top never makes more load cheaper


def test_columns_at_many_utilizations_per_row_equal_one_at_a_time() -> None:
    """rows × k utilizations (the energy plugin's worst-state search) give exactly what k calls
    with one utilization per row give."""
    columns = curve_columns([*CURVES, None])
    rng = np.random.default_rng(5)
    grid = rng.uniform(-0.3, 2.5, size=(len(CURVES) + 1, 7))
    together = columns_watts(columns, grid)
    assert together.shape == grid.shape
    for k in range(grid.shape[1]):
        np.testing.assert_array_equal(together[:, k], columns_watts(columns, grid[:, k]))
