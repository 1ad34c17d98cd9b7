"""Every Prometheus metric kubejoule exposes is declared once, as a `MetricSpec` at module level
beside the code that fills it (agent/exporter/, scheduler/*/metrics.py, scheduler/autoscaler/):
its name, type, help and labels. The series are built from the declaration — `spec.family()` for
a collector that builds its families per scrape, `spec.counter(registry)` (and `gauge`,
`histogram`) for prometheus_client's instruments — so the name and labels exposed are the
declared ones, and docs/reference/metrics.md is generated from the declarations
(tools/docs/reference.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class MetricSpec:
    name: str  # as exposed, a counter's without its `_total` (prometheus_client adds it)
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    # Labels some scrapes add after `labels` (node power's `estimate`, with an estimate from
    # published coefficients): each with what makes it appear.
    optional_labels: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind == "counter" and self.name.endswith("_total"):
            raise ValueError(f"{self.name}: a counter is declared without _total")

    @property
    def exposed(self) -> str:
        """The name in the exposition: a counter's series end in `_total`."""
        return self.name + "_total" if self.kind == "counter" else self.name

    def _labels(self, extra: Sequence[str]) -> list[str]:
        allowed = [name for name, _ in self.optional_labels]
        if any(label not in allowed for label in extra):
            raise ValueError(f"{self.name}: labels {list(extra)} are not among its optional ones {allowed}")
        return [*self.labels, *extra]

    def _expect(self, kind: Kind) -> None:
        if self.kind != kind:
            raise TypeError(f"{self.name} is a {self.kind}, not a {kind}")

    # Families for a custom collector (built per scrape)
    def gauge_family(self, extra: Sequence[str] = ()) -> GaugeMetricFamily:
        self._expect("gauge")
        return GaugeMetricFamily(self.name, self.help, labels=self._labels(extra))

    def counter_family(self, extra: Sequence[str] = ()) -> CounterMetricFamily:
        self._expect("counter")
        return CounterMetricFamily(self.name, self.help, labels=self._labels(extra))

    def histogram_family(self) -> HistogramMetricFamily:
        self._expect("histogram")
        return HistogramMetricFamily(self.name, self.help, labels=list(self.labels))

    # prometheus_client's instruments, registered in `registry`
    def counter(self, registry: CollectorRegistry) -> Counter:
        self._expect("counter")
        return Counter(self.name, self.help, list(self.labels), registry=registry)

    def gauge(self, registry: CollectorRegistry) -> Gauge:
        self._expect("gauge")
        return Gauge(self.name, self.help, list(self.labels), registry=registry)

    def histogram(self, registry: CollectorRegistry, buckets: Sequence[float]) -> Histogram:
        self._expect("histogram")
        return Histogram(self.name, self.help, list(self.labels), buckets=buckets, registry=registry)


def declared(namespace: dict[str, object]) -> list[MetricSpec]:
    """The MetricSpecs among a module's globals (`declared(vars(module))`), in declaration order."""
    return [value for value in namespace.values() if isinstance(value, MetricSpec)]
