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

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from scheduler.lifetimes.predictor import ERROR_BUCKETS, FALLBACK_REASONS, LEVELS, LifetimePredictor


def _bound(value: float) -> str:
    return "+Inf" if math.isinf(value) else repr(value)


class LifetimeCollector(Collector):
    def __init__(self, predictor: LifetimePredictor) -> None:
        self._predictor = predictor

    def collect(self) -> Iterator[Metric]:
        p = self._predictor
        ratio = HistogramMetricFamily(
            "kubejoule_lifetime_prediction_ratio",
            "Predicted over actual lifetime of pods that ended, by the level that predicted.",
            labels=["level"],
        )
        for level in LEVELS:
            counts = list(p.error_counts[level])
            cumulative, buckets = 0, []
            for bound, count in zip(ERROR_BUCKETS, counts, strict=True):
                cumulative += count
                buckets.append((_bound(bound), cumulative))
            ratio.add_metric([level], buckets, p.error_sums[level])
        yield ratio
        predictions = CounterMetricFamily(
            "kubejoule_lifetime_predictions", "Lifetime predictions by level.", labels=["level"]
        )
        for level in LEVELS:
            predictions.add_metric([level], p.predictions[level])
        yield predictions
        fallbacks = CounterMetricFamily(
            "kubejoule_lifetime_fallbacks",
            "Lifetime predictions (or state files) that fell back to the priors, by reason.",
            labels=["reason"],
        )
        for reason in FALLBACK_REASONS:
            fallbacks.add_metric([reason], p.fallbacks[reason])
        yield fallbacks
        observed = CounterMetricFamily("kubejoule_lifetime_observed", "Lifetimes learned.")
        observed.add_metric([], p.observed)
        yield observed
