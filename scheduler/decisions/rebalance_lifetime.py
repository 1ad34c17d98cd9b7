"""What the rebalancer takes from the lifetime predictor (scheduler/lifetimes): a pod's
predicted remaining lifetime at its age, and whether that prediction rests on history — its
controller's or its kind's in the namespace — or only on the owner kind's prior (a fallback,
on which the rebalancer never acts)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.domain.model import PodInfo
from scheduler.lifetimes import LEVEL_PRIOR, LifetimePredictor


@dataclass(frozen=True)
class Remaining:
    seconds: float  # predicted seconds until the pod ends
    fallback: bool  # from priors only (no history of its workload): not to be acted on


def remaining(predictor: LifetimePredictor | None, pod: PodInfo, age_s: float) -> Remaining | None:
    """The pod's predicted remaining lifetime; None without a predictor or a usable answer."""
    if predictor is None:
        return None
    prediction = predictor.predict(pod, age_s)
    seconds = prediction.remaining_s
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return Remaining(seconds, prediction.level == LEVEL_PRIOR)
