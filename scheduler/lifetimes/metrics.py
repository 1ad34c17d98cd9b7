"""The lifetime predictor's Prometheus metrics, read from it at scrape time (register
`LifetimeCollector(predictor)` in the process's registry):

| metric | type | labels |
|---|---|---|
| `kubejoule_lifetime_prediction_ratio` | histogram | `level`: predicted / actual lifetime of each pod that ended on its own, predicted at age 0 just before it was learned from, by the level that answered (controller, namespace, prior) |
| `kubejoule_lifetime_predictions_total` | counter | `level`: predictions made, by the level that answered |
| `kubejoule_lifetime_fallbacks_total` | counter | `reason`: predictions (or a state file) that fell back to the priors: no_owner, no_history, clock_jump, state_corrupt, state_version |
| `kubejoule_lifetime_observed_total` | counter | — lifetimes learned |
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from common.metrics import MetricSpec
from scheduler.lifetimes.predictor import ERROR_BUCKETS, FALLBACK_REASONS, LEVELS, LifetimePredictor

PREDICTION_RATIO = MetricSpec(
    "kubejoule_lifetime_prediction_ratio", "histogram",
    "Predicted over actual lifetime of pods that ended, by the level that predicted.", ("level",),
)
PREDICTIONS = MetricSpec("kubejoule_lifetime_predictions", "counter", "Lifetime predictions by level.", ("level",))
FALLBACKS = MetricSpec(
    "kubejoule_lifetime_fallbacks", "counter",
    "Lifetime predictions (or state files) that fell back to the priors, by reason.", ("reason",),
)
OBSERVED = MetricSpec("kubejoule_lifetime_observed", "counter", "Lifetimes learned.")


def _bound(value: float) -> str:
    return "+Inf" if math.isinf(value) else repr(value)


class LifetimeCollector(Collector):
    def __init__(self, predictor: LifetimePredictor) -> None:
        self._predictor = predictor

    def collect(self) -> Iterator[Metric]:
        p = self._predictor
        ratio = PREDICTION_RATIO.histogram_family()
        for level in LEVELS:
            counts = list(p.error_counts[level])
            cumulative, buckets = 0, []
            for bound, count in zip(ERROR_BUCKETS, counts, strict=True):
                cumulative += count
                buckets.append((_bound(bound), cumulative))
            ratio.add_metric([level], buckets, p.error_sums[level])
        yield ratio
        predictions = PREDICTIONS.counter_family()
        for level in LEVELS:
            predictions.add_metric([level], p.predictions[level])
        yield predictions
        fallbacks = FALLBACKS.counter_family()
        for reason in FALLBACK_REASONS:
            fallbacks.add_metric([reason], p.fallbacks[reason])
        yield fallbacks
        observed = OBSERVED.counter_family()
        observed.add_metric([], p.observed)
        yield observed
