"""Metrics Server (metrics.k8s.io/v1beta1) readings for this node and the pods on it.

A background thread reads every `period_seconds`; building a Snapshot only takes the latest
reading, so a slow or absent Metrics Server never delays exporting. The data carries its age
(now − the timestamp Metrics Server gave it). When Metrics Server is absent or unreachable the
series are simply absent: each failed read is counted (`errors`, exported as
kubejoule_agent_errors_total{kind="metrics_server"}) and logged once per outage, not once per
interval. Readings older than `max_age_seconds` are dropped rather than exported as current.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agent.kube.podmeta import PodMeta
from agent.monitor.snapshot import Snapshot
from common.jsonvalue import JsonObject, subobject, subobjects, text
from common.kubetime import parse_timestamp
from common.quantity import parse_quantity

if TYPE_CHECKING:
    from agent.kube.client import KubeError

log = logging.getLogger("agent.metrics_server")  # the name its log lines have always carried

ERROR_KIND = "metrics_server"
DEFAULT_MAX_AGE_SECONDS = 300.0

def parse_duration_seconds(text: str | None) -> float | None:
    """A Go duration as Metrics Server writes `window` ("15s", "1m0.5s", "20.123ms")."""
    if not text:
        return None
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * units[u] for n, u in parts)


@dataclass(frozen=True)
class Usage:
    """One metrics.k8s.io usage figure: CPU cores and memory working set over `window`."""

    cpu_cores: float | None
    memory_working_set_bytes: float | None
    timestamp: float | None  # Unix seconds: the end of the window Metrics Server measured
    window_seconds: float | None


@dataclass(frozen=True)
class PodUsage:
    uid: str
    namespace: str
    name: str
    usage: Usage


@dataclass(frozen=True)
class MetricsServerData:
    node: Usage | None
    pods: tuple[PodUsage, ...]
    read_at: float  # Unix seconds when the agent read it

    def age_seconds(self, now: float) -> float:
        """How old the data is at NOW: from Metrics Server's own timestamp, else from the read."""
        stamp = self.node.timestamp if self.node is not None and self.node.timestamp is not None else self.read_at
        return max(0.0, now - stamp)

    def to_record(self, now: float) -> dict[str, object]:
        """The sample record's `metrics_server` section."""
        node = None
        if self.node is not None:
            node = {
                "cpu_cores": self.node.cpu_cores,
                "memory_working_set_bytes": self.node.memory_working_set_bytes,
                "window_seconds": self.node.window_seconds,
            }
        return {
            "age_seconds": self.age_seconds(now),
            "node": node,
            "pods": [
                {
                    "uid": p.uid,
                    "namespace": p.namespace,
                    "name": p.name,
                    "cpu_cores": p.usage.cpu_cores,
                    "memory_working_set_bytes": p.usage.memory_working_set_bytes,
                }
                for p in self.pods
            ],
        }


def _quantity(usage: JsonObject, key: str) -> float | None:
    value = usage.get(key)
    if value is None:
        return None
    try:
        return parse_quantity(str(value))
    except ValueError:
        return None


def node_usage(obj: JsonObject) -> Usage:
    """Usage from a NodeMetrics object."""
    usage = subobject(obj, "usage")
    return Usage(
        cpu_cores=_quantity(usage, "cpu"),
        memory_working_set_bytes=_quantity(usage, "memory"),
        timestamp=parse_timestamp(obj.get("timestamp")),
        window_seconds=parse_duration_seconds(text(obj, "window")),
    )


def pod_usage(obj: JsonObject) -> Usage:
    """Usage from a PodMetrics object: the sum over its containers (None if any is unreadable)."""
    cpu: float | None = 0.0
    memory: float | None = 0.0
    for container in subobjects(obj, "containers"):
        usage = subobject(container, "usage")
        c, m = _quantity(usage, "cpu"), _quantity(usage, "memory")
        cpu = None if cpu is None or c is None else cpu + c
        memory = None if memory is None or m is None else memory + m
    if not obj.get("containers"):
        cpu = memory = None
    return Usage(cpu, memory, parse_timestamp(obj.get("timestamp")), parse_duration_seconds(text(obj, "window")))


class MetricsSource(Protocol):
    """What the reader needs from the API (agent.kube.client.KubeClient)."""

    def get_node_metrics(self, node: str) -> JsonObject: ...

    def get_pod_metrics(self, namespace: str, name: str) -> JsonObject: ...

    def list_pod_metrics(self, namespace: str) -> list[JsonObject]: ...


# A namespace with several of this node's pods is read with one list instead of a GET per pod
# (each GET costs the agent about a millisecond of CPU: 100 pods were most of its budget). A
# namespace whose list is mostly other nodes' pods is read pod by pod again for a while: then
# the GETs are lighter, for the agent and for Metrics Server.
LIST_FROM_PODS = 2  # this node's pods in a namespace from which it is listed
LIST_WASTE_FACTOR = 4  # a list longer than this × our pods (+ LIST_WASTE_SLACK) is mostly others'
LIST_WASTE_SLACK = 50
PER_POD_SECONDS = 3600.0  # how long a wasteful namespace is read pod by pod before trying again


class MetricsServerReader:
    """Reads node and pod usage periodically; `latest()` is what the exporter shows."""

    def __init__(
        self,
        source: MetricsSource,
        node: str,
        pods: Callable[[], Iterable[PodMeta]],
        period_seconds: float = 5.0,
        max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.time,
        on_error: Callable[[], None] | None = None,
    ) -> None:
        self.source = source
        self.node = node
        self.pods = pods
        self.period_seconds = period_seconds
        self.max_age_seconds = max_age_seconds
        self.clock = clock
        self.on_error = on_error  # called once per failed read (the agent counts them)
        self.errors = 0  # failed reads: kubejoule_agent_errors_total{kind="metrics_server"}
        self._data: MetricsServerData | None = None
        self._failing = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._per_pod_until: dict[str, float] = {}  # namespace -> read pod by pod until (clock)

    def read_once(self) -> bool:
        """One read of the node and its pods. True on success; never raises for API trouble."""
        # The import is here, not at the top, so that this module can be used (and tested)
        # with any MetricsSource; KubeError is what every source raises.
        from agent.kube.client import KubeError

        try:
            node = node_usage(self.source.get_node_metrics(self.node))
        except KubeError as exc:
            self._failed(exc)
            return False
        pods: list[PodUsage] = []
        by_namespace: dict[str, list[PodMeta]] = {}
        for meta in sorted(self.pods(), key=lambda m: (m.namespace, m.name)):
            by_namespace.setdefault(meta.namespace, []).append(meta)
        for namespace, metas in by_namespace.items():
            try:
                found = self._namespace_metrics(namespace, metas)
            except KubeError as exc:
                self._failed(exc)
                return False
            pods.extend(PodUsage(m.uid, m.namespace, m.name, pod_usage(found[m.name])) for m in metas if m.name in found)
        with self._lock:
            self._data = MetricsServerData(node, tuple(pods), self.clock())
        if self._failing:
            log.warning("Metrics Server answers again for node %s", self.node)
            self._failing = False
        return True

    def _namespace_metrics(self, namespace: str, metas: list[PodMeta]) -> dict[str, JsonObject]:
        """PodMetrics of these pods of one namespace by name; a pod without data is left out."""
        from agent.kube.client import KubeError

        now = self.clock()
        if len(metas) >= LIST_FROM_PODS and self._per_pod_until.get(namespace, 0.0) <= now:
            try:
                items = self.source.list_pod_metrics(namespace)
            except KubeError as exc:
                if exc.status != 404:
                    raise
                items = []  # 404, as for one pod: no data for them (yet)
            wanted = {m.name for m in metas}
            found: dict[str, JsonObject] = {}
            for item in items:
                name = text(subobject(item, "metadata"), "name")
                if name is not None and name in wanted:
                    found[name] = item
            if len(items) > LIST_WASTE_FACTOR * len(metas) + LIST_WASTE_SLACK:
                self._per_pod_until[namespace] = now + PER_POD_SECONDS
            return found
        found = {}
        for meta in metas:
            try:
                found[meta.name] = self.source.get_pod_metrics(namespace, meta.name)
            except KubeError as exc:
                if exc.status != 404:  # 404: not scraped yet (new pod) or already gone: no data
                    raise
        return found

    def _failed(self, exc: KubeError) -> None:
        with self._lock:
            self.errors += 1
        if self.on_error is not None:
            self.on_error()
        if not self._failing:
            status = exc.status
            hint = (
                "is Metrics Server installed? (kubectl get apiservice v1beta1.metrics.k8s.io)"
                if status == 404
                else "does the agent's ServiceAccount have get on metrics.k8s.io nodes and pods?"
                if status in (401, 403)
                else "retrying every interval"
            )
            log.warning(
                "cannot read Metrics Server for node %s: %s; its series are absent until it answers (%s)",
                self.node,
                exc,
                hint,
            )
            self._failing = True

    def latest(self, now: float | None = None) -> MetricsServerData | None:
        """The last reading, unless there is none or it is older than max_age_seconds."""
        with self._lock:
            data = self._data
        if data is None:
            return None
        now = self.clock() if now is None else now
        if data.age_seconds(now) > self.max_age_seconds:
            return None
        return data

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubejoule-metrics-server", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.read_once()
            except Exception:  # noqa: BLE001 - the reader must outlive any surprise in the data
                log.exception("unexpected error reading Metrics Server")
                with self._lock:
                    self.errors += 1
                if self.on_error is not None:
                    self.on_error()
            self._stop.wait(max(0.0, self.period_seconds - (time.monotonic() - started)))

    def stop(self, timeout: float = 1.0) -> None:
        """Stop the thread; a read in flight is not waited for (the thread is a daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def with_metrics_server(snapshot: Snapshot, data: MetricsServerData | None) -> Snapshot:
    """The snapshot with the `metrics_server` section (record form) added, when there is data."""
    if data is None:
        return snapshot
    return dataclasses.replace(snapshot, metrics_server=data.to_record(snapshot.timestamp))
