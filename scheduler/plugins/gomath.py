"""Go's float rounding and float → int64 conversion on numpy arrays.

Peer plugins written in Go round with `math.Round` and convert with `int64(x)`; a score that
lands on .5 or a raw value near the int64 range must come out as it does there.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

INT64_MIN = np.iinfo(np.int64).min
_TWO_TO_63 = 2.0**63


def go_round(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Go's math.Round: to the nearest integer, halves away from zero (numpy's round goes to
    even). Exact: `x − trunc(x)` has no rounding error, unlike `floor(x + 0.5)` at
    0.49999999999999994."""
    x = np.asarray(values, dtype=np.float64)
    truncated = np.trunc(x)
    return np.where(np.abs(x - truncated) >= 0.5, truncated + np.sign(x), truncated)


def go_int64(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Go's int64(x) for a float64 on amd64: truncation toward zero; NaN and values outside the
    int64 range give math.MinInt64 (CVTTSD2SQ's "integer indefinite")."""
    x = np.asarray(values, dtype=np.float64)
    inside = np.isfinite(x) & (x > -_TWO_TO_63) & (x < _TWO_TO_63)
    out = np.full(x.shape, INT64_MIN, dtype=np.int64)
    out[inside] = np.trunc(x[inside]).astype(np.int64)
    return out
