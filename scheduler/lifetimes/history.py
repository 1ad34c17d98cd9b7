"""Lifetime distributions: the recent lifetimes of one group of pods, and the priors.

A group keeps the last `window` lifetimes it was told of (seconds a pod ran before it ended on
its own) and answers the *mean residual life* at an age: `E[D − a | D > a]` over the kept
lifetimes longer than `a`, with how many there were (the caller blends a thin answer with the
next group's). The prior of an owner kind is a Lomax (Pareto type II) distribution with shape
2, whose mean residual life is `scale + a`: a pod is expected to live on as long again as it
has lived, plus the kind's scale — the Lindy behaviour of heavy-tailed lifetimes, so a pod that
outlives its prediction is predicted again, further out.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Mapping

# The prior's mean lifetime (its Lomax scale) by owner kind, seconds. Services (ReplicaSet,
# StatefulSet, ReplicationController pods) run for days; Jobs for minutes; a bare pod or an
# unknown controller in between. Overridden by `lifetimes.priors` in the configuration.
DEFAULT_PRIOR_SECONDS: Mapping[str, float] = {
    "Job": 1800.0,
    "ReplicaSet": 86_400.0,
    "StatefulSet": 86_400.0,
    "ReplicationController": 86_400.0,
}
BARE_POD_PRIOR_SECONDS = 3600.0  # no owner
OTHER_PRIOR_SECONDS = 3600.0  # an owner kind without a prior of its own


def prior_remaining(scale_s: float, age_s: float) -> float:
    """Mean residual life of Lomax(shape 2, scale) at `age_s`: scale + age."""
    return scale_s + age_s


class Durations:
    """The last `window` lifetimes of a group (seconds), and their mean residual life."""

    __slots__ = ("_recent", "_sorted", "_suffix")

    def __init__(self, window: int, values: Iterable[float] = ()) -> None:
        self._recent: deque[float] = deque(maxlen=window)
        self._sorted: list[float] | None = None
        self._suffix: list[float] = []
        for value in values:
            self.add(value)

    def __len__(self) -> int:
        return len(self._recent)

    def add(self, lifetime_s: float) -> None:
        self._recent.append(float(lifetime_s))
        self._sorted = None  # rebuilt at the next question

    def values(self) -> list[float]:
        """The kept lifetimes, oldest first."""
        return list(self._recent)

    def _arrays(self) -> tuple[list[float], list[float]]:
        if self._sorted is None:
            ordered = sorted(self._recent)
            suffix = [0.0] * (len(ordered) + 1)
            for i in range(len(ordered) - 1, -1, -1):
                suffix[i] = suffix[i + 1] + ordered[i]
            self._sorted, self._suffix = ordered, suffix
        return self._sorted, self._suffix

    def residual(self, age_s: float) -> tuple[float, int]:
        """(E[D − age | D > age], n) over the kept lifetimes longer than `age_s`; (nan, 0) when
        none is."""
        ordered, suffix = self._arrays()
        i = bisect.bisect_right(ordered, age_s)
        n = len(ordered) - i
        if n == 0:
            return math.nan, 0
        return suffix[i] / n - age_s, n
