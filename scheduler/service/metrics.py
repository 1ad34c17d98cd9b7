"""The standalone scheduler's Prometheus metrics, on a registry it owns, and its small HTTP
endpoint (`/metrics`, `/healthz`, `/readyz`).

| metric | type | labels |
|---|---|---|
| `kubejoule_scheduler_schedule_attempts_total` | counter | `result`: scheduled, unschedulable, error |
| `kubejoule_scheduler_e2e_scheduling_duration_seconds` | histogram | — (from taking the pod off the queue to the binding's answer) |
| `kubejoule_scheduler_binding_errors_total` | counter | `kind`: conflict, not_found, api |
| `kubejoule_scheduler_pending_pods` | gauge | `queue`: active, backoff, unschedulable, in_flight |
| `kubejoule_scheduler_leader` | gauge | — (1 while this replica holds the lease) |
| `kubejoule_scheduler_recommendation_agreements_total` | counter | `agree`: true/false — energy pick equals the default pick |
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.exposition import generate_latest

from common.metrics import MetricSpec

RESULTS = ("scheduled", "unschedulable", "error")
QUEUES = ("active", "backoff", "unschedulable", "in_flight")
# kube-scheduler's e2e buckets start at 1 ms; ours go a little lower for the scoring-only path.
LATENCY_BUCKETS_SECONDS = (
    0.0005,
    0.001,
    0.002,
    0.004,
    0.008,
    0.016,
    0.032,
    0.064,
    0.128,
    0.256,
    0.512,
    1.024,
    2.048,
    4.096,
    8.192,
    16.384,
)

SCHEDULE_ATTEMPTS = MetricSpec(
    "kubejoule_scheduler_schedule_attempts", "counter", "Scheduling attempts by result.", ("result",)
)
E2E_SCHEDULING_DURATION = MetricSpec(
    "kubejoule_scheduler_e2e_scheduling_duration_seconds", "histogram",
    "Seconds from taking a pod off the queue to the answer of its binding.",
)
BINDING_ERRORS = MetricSpec(
    "kubejoule_scheduler_binding_errors", "counter", "Binding calls that failed, by kind.", ("kind",)
)
PENDING_PODS = MetricSpec(
    "kubejoule_scheduler_pending_pods", "gauge", "Pods waiting in the scheduling queue, by sub-queue.", ("queue",)
)
LEADER = MetricSpec("kubejoule_scheduler_leader", "gauge", "1 while this replica holds the leader lease.")
RECOMMENDATION_AGREEMENTS = MetricSpec(
    "kubejoule_scheduler_recommendation_agreements", "counter",
    "Placements where the energy recommendation equals the default scoring's choice.", ("agree",),
)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.attempts = SCHEDULE_ATTEMPTS.counter(self.registry)
        for result in RESULTS:
            self.attempts.labels(result)
        self.e2e_seconds = E2E_SCHEDULING_DURATION.histogram(self.registry, LATENCY_BUCKETS_SECONDS)
        self.binding_errors = BINDING_ERRORS.counter(self.registry)
        self.pending = PENDING_PODS.gauge(self.registry)
        self.leader = LEADER.gauge(self.registry)
        self.agreements = RECOMMENDATION_AGREEMENTS.counter(self.registry)

    def watch_queue(self, lengths: Callable[[], Mapping[str, int]]) -> None:
        """Read queue lengths at scrape time."""
        def reader(queue: str) -> Callable[[], float]:
            return lambda: float(lengths().get(queue, 0))

        for queue in QUEUES:
            self.pending.labels(queue).set_function(reader(queue))

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, dict(labels or {}))


class _Handler(BaseHTTPRequestHandler):
    registry: CollectorRegistry
    ready: Callable[[], bool]

    def do_GET(self) -> None:  # noqa: N802 — http.server's naming
        if self.path.startswith("/metrics"):
            body = generate_latest(self.registry)
            self._answer(200, body, CONTENT_TYPE_LATEST)
        elif self.path.startswith("/healthz"):
            self._answer(200, b"ok\n", "text/plain")
        elif self.path.startswith("/readyz"):
            ok = self.ready()
            self._answer(200 if ok else 503, b"ok\n" if ok else b"not ready\n", "text/plain")
        else:
            self._answer(404, b"not found\n", "text/plain")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 — quiet
        return


def serve(
    registry: CollectorRegistry, ready: Callable[[], bool], host: str, port: int
) -> ThreadingHTTPServer:
    """Serve /metrics, /healthz, /readyz from a daemon thread; `shutdown()` to stop."""
    handler = type("Handler", (_Handler,), {"registry": registry, "ready": staticmethod(ready)})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="scheduler-http", daemon=True).start()
    return server
