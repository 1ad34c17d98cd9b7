"""Telemetry sources: the agents scraped directly, a Prometheus HTTP API, metrics-server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, overload

import httpx
import msgspec

from common.jsonvalue import subobject
from common.quantity import parse_quantity
from scheduler.domain.model import NodeTelemetry
from scheduler.telemetry.discovery import cores_from_nodes
from scheduler.telemetry.exposition import (
    M_CURVE,
    M_GPU_INFO,
    M_GPU_POWER,
    M_PLATFORM_OTHER,
    M_POD_POWER,
    M_POWER,
    M_TIMESTAMP,
    M_UTILIZATION,
    SeriesFolder,
    parse_agent_metrics,
)
from scheduler.telemetry.samples import FetchResult, NodeSample

if TYPE_CHECKING:
    from scheduler.cluster.kube import ApiClient

# The largest answers read: an agent's /metrics (a node with 110 pods is well under 1 MiB) and a
# Prometheus query's (every node's curve points on a 5,000-node cluster: about 16 MiB). Past
# them the answer is an error, read no further: memory is never the answerer's to choose.
MAX_AGENT_ANSWER_BYTES = 16 * 1024 * 1024
MAX_PROMETHEUS_ANSWER_BYTES = 64 * 1024 * 1024


def get_limited(client: httpx.Client, url: str, max_bytes: int, params: Mapping[str, str] | None = None) -> bytes:
    """GET url's body, at most MAX_BYTES of it (ValueError past that); HTTPError as httpx's."""
    with client.stream("GET", url, params=params) as response:
        response.raise_for_status()
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise ValueError(f"answer of {int(declared)} bytes, more than the {max_bytes} read")
        chunks, total = [], 0
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > max_bytes:
                raise ValueError(f"answer larger than the {max_bytes} bytes read")
            chunks.append(chunk)
    return b"".join(chunks)


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
            content = get_limited(self._client, url, MAX_AGENT_ANSWER_BYTES)
            result = parse_agent_metrics(content.decode("utf-8", errors="replace"), self.name)
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


# Per node: its pods, each once (two jobs scraping one agent give two series per pod), by the
# owner kind a DaemonSet or static pod carries. One series per node and owner kind instead of
# one per pod: at 5,000 nodes the pod series were most of a refresh's 30 MB.
POD_COUNT_QUERY = (
    f"count by (node, owner_kind) (group by (node, owner_kind, pod_uid, namespace, pod) ({M_POD_POWER}))"
)
# Per node: its GPUs' watts (each GPU once, however many jobs scrape the agent) and how many
# GPUs it has; one series per GPU node (exposition.py: what a CPU-side curve is missing).
GPU_WATTS_QUERY = f"sum by (node) (max by (node, gpu_uuid, gpu) ({M_GPU_POWER}))"
GPU_COUNT_QUERY = f"count by (node) (group by (node, gpu_uuid, gpu) ({M_GPU_INFO}))"
# Calibration curves change when a node is recalibrated, not between refreshes: eleven series a
# node are read again only this often (and after a failed read).
CURVE_REFRESH_SECONDS = 60.0


class _Labels(msgspec.Struct):
    """The labels of a series that the source reads (a series' other labels are skipped)."""

    node: str | None = None
    source: str | None = None
    owner_kind: str | None = None
    utilization: str | None = None
    reading: str | None = None

    @overload
    def get(self, key: str, /) -> str | None: ...
    @overload
    def get(self, key: str, default: str, /) -> str: ...

    def get(self, key: str, default: str | None = None, /) -> str | None:
        """As a dict of the labels read: a label not read (or absent) is `default`."""
        value: str | None = getattr(self, key) if key in self.__struct_fields__ else None
        return default if value is None else value


class _Series(msgspec.Struct):
    metric: _Labels = msgspec.field(default_factory=_Labels)
    value: tuple[float, str] = (0.0, "NaN")


class _Data(msgspec.Struct):
    resultType: str = ""  # noqa: N815 (Prometheus' key)
    result: list[_Series] = msgspec.field(default_factory=list)


class _Answer(msgspec.Struct):
    status: str = ""
    data: _Data | None = None
    error: object = None  # Prometheus' message (a string)


# The /api/v1/query answer, decoded by msgspec into the few fields read: at 5,000 nodes a
# refresh's answers are megabytes, and a decode into dicts (orjson) then walking them in Python
# cost several times more.
_ANSWER = msgspec.json.Decoder(_Answer)


class PrometheusSource:
    """Reads the agents' series from a Prometheus HTTP API (`/api/v1/query`): every refresh the
    node series and the per-node pod counts, the curves every CURVE_REFRESH_SECONDS."""

    name = "prometheus"

    QUERIES: tuple[str, ...] = (
        M_POWER, M_UTILIZATION, M_TIMESTAMP, POD_COUNT_QUERY, GPU_WATTS_QUERY, GPU_COUNT_QUERY, M_PLATFORM_OTHER,
    )
    CURVE_QUERY = M_CURVE

    def __init__(
        self,
        url: str,
        timeout_seconds: float = 5.0,
        curve_refresh_seconds: float = CURVE_REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._base = url.rstrip("/")
        self._client = httpx.Client(timeout=timeout_seconds)
        self._curve_refresh = curve_refresh_seconds
        self._clock = clock
        self._curves: dict[str, tuple[dict[int, float], str]] = {}  # node → (curve, its reading)
        self._curves_read: float | None = None
        self._gpu_nodes: set[str] = set()  # nodes with GPUs at the last answered GPU queries

    def _query(self, promql: str) -> list[_Series]:
        content = get_limited(self._client, f"{self._base}/api/v1/query", MAX_PROMETHEUS_ANSWER_BYTES,
                              params={"query": promql})
        try:
            body = _ANSWER.decode(content)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ValueError(f"prometheus: not a query answer: {exc}") from exc
        if body.status != "success":
            raise ValueError(f"prometheus: {body.error or body.status or 'no status'}")
        data = body.data or _Data()
        if data.resultType != "vector":
            raise ValueError(f"prometheus: expected a vector, got {data.resultType}")
        return data.result

    def fetch(self) -> FetchResult:
        folder = SeriesFolder()
        errors: list[tuple[str, str]] = []
        gpus_read = True
        for metric in self.QUERIES:
            series = self._series(metric, errors)
            if series is None:
                gpus_read = gpus_read and metric not in (GPU_WATTS_QUERY, GPU_COUNT_QUERY)
                continue
            if metric == POD_COUNT_QUERY:
                for item in series:
                    folder.add_pod_count(item.metric, float(item.value[1]))
                continue
            if metric in (GPU_WATTS_QUERY, GPU_COUNT_QUERY):
                for item in series:
                    value = float(item.value[1])
                    if metric == GPU_WATTS_QUERY:
                        folder.add_gpu_total(item.metric, value)
                    else:
                        folder.add_gpu_total(item.metric, 0.0, count=value)
                continue
            for item in series:
                folder.add(metric, item.metric, float(item.value[1]))
        # Without the GPU answers, the nodes known to have GPUs have unknown watts outside their
        # curve (never priced as CPU-only nodes); with them, those nodes are learnt again.
        if gpus_read:
            self._gpu_nodes = folder.nodes_with_gpus()
        else:
            for node in self._gpu_nodes:
                folder.gpus_unknown(node)
        self._refresh_curves(errors)
        for node, (curve, reading) in self._curves.items():
            folder.set_curve(node, curve, reading)
        result = folder.samples(self.name)
        result.errors[:0] = errors
        return result

    def _series(self, promql: str, errors: list[tuple[str, str]]) -> list[_Series] | None:
        try:
            series = self._query(promql)
        except (httpx.HTTPError, ValueError) as exc:
            errors.append(("prometheus", f"{promql}: {exc}"))
            return None
        # Newest timestamp last, so that the freshest duplicate (two jobs, a restart) wins.
        return sorted(series, key=lambda s: s.value[0])

    def _refresh_curves(self, errors: list[tuple[str, str]]) -> None:
        now = self._clock()
        if self._curves_read is not None and now - self._curves_read < self._curve_refresh:
            return
        series = self._series(self.CURVE_QUERY, errors)
        if series is None:
            return  # keep the curves read before; try again next refresh
        folder = SeriesFolder()
        for item in series:
            folder.add(M_CURVE, item.metric, float(item.value[1]))
        self._curves = {node: (part.curve, part.curve_reading) for node, part in folder.nodes.items() if part.curve}
        self._curves_read = now

    def close(self) -> None:
        self._client.close()


def parse_rfc3339(value: str) -> float:
    """`2024-05-01T12:00:00Z` → wall-clock seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def samples_from_node_metrics(
    items: Iterable[Mapping[str, object]], cores: Mapping[str, float], source_name: str = "metrics-server"
) -> FetchResult:
    """Utilization from metrics.k8s.io NodeMetrics: usage.cpu over the node's cores."""
    result = FetchResult()
    for item in items:
        node = subobject(item, "metadata").get("name")
        usage = subobject(item, "usage").get("cpu")
        stamp = item.get("timestamp")
        if not isinstance(node, str) or not node or not isinstance(usage, str | int | float) or not stamp:
            continue
        node_cores = cores.get(node)
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


class MetricsServerSource:
    """Node utilization from metrics.k8s.io (no watts); cores from the Node objects."""

    name = "metrics-server"

    def __init__(self, api: ApiClient) -> None:
        self._api = api

    def fetch(self) -> FetchResult:
        from scheduler.cluster import kube

        cores = cores_from_nodes(kube.list_nodes_json(self._api))
        return samples_from_node_metrics(kube.list_node_metrics(self._api), cores, self.name)
