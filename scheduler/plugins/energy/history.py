"""A node's (utilization, watts) history and the line fitted to it: the energy plugin's curve
for nodes whose agent exports no calibration curve and which have none configured."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from common.curves import PowerCurve


@dataclass(frozen=True)
class LinearFit:
    """P(u) ≈ intercept + slope × u, least squares over a node's recent samples."""

    intercept_watts: float
    slope_watts: float  # watts from u = 0 to u = 1
    samples: int

    def curve(self) -> PowerCurve:
        return PowerCurve.linear(self.intercept_watts, self.intercept_watts + self.slope_watts)


class NodeHistory:
    """A node's recent (utilization, watts) samples and the line fitted to them.

    A fit needs `min_samples` samples spread over at least `min_spread` of utilization, or the
    slope is noise. A negative slope is physically wrong (more work, less power) and is refused.
    """

    def __init__(self, size: int = 64, min_samples: int = 4, min_spread: float = 0.05) -> None:
        self._points: deque[tuple[float, float]] = deque(maxlen=size)
        self._last_sample_time: float | None = None
        self._min_samples = min_samples
        self._min_spread = min_spread
        self._fit: LinearFit | None = None
        self.version = 0  # bumped by every sample added

    def add(self, sample_time: float, utilization: float, watts: float) -> bool:
        """Add one sample; a sample already seen (same or older time) is ignored."""
        if self._last_sample_time is not None and sample_time <= self._last_sample_time:
            return False
        self._last_sample_time = sample_time
        self._points.append((utilization, watts))
        # Fitted here, by whoever feeds samples (the telemetry refresh thread in the extender),
        # so the scoring path only reads the result.
        self._fit = self._compute()
        self.version += 1
        return True

    def fit(self) -> LinearFit | None:
        return self._fit

    def _compute(self) -> LinearFit | None:
        # A copy (taken at C speed, under the GIL): a deque must not change while iterated.
        points = tuple(self._points)
        n = len(points)
        if n < self._min_samples:
            return None
        us = [u for u, _ in points]
        if max(us) - min(us) < self._min_spread:
            return None
        mean_u = sum(us) / n
        mean_p = sum(p for _, p in points) / n
        sxx = sum((u - mean_u) ** 2 for u in us)
        sxy = sum((u - mean_u) * (p - mean_p) for u, p in points)
        slope = sxy / sxx
        if slope < 0:
            return None
        intercept = mean_p - slope * mean_u
        if intercept < 0:
            return None
        return LinearFit(intercept_watts=intercept, slope_watts=slope, samples=n)
