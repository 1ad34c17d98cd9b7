"""The energy plugin's prices over curve columns (`common.curves.curve_columns`), one row per
node: the consolidation price and its amortized rate, and the worst-case price of a node whose
utilization is not known. The formulas and their
reasoning are in `scheduler.plugins.energy`'s docstring; the autoscaler expander
(`scheduler.decisions.expansion`) prices node groups with the same functions, on one row.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from common.curves import POINT_COUNT, columns_watts

Columns = Mapping[str, np.ndarray]

# The utilization grid of amortized rates: 10 %, 20 % … 100 % (the curves' own points).
RATE_GRID = np.arange(1, POINT_COUNT) / (POINT_COUNT - 1)
# The curves' breakpoints: 0 %, 10 % … 100 %.
BREAKPOINTS = np.arange(POINT_COUNT) / (POINT_COUNT - 1)


def average_rates(cols: Columns) -> np.ndarray:
    """For every row (rows × 10), the least P(v) / v — watts per unit of utilization — over
    v = 10 % … the grid point: a running minimum along the grid, so that amortized_rate() reads
    a minimum up to any load with one look-up (pod-independent: computed once per node)."""
    count = len(cols["curve_points"])
    if not count:
        return np.zeros((0, len(RATE_GRID)))
    # One call over rows × grid (element for element the same arithmetic as a call per point).
    rates = columns_watts(cols, np.broadcast_to(RATE_GRID, (count, len(RATE_GRID)))) / RATE_GRID
    return np.minimum.accumulate(rates, axis=1)


def amortized_rate(cols: Columns, rates: np.ndarray, up_to: np.ndarray) -> np.ndarray:
    """a_n = min over 0 < v ≤ up_to of P(v) / v per row (`rates` from average_rates(), up_to >
    0). Exact for piecewise-linear curves: on a segment P = a + b·v, P / v is monotone, so the
    minimum is at a grid point or at the bound itself."""
    last = np.searchsorted(RATE_GRID, up_to + 1e-12, side="right") - 1  # the last grid point ≤ up_to
    rate = np.where(last >= 0, rates[np.arange(len(up_to)), np.maximum(last, 0)], np.inf)
    return np.minimum(rate, columns_watts(cols, up_to) / up_to)


def consolidation_price(
    cols: Columns, rates: np.ndarray, u_ref: float, delta_u: np.ndarray, marginal: np.ndarray,
    empty: np.ndarray,
) -> np.ndarray:
    """The pod's share Δu × a_n (a_n up to max(u_ref, Δu)) on an empty node; on a running one its
    marginal watts, capped at that share."""
    share = delta_u * amortized_rate(cols, rates, np.maximum(u_ref, delta_u))
    return np.where(empty, share, np.minimum(marginal, share))


def worst_marginal_watts(cols: Columns, delta_u: np.ndarray) -> np.ndarray:
    """max over u ≥ 0 of P(u + Δu) − P(u) per row: the marginal watts of the load step at the
    worst utilization the node could be at.

    For a piecewise-linear curve (continued past u = 1 by its last tenth's slope) the difference
    is piecewise linear in u with breakpoints where u or u + Δu is a curve breakpoint, and
    constant past u = 1, so its maximum is at one of those points. For a Fan et al. curve
    (concave for r ≥ 1) it is at u = 0, which is among them."""
    step = delta_u[:, None]
    u = np.concatenate([np.broadcast_to(BREAKPOINTS, (len(delta_u), len(BREAKPOINTS))),
                        np.maximum(BREAKPOINTS[None, :] - step, 0.0)], axis=1)
    return (columns_watts(cols, u + step) - columns_watts(cols, u)).max(axis=1)
