"""Paired statistics over a benchmark's seeds (issue 33).

Every policy runs every seed's workload (rl/simulation/traces/seeded_workload.py), so two policies'
runs pair by seed: the difference is taken seed by seed, and its mean gets a two-sided 95 %
Student-t interval over the seeds, `mean ± t(0.975, n − 1) × sd / √n`. One seed has no
interval (None), and then no verdict is "met". A target is met only when the whole interval
clears it (`at_most`): a difference that must not be positive is met when the interval's upper
end is ≤ 0.

The axes compared with bin packing (`AXES`): energy as a relative difference in percent,
lost CPU-hours, evictions and p99 pending seconds as absolute differences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict

CONFIDENCE = 0.95


class IntervalJson(TypedDict):
    """An Interval in a results document."""

    mean: float
    low: float | None
    high: float | None
    seeds: int


@dataclass(frozen=True)
class Interval:
    """A paired difference over `seeds` seeds: its mean and 95 % interval (None: one seed)."""

    mean: float
    low: float | None
    high: float | None
    seeds: int

    def as_json(self, digits: int = 3) -> IntervalJson:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, digits)

        return {"mean": round(self.mean, digits), "low": rounded(self.low), "high": rounded(self.high), "seeds": self.seeds}

    @property
    def half_width(self) -> float | None:
        return None if self.high is None else (self.high - self.mean)


def t_quantile(seeds: int) -> float:
    """t(0.975, seeds − 1)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, seeds - 1))


def mean_interval(differences: Sequence[float]) -> Interval:
    """The mean of per-seed differences and its 95 % t interval."""
    if not differences:
        raise ValueError("no paired runs to compare")
    n = len(differences)
    mean = sum(differences) / n
    if n < 2:
        return Interval(mean, None, None, n)
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    half = t_quantile(n) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def relative_pct(values: Sequence[float], reference: Sequence[float]) -> Interval:
    """`100 × (value − reference) / reference`, seed by seed."""
    return mean_interval([100.0 * (v - r) / r for v, r in zip(values, reference, strict=True)])


def difference(values: Sequence[float], reference: Sequence[float]) -> Interval:
    """`value − reference`, seed by seed."""
    return mean_interval([v - r for v, r in zip(values, reference, strict=True)])


def at_most(interval: Interval, limit: float) -> bool:
    """Met only when the whole interval is ≤ limit (module docstring)."""
    return interval.high is not None and interval.high <= limit + 1e-12


class PairedRun(Protocol):
    """What a run's paired comparison reads of it (rl/evaluation/rows.py: `RunRow`)."""

    @property
    def seed(self) -> int: ...

    @property
    def energy_kwh(self) -> float: ...

    @property
    def lost_cpu_hours(self) -> float: ...

    @property
    def evictions(self) -> int | float: ...

    @property
    def pending_seconds_p99(self) -> float | None: ...


# (name, unit, per-run value, relative?)
AXES: tuple[tuple[str, str, Callable[[PairedRun], float], bool], ...] = (
    ("energy", "%", lambda r: float(r.energy_kwh), True),
    ("lost_cpu_hours", "CPU h", lambda r: float(r.lost_cpu_hours), False),
    ("evictions", "pods", lambda r: float(r.evictions), False),
    ("pending_p99", "s", lambda r: float(r.pending_seconds_p99 or 0.0), False),
)


def paired_axes(runs: Sequence[PairedRun], reference: Sequence[PairedRun]) -> dict[str, Interval]:
    """Each axis's paired difference of `runs` against `reference` (by seed)."""
    by_seed = {r.seed: r for r in reference}
    pairs = [(r, by_seed[r.seed]) for r in runs if r.seed in by_seed]
    found = {}
    for name, _, value, relative in AXES:
        ours = [value(a) for a, _ in pairs]
        theirs = [value(b) for _, b in pairs]
        found[name] = relative_pct(ours, theirs) if relative else difference(ours, theirs)
    return found


def format_interval(interval: Interval | Mapping[str, object] | None, fmt: str = "+.1f", unit: str = "") -> str:
    """`-15.7 % [-16.2, -15.1]`, or the mean alone when there is no interval."""
    if interval is None:
        return "—"
    mean: object
    low: object
    high: object
    if isinstance(interval, Interval):
        mean, low, high = interval.mean, interval.low, interval.high
    else:
        mean, low, high = interval["mean"], interval["low"], interval["high"]
    suffix = f" {unit}" if unit else ""
    if low is None or high is None:
        return f"{format(mean, fmt)}{suffix}"
    return f"{format(mean, fmt)}{suffix} [{format(low, fmt)}, {format(high, fmt)}]"
