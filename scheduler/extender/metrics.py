"""The extender's Prometheus metrics: request counts and latency, fallbacks, recommendations,
and collectors that read the store, the cluster view and the recorder at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from common.metrics import MetricSpec


class TelemetryView(Protocol):
    """What the metrics read of the telemetry: the TelemetryView, or the refresher's view."""

    @property
    def ready(self) -> bool: ...

    @property
    def errors(self) -> Mapping[tuple[str, str], int]: ...

    def ages(self, now: float | None = None) -> dict[str, float]: ...


LATENCY_BUCKETS_SECONDS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)

REQUESTS = MetricSpec(
    "kubejoule_extender_requests", "counter", "Extender requests by verb and HTTP status code.", ("verb", "code")
)
REQUEST_DURATION = MetricSpec(
    "kubejoule_extender_request_duration_seconds", "histogram",
    "Time to answer an extender request (parsing, scoring, encoding).", ("verb",),
)
FALLBACKS = MetricSpec(
    "kubejoule_scheduler_fallbacks", "counter",
    "Nodes scored without usable telemetry (priced at their worst state), by reason.", ("reason",),
)
RECOMMENDATIONS = MetricSpec(
    "kubejoule_scheduler_recommendations", "counter", "Energy recommendations made, by mode.", ("mode",)
)
FILTERED = MetricSpec(
    "kubejoule_extender_filtered_nodes", "counter",
    "Nodes a power cap excluded (active) or would have excluded (shadow), by mode.", ("mode",),
)
TELEMETRY_AGE = MetricSpec(
    "kubejoule_scheduler_telemetry_age_seconds", "gauge",
    "Age of the newest telemetry sample the scheduler holds for each node.", ("node",),
)
TELEMETRY_ERRORS = MetricSpec(
    "kubejoule_scheduler_telemetry_errors", "gauge", "Telemetry refresh errors since start, by source and kind.",
    ("source", "kind"),
)
TELEMETRY_READY = MetricSpec(
    "kubejoule_scheduler_telemetry_ready", "gauge", "1 once the first telemetry refresh is done."
)
CLUSTER_SYNCED = MetricSpec(
    "kubejoule_extender_cluster_synced", "gauge",
    "1 once the pod and node watches have listed the cluster (pods bound since each node's sample are counted "
    "from then on); absent without a cluster view.",
)
RECORDED_DECISIONS = MetricSpec(
    "kubejoule_extender_recorded_decisions", "counter",
    "Decisions sent to the decision log, by result: recorded, dropped (the recorder's queue was full: the "
    "request did not wait for it), failed, or late (recorded, but after its response was sent: the response "
    "waits a bounded time for its line).", ("result",),
)
RECORDER_QUEUE_LENGTH = MetricSpec(
    "kubejoule_extender_recorder_queue_length", "gauge", "Decisions waiting for the recorder thread."
)



class _StoreCollector(Collector):
    """Telemetry age per node and refresh errors, read from the store at scrape time."""

    def __init__(self, store: TelemetryView, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        ages = TELEMETRY_AGE.gauge_family()
        for node, age in sorted(self._store.ages(self._clock()).items()):
            ages.add_metric([node], age)
        yield ages
        errors = TELEMETRY_ERRORS.gauge_family()
        for (source, kind), count in sorted(self._store.errors.items()):
            errors.add_metric([source, kind], count)
        yield errors
        ready = TELEMETRY_READY.gauge_family()
        ready.add_metric([], 1.0 if self._store.ready else 0.0)
        yield ready


class _ClusterCollector(Collector):
    """Whether the cluster view (pods and nodes from watches) has synced, at scrape time."""

    def __init__(self, synced: Callable[[], bool], present: Callable[[], bool] = lambda: True) -> None:
        self._synced = synced
        self._present = present  # whether there is a cluster view (known late: the refresher's)

    def collect(self) -> Iterator[Metric]:
        if not self._present():
            return
        synced = CLUSTER_SYNCED.gauge_family()
        synced.add_metric([], 1.0 if self._synced() else 0.0)
        yield synced


class _RecorderCollector(Collector):
    """A background recorder's counts (the decision log's ExtenderRecorder), at scrape
    time: decisions recorded, dropped because its queue was full, failed; its queue length."""

    def __init__(self, stats: Callable[[], Mapping[str, int]]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        decisions = RECORDED_DECISIONS.counter_family()
        for result in ("recorded", "dropped", "failed", "late"):
            decisions.add_metric([result], float(stats.get(result, 0)))
        yield decisions
        queued = RECORDER_QUEUE_LENGTH.gauge_family()
        queued.add_metric([], float(stats.get("queued", 0)))
        yield queued


class ExtenderMetrics:
    def __init__(self, store: TelemetryView, clock: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        self.requests = REQUESTS.counter(self.registry)
        self.latency = REQUEST_DURATION.histogram(self.registry, LATENCY_BUCKETS_SECONDS)
        self.fallbacks = FALLBACKS.counter(self.registry)
        self.recommendations = RECOMMENDATIONS.counter(self.registry)
        self.filtered = FILTERED.counter(self.registry)
        self.registry.register(_StoreCollector(store, clock))
