"""TelemetryStore: what the scheduler knows of each node's power and load, and how old it is.

Refreshed in the background, never on the scoring path: `TelemetryStore.start()` runs a thread
that asks every source in turn and swaps in a new immutable view; scoring reads that view with a
dict lookup. A source that fails leaves the nodes it alone served to age into staleness; scoring
then gives them the neutral score.

Sources, in the order they are given (the first fresh one wins per node):

* `AgentScrapeSource` — the agents' own `/metrics`, scraped directly (the default; no Prometheus
  needed). Targets come from a static `node=url` list (`StaticTargets`) or from the agent
  Service's EndpointSlices (`EndpointSliceTargets`).
* `PrometheusSource` — a Prometheus HTTP API that scrapes the agents (large clusters).
* `MetricsServerSource` — `metrics.k8s.io` node usage: utilization only, no watts; useful with
  configured curves on nodes without an agent.

Times are wall-clock seconds. A node's age is `now − kubejoule_sample_timestamp_seconds`, the
agent's own time of the sample, so a stuck agent or a Prometheus serving old points ages out. A
sample time in the future (the agent's clock runs ahead) is taken as the time the store first
fetched that sample, so such a sample ages by the scheduler's clock instead of staying "fresh"
for as long as the skew.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agent.curves import POINT_COUNT
from scheduler.model import NodeTelemetry, parse_quantity

log = logging.getLogger(__name__)

M_POWER = "kubejoule_node_power_watts"
M_UTILIZATION = "kubejoule_node_cpu_utilization_ratio"
M_CURVE = "kubejoule_node_power_model_watts"
M_TIMESTAMP = "kubejoule_sample_timestamp_seconds"
M_POD_POWER = "kubejoule_pod_power_watts"
M_POD_ENERGY = "kubejoule_pod_energy_joules_total"

# When a node reports several power series, the measured one is preferred.
_SOURCE_RANK = {"rapl": 0, "estimated": 1, "none": 2}


@dataclass(frozen=True)
class NodeSample:
    """What one source knows of one node."""

    telemetry: NodeTelemetry
    # Pods the node's agent saw at the sample (None when the source cannot tell).
    pod_count: int | None = None
    source_name: str = ""


@dataclass
class FetchResult:
    samples: dict[str, NodeSample] = field(default_factory=dict)
    # Partial failures: (kind, detail), e.g. one agent that did not answer.
    errors: list[tuple[str, str]] = field(default_factory=list)


class TelemetrySource(Protocol):
    name: str

    def fetch(self) -> FetchResult:
        """Blocking; called from the store's background thread only."""
        ...


# -- the agents' exposition ----------------------------------------------------------------------


@dataclass
class _Partial:
    watts: float | None = None
    source: str = "none"
    utilization: float | None = None
    sample_time: float | None = None
    curve: dict[int, float] = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _curve_level(label: str) -> int | None:
    """The 0..10 index of a curve point's `utilization` label ("0.3", or "30" as percent)."""
    try:
        u = float(label)
    except ValueError:
        return None
    if u > 1.0:
        u /= 100.0
    index = round(u * (POINT_COUNT - 1))
    if abs(index - u * (POINT_COUNT - 1)) > 1e-6 or not 0 <= index < POINT_COUNT:
        return None
    return index


class _Collector:
    """Folds `kubejoule_*` series (name, labels, value) into per-node samples."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Partial] = {}

    def add(self, name: str, labels: Mapping[str, str], value: float) -> None:
        node = labels.get("node")
        if not node:
            return
        part = self.nodes.get(node)
        if part is None:
            part = self.nodes[node] = _Partial()
        if name == M_POWER:
            source = labels.get("source", "none")
            watts = _finite(value)
            if watts is not None and _SOURCE_RANK.get(source, 3) <= _SOURCE_RANK.get(part.source, 3):
                part.watts, part.source = watts, source
        elif name == M_UTILIZATION:
            part.utilization = _finite(value)
        elif name == M_TIMESTAMP:
            part.sample_time = _finite(value)
        elif name == M_CURVE:
            level = _curve_level(labels.get("utilization", ""))
            watts = _finite(value)
            if level is not None and watts is not None:
                part.curve[level] = watts
        elif name in (M_POD_POWER, M_POD_ENERGY):
            part.pods.add(labels.get("pod_uid") or f"{labels.get('namespace')}/{labels.get('pod')}")

    def samples(self, source_name: str) -> FetchResult:
        result = FetchResult()
        for node, part in self.nodes.items():
            if part.sample_time is None:
                # Without the agent's sample time the age of the numbers is unknown: unusable.
                result.errors.append(("no_timestamp", node))
                continue
            curve = (
                tuple(part.curve[i] for i in range(POINT_COUNT))
                if len(part.curve) == POINT_COUNT
                else None
            )
            telemetry = NodeTelemetry(
                node=node,
                sample_time=part.sample_time,
                watts=part.watts,
                source=part.source if part.watts is not None else "none",
                utilization=part.utilization,
                curve_points=curve,
            )
            # Pod series exist only where power is known; without power the count is unknown.
            pod_count = len(part.pods) if part.watts is not None else None
            result.samples[node] = NodeSample(telemetry, pod_count, source_name)
        return result


def parse_agent_metrics(text: str, source_name: str = "agents") -> FetchResult:
    """Node samples from a Prometheus text exposition of one or more agents."""
    collector = _Collector()
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("kubejoule_"):
            continue
        for sample in family.samples:
            collector.add(sample.name, sample.labels, float(sample.value))
    return collector.samples(source_name)


# -- scrape targets ------------------------------------------------------------------------------


class StaticTargets:
    """A fixed `node → URL` map, e.g. from `--agent node1=http://10.0.0.1:9102`."""

    def __init__(self, targets: Mapping[str, str]) -> None:
        self._targets = {node: metrics_url(url) for node, url in targets.items()}

    def __call__(self) -> dict[str, str]:
        return dict(self._targets)


def metrics_url(url: str) -> str:
    """`http://host:port` → `http://host:port/metrics`; a URL with a path is kept."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    rest = url.split("://", 1)[1]
    return url if "/" in rest else url + "/metrics"


def parse_static_targets(items: Iterable[str]) -> dict[str, str]:
    """`["node1=http://10.0.0.1:9102", ...]` → `{"node1": "http://10.0.0.1:9102/metrics"}`."""
    targets = {}
    for item in items:
        node, sep, url = item.partition("=")
        if not sep or not node.strip() or not url.strip():
            raise ValueError(f"expected node=url, got {item!r}")
        targets[node.strip()] = metrics_url(url)
    return targets


def targets_from_endpoint_slices(
    slices: Iterable[Mapping[str, Any]], port_name: str | None = None, scheme: str = "http"
) -> dict[str, str]:
    """`node → URL` from a Service's EndpointSlices (discovery.k8s.io/v1 JSON).

    Endpoints that are not ready, or carry no nodeName, are skipped. The port is the one named
    `port_name`, else the slice's first port.
    """
    targets: dict[str, str] = {}
    for eps in slices:
        ports = eps.get("ports") or []
        port = next(
            (p.get("port") for p in ports if port_name is None or p.get("name") == port_name), None
        )
        if port is None:
            continue
        ipv6 = eps.get("addressType") == "IPv6"
        for endpoint in eps.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            node = endpoint.get("nodeName")
            addresses = endpoint.get("addresses") or []
            if not node or not addresses:
                continue
            host = f"[{addresses[0]}]" if ipv6 else addresses[0]
            targets[node] = f"{scheme}://{host}:{port}/metrics"
    return targets


class EndpointSliceTargets:
    """Agent targets from the agent Service's EndpointSlices, read through scheduler/kube.py."""

    def __init__(
        self, api: Any, namespace: str, service: str, port_name: str | None = None
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._service = service
        self._port_name = port_name

    def __call__(self) -> dict[str, str]:
        from scheduler import kube

        slices = kube.list_endpoint_slices(self._api, self._namespace, self._service)
        # Some API servers (and test emulators) ignore the label selector: check it again.
        own = [
            s
            for s in slices
            if ((s.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/service-name")
            == self._service
        ]
        return targets_from_endpoint_slices(own, self._port_name)


# -- sources -------------------------------------------------------------------------------------


class AgentScrapeSource:
    """Scrapes every agent's /metrics in parallel."""

    def __init__(
        self,
        targets: Callable[[], Mapping[str, str]],
        timeout_seconds: float = 2.0,
        max_workers: int = 16,
        name: str = "agents",
    ) -> None:
        self.name = name
        self._targets = targets
        self._timeout = timeout_seconds
        self._max_workers = max_workers
        self._client = httpx.Client(timeout=timeout_seconds)

    def _scrape(self, node: str, url: str) -> FetchResult:
        try:
            response = self._client.get(url)
            response.raise_for_status()
            result = parse_agent_metrics(response.text, self.name)
        except (httpx.HTTPError, ValueError) as exc:
            return FetchResult(errors=[("scrape", f"{node} {url}: {exc}")])
        # An agent speaks for its own node; series for other nodes are not trusted from it.
        if node in result.samples:
            result.samples = {node: result.samples[node]}
        elif result.samples:
            result.errors.append(("node_mismatch", f"{url} reports {sorted(result.samples)}"))
            result.samples = {}
        return result

    def fetch(self) -> FetchResult:
        targets = dict(self._targets())
        merged = FetchResult()
        if not targets:
            return merged
        workers = max(1, min(self._max_workers, len(targets)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scrape") as pool:
            for result in pool.map(lambda item: self._scrape(*item), targets.items()):
                merged.samples.update(result.samples)
                merged.errors.extend(result.errors)
        return merged

    def close(self) -> None:
        self._client.close()


class PrometheusSource:
    """Reads the agents' series from a Prometheus HTTP API (`/api/v1/query`)."""

    name = "prometheus"

    QUERIES: tuple[str, ...] = (M_POWER, M_UTILIZATION, M_CURVE, M_TIMESTAMP, M_POD_POWER)

    def __init__(self, url: str, timeout_seconds: float = 5.0) -> None:
        self._base = url.rstrip("/")
        self._client = httpx.Client(timeout=timeout_seconds)

    def _query(self, promql: str) -> list[dict[str, Any]]:
        response = self._client.get(f"{self._base}/api/v1/query", params={"query": promql})
        response.raise_for_status()
        body = response.json()
        if body.get("status") != "success":
            raise ValueError(f"prometheus: {body.get('error') or body}")
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise ValueError(f"prometheus: expected a vector, got {data.get('resultType')}")
        return list(data.get("result") or [])

    def fetch(self) -> FetchResult:
        collector = _Collector()
        errors: list[tuple[str, str]] = []
        for metric in self.QUERIES:
            try:
                series = self._query(metric)
            except (httpx.HTTPError, ValueError) as exc:
                errors.append(("prometheus", f"{metric}: {exc}"))
                continue
            # Newest timestamp last, so that the freshest duplicate (two jobs, a restart) wins.
            for item in sorted(series, key=lambda s: float(s["value"][0])):
                labels = item.get("metric") or {}
                collector.add(metric, labels, float(item["value"][1]))
        result = collector.samples(self.name)
        result.errors[:0] = errors
        return result

    def close(self) -> None:
        self._client.close()


def parse_rfc3339(value: str) -> float:
    """`2024-05-01T12:00:00Z` → wall-clock seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def samples_from_node_metrics(
    items: Iterable[Mapping[str, Any]], cores: Mapping[str, float], source_name: str = "metrics-server"
) -> FetchResult:
    """Utilization from metrics.k8s.io NodeMetrics: usage.cpu over the node's cores."""
    result = FetchResult()
    for item in items:
        node = (item.get("metadata") or {}).get("name")
        usage = (item.get("usage") or {}).get("cpu")
        stamp = item.get("timestamp")
        node_cores = cores.get(node or "")
        if not node or usage is None or not stamp:
            continue
        if not node_cores:
            result.errors.append(("no_capacity", str(node)))
            continue
        try:
            used_cores = parse_quantity(usage)
            sample_time = parse_rfc3339(str(stamp))
        except ValueError as exc:
            result.errors.append(("metrics_server", f"{node}: {exc}"))
            continue
        telemetry = NodeTelemetry(
            node=node,
            sample_time=sample_time,
            utilization=min(1.0, max(0.0, used_cores / node_cores)),
            cores=node_cores,
        )
        result.samples[node] = NodeSample(telemetry, None, source_name)
    return result


def cores_from_nodes(nodes: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """CPU capacity (cores) of each Node, from v1 Node JSON."""
    cores: dict[str, float] = {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        capacity = ((node.get("status") or {}).get("capacity") or {}).get("cpu")
        if name and capacity is not None:
            try:
                cores[name] = parse_quantity(capacity)
            except ValueError:
                continue
    return cores


class NodeCoresFromKubernetes:
    """Node CPU capacity from the Node objects, re-listed at most every `refresh_seconds`."""

    def __init__(self, api: Any, refresh_seconds: float = 60.0) -> None:
        self._api = api
        self._refresh_seconds = refresh_seconds
        self._cores: dict[str, float] = {}
        self._listed_at: float | None = None

    def __call__(self) -> dict[str, float]:
        from scheduler import kube

        now = time.monotonic()
        if self._listed_at is None or now - self._listed_at >= self._refresh_seconds:
            self._cores = cores_from_nodes(kube.list_nodes_json(self._api))
            self._listed_at = now
        return self._cores


class MetricsServerSource:
    """Node utilization from metrics.k8s.io (no watts); cores from the Node objects."""

    name = "metrics-server"

    def __init__(self, api: Any) -> None:
        self._api = api

    def fetch(self) -> FetchResult:
        from scheduler import kube

        cores = cores_from_nodes(kube.list_nodes_json(self._api))
        return samples_from_node_metrics(kube.list_node_metrics(self._api), cores, self.name)


# -- the store -----------------------------------------------------------------------------------


def merge_samples(
    per_source: Sequence[Mapping[str, NodeSample]],
    now: float,
    max_staleness_seconds: float,
    cores: Mapping[str, float],
) -> dict[str, NodeSample]:
    """One sample per node: the first source (in priority order) whose data is fresh, else the
    freshest; static facts (cores, curve points) are filled in from any source or `cores`."""
    merged: dict[str, NodeSample] = {}
    nodes = {node for samples in per_source for node in samples}
    for node in nodes:
        candidates = [samples[node] for samples in per_source if node in samples]
        fresh = [
            c
            for c in candidates
            if c.telemetry.utilization is not None
            and c.telemetry.age_seconds(now) <= max_staleness_seconds
        ]
        chosen = fresh[0] if fresh else max(candidates, key=lambda c: c.telemetry.sample_time)
        telemetry = chosen.telemetry
        if telemetry.cores is None:
            known = next((c.telemetry.cores for c in candidates if c.telemetry.cores), None)
            telemetry = replace(telemetry, cores=known or cores.get(node))
        if telemetry.curve_points is None:
            curve = next((c.telemetry.curve_points for c in candidates if c.telemetry.curve_points), None)
            if curve is not None:
                telemetry = replace(telemetry, curve_points=curve)
        merged[node] = replace(chosen, telemetry=telemetry)
    return merged


FORGET_AFTER_SECONDS = 600.0
# Sample times further ahead of the scheduler's clock than this are counted as errors
# ("clock_ahead"); any future time is clamped, this only keeps NTP-sized skew out of the counts.
CLOCK_AHEAD_REPORT_SECONDS = 1.0

Listener = Callable[[Mapping[str, NodeSample]], None]


class TelemetryStore:
    """Per-node telemetry with its age, refreshed by a background thread."""

    def __init__(
        self,
        sources: Sequence[TelemetrySource],
        refresh_seconds: float = 5.0,
        max_staleness_seconds: float = 30.0,
        node_cores: Callable[[], Mapping[str, float]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sources = list(sources)
        self.refresh_seconds = refresh_seconds
        self.max_staleness_seconds = max_staleness_seconds
        self._node_cores = node_cores
        self._clock = clock
        self._samples: Mapping[str, NodeSample] = {}
        self._per_source: dict[str, dict[str, NodeSample]] = {}
        # (source, node) → (reported future sample time, local time it was first fetched)
        self._ahead: dict[tuple[str, str], tuple[float, float]] = {}
        self._listeners: list[Listener] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one refresh at a time
        self.refreshes = 0
        self.last_refresh_time: float | None = None
        self.errors: dict[tuple[str, str], int] = {}  # (source, kind) → count
        self.last_errors: list[tuple[str, str, str]] = []

    # -- reading (the scoring path: no I/O, no locks) --

    def get(self, node: str) -> NodeSample | None:
        return self._samples.get(node)

    def telemetry(self, node: str) -> NodeTelemetry | None:
        sample = self._samples.get(node)
        return sample.telemetry if sample is not None else None

    def snapshot(self) -> Mapping[str, NodeSample]:
        """The current view; never mutated once published."""
        return self._samples

    def ages(self, now: float | None = None) -> dict[str, float]:
        now = self._clock() if now is None else now
        return {node: s.telemetry.age_seconds(now) for node, s in self._samples.items()}

    @property
    def ready(self) -> bool:
        """At least one refresh completed (it may have found nothing)."""
        return self.refreshes > 0

    def add_listener(self, listener: Listener) -> None:
        """Called with the new view after each refresh (from the refresh thread)."""
        self._listeners.append(listener)

    # -- refreshing --

    def refresh_once(self) -> None:
        with self._lock:
            errors: list[tuple[str, str, str]] = []
            for source in self.sources:
                try:
                    result = source.fetch()
                except Exception as exc:  # a broken source must not stop the others
                    log.warning("telemetry source %s failed: %s", source.name, exc)
                    errors.append((source.name, "fetch", str(exc)))
                    continue
                samples = self._clamp_future(source.name, result.samples, self._clock(), errors)
                # Keep the last known samples of nodes this round missed: they age out by time.
                previous = self._per_source.get(source.name, {})
                self._per_source[source.name] = {**previous, **samples}
                errors.extend((source.name, kind, detail) for kind, detail in result.errors)
            now = self._clock()
            self._forget_old(now)
            cores: Mapping[str, float] = {}
            if self._node_cores is not None:
                try:
                    cores = self._node_cores()
                except Exception as exc:
                    errors.append(("node_cores", "fetch", str(exc)))
            ordered = [self._per_source.get(s.name, {}) for s in self.sources]
            self._samples = merge_samples(ordered, now, self.max_staleness_seconds, cores)
            for source_name, kind, _ in errors:
                self.errors[(source_name, kind)] = self.errors.get((source_name, kind), 0) + 1
            self.last_errors = errors
            self.last_refresh_time = now
            self.refreshes += 1
            view = self._samples
        for listener in self._listeners:
            try:
                listener(view)
            except Exception:
                log.exception("telemetry listener failed")

    def _clamp_future(
        self,
        source_name: str,
        samples: Mapping[str, NodeSample],
        fetched_at: float,
        errors: list[tuple[str, str, str]],
    ) -> dict[str, NodeSample]:
        """Samples with a time in the future get the time the store first fetched them (kept
        while the source repeats the same sample, so a stuck agent ahead still ages)."""
        out = dict(samples)
        for node, sample in samples.items():
            key = (source_name, node)
            reported = sample.telemetry.sample_time
            if reported <= fetched_at:
                self._ahead.pop(key, None)
                continue
            seen = self._ahead.get(key)
            if seen is None or seen[0] != reported:
                seen = self._ahead[key] = (reported, fetched_at)
            out[node] = replace(sample, telemetry=replace(sample.telemetry, sample_time=seen[1]))
            if reported - fetched_at > CLOCK_AHEAD_REPORT_SECONDS:
                errors.append(
                    (source_name, "clock_ahead", f"{node}: sample {reported - fetched_at:.1f} s ahead")
                )
        return out

    def _forget_old(self, now: float) -> None:
        """Drop nodes not heard of for a long time (deleted nodes, retired agents)."""
        horizon = max(FORGET_AFTER_SECONDS, 10 * self.max_staleness_seconds)
        for name, samples in self._per_source.items():
            self._per_source[name] = {
                node: s for node, s in samples.items() if s.telemetry.age_seconds(now) <= horizon
            }
        self._ahead = {
            key: seen for key, seen in self._ahead.items() if key[1] in self._per_source.get(key[0], {})
        }

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.refresh_once()
            self._stop.wait(max(0.0, self.refresh_seconds - (time.monotonic() - started)))

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_seconds)
            self._thread = None
        for source in self.sources:
            close = getattr(source, "close", None)
            if close is not None:
                close()
