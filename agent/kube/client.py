"""The agent's only door to the Kubernetes API — the one module that imports `kubernetes`.

It stays thin: it finds the API (in-cluster service account or a kubeconfig), lists and watches
the pods of one node (`fieldSelector=spec.nodeName=NODE`, never the whole cluster), and reads
metrics.k8s.io for that node and its pods. Everything it returns is plain JSON data (dicts as the
API sent them) and every failure is a `KubeError`, so the rest of the agent needs no Kubernetes
types. `NodePodWatch` keeps a watch alive: list, then watch from the list's resourceVersion,
re-list on every resync or reconnect, and back off while the API is away.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

import kubernetes.client
import kubernetes.config
import urllib3

from common.jsonvalue import JsonObject, subobject, subobjects

log = logging.getLogger("agent.kube")  # the name its log lines have always carried

METRICS_GROUP = "metrics.k8s.io"
METRICS_VERSION = "v1beta1"
# The RBAC rule each API call of KubeClient needs: (API group, resource, verb, scope).
# The deploy tests check that the agent's ClusterRole grants exactly the rules of the calls it makes.
PERMISSIONS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "list_node_pods": (("", "pods", "list", "cluster"),),
    "watch_node_pods": (("", "pods", "watch", "cluster"),),
    "get_node": (("", "nodes", "get", "cluster"),),
    "get_node_metrics": ((METRICS_GROUP, "nodes", "get", "cluster"),),
    "get_pod_metrics": ((METRICS_GROUP, "pods", "get", "cluster"),),
    "list_pod_metrics": ((METRICS_GROUP, "pods", "list", "cluster"),),
}
# A watch that the API server ends after this long (plus jitter) makes the agent list again,
# which repairs anything a lost event would have left wrong.
DEFAULT_RESYNC_SECONDS = 300.0
DEFAULT_REQUEST_TIMEOUT_SECONDS = 10.0
MIN_RELIST_SECONDS = 1.0


class KubeError(Exception):
    """The API could not be reached or refused a request.

    `status` is the HTTP status when the server answered, None when it could not be reached.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KubeConfigError(KubeError):
    """No way to reach the API was configured (not in a pod, no kubeconfig)."""


@dataclass(frozen=True)
class PodListing:
    items: list[JsonObject]
    resource_version: str | None


def _wrap(exc: BaseException, what: str) -> KubeError:
    if isinstance(exc, kubernetes.client.ApiException):
        reason = exc.reason or "error"
        return KubeError(f"{what}: HTTP {exc.status} {reason}", status=exc.status)
    return KubeError(f"{what}: {type(exc).__name__}: {exc}")


_TRANSPORT_ERRORS = (kubernetes.client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


class KubeClient:
    """A synchronous API client for one node's view of the cluster; safe to share between threads.

    Requests go through the client library's generic ApiClient (configuration, authentication,
    TLS) but not through its typed API classes: those cost about a second and 20 MB to import,
    and the agent wants the JSON anyway.
    """

    def __init__(self, configuration: kubernetes.client.Configuration, request_timeout_seconds: float) -> None:
        # Retries are ours (with backoff, in NodePodWatch and the metrics reader), not urllib3's.
        configuration.retries = False
        self.server: str = configuration.host
        self._api = kubernetes.client.ApiClient(configuration)
        self._api.user_agent = "kubejoule-agent"
        self._timeout = request_timeout_seconds
        self._lock = threading.Lock()
        self._watches: set[urllib3.BaseHTTPResponse] = set()

    @classmethod
    def connect(
        cls,
        kubeconfig: Path | None = None,
        context: str | None = None,
        request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS,
    ) -> KubeClient:
        """The in-cluster service account, else the kubeconfig (given, $KUBECONFIG, ~/.kube/config).

        Loading the configuration does not contact the API; a wrong address shows up as a
        KubeError on the first request.
        """
        configuration = kubernetes.client.Configuration()
        try:
            if kubeconfig is not None:
                kubernetes.config.load_kube_config(
                    config_file=str(kubeconfig), context=context, client_configuration=configuration, persist_config=False
                )
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                kubernetes.config.load_incluster_config(client_configuration=configuration)
            else:
                default = Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config")
                if not default.is_file():
                    raise KubeConfigError(
                        "not running in a pod (no KUBERNETES_SERVICE_HOST) and no kubeconfig "
                        f"(--kubeconfig, $KUBECONFIG or {default})"
                    )
                kubernetes.config.load_kube_config(
                    config_file=str(default), context=context, client_configuration=configuration, persist_config=False
                )
        except KubeConfigError:
            raise
        except Exception as exc:  # a kubeconfig can fail in many ways (YAML, files, exec plugins)
            raise KubeConfigError(f"cannot load the Kubernetes configuration: {exc}") from exc
        return cls(configuration, request_timeout_seconds)

    def _request(self, path: str, query: list[tuple[str, str]], timeout: float | tuple[float, float],
                 what: str) -> urllib3.BaseHTTPResponse:
        """GET PATH; the raw urllib3 response (body not read yet) of a 2xx answer."""
        try:
            method, url, headers, body, post = self._api.param_serialize(
                method="GET", resource_path=path, query_params=query,
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
            )
            response = self._api.call_api(method, url, headers, body, post, _request_timeout=timeout)
        except _TRANSPORT_ERRORS as exc:
            raise _wrap(exc, what) from exc
        if not 200 <= response.status <= 299:
            with contextlib.suppress(*_TRANSPORT_ERRORS):
                response.read()
            raise KubeError(f"{what}: HTTP {response.status} {response.reason or ''}".rstrip(), status=response.status)
        raw: urllib3.BaseHTTPResponse = response.response
        return raw

    def _get_json(self, path: str, query: list[tuple[str, str]], what: str) -> JsonObject:
        raw = self._request(path, query, self._timeout, what)
        try:
            body = json.loads(raw.data)
        except _TRANSPORT_ERRORS as exc:
            raise _wrap(exc, what) from exc
        finally:
            raw.release_conn()
        if not isinstance(body, dict):
            raise KubeError(f"{what}: the answer is not a JSON object")
        return body

    # -- pods ------------------------------------------------------------------------------

    @staticmethod
    def node_selector(node: str) -> str:
        return f"spec.nodeName={node}"

    def list_node_pods(self, node: str) -> PodListing:
        """The pods scheduled to NODE (all namespaces), as the API's JSON."""
        body = self._get_json(
            "/api/v1/pods", [("fieldSelector", self.node_selector(node))], f"listing the pods of node {node}"
        )
        resource_version = subobject(body, "metadata").get("resourceVersion")
        return PodListing(list[JsonObject](subobjects(body, "items")), str(resource_version) if resource_version else None)

    def watch_node_pods(
        self, node: str, resource_version: str | None, timeout_seconds: float
    ) -> Iterator[tuple[str, JsonObject]]:
        """Watch events (type, pod JSON) for NODE's pods until the server ends the watch.

        An ERROR event raises KubeError with its code (410 Gone: the resourceVersion is too old,
        list again). `stop_watches()` from another thread ends the iteration early.
        """
        query = [
            ("fieldSelector", self.node_selector(node)),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(max(1, int(timeout_seconds)))),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        what = f"watching the pods of node {node}"
        # The server ends the watch after timeoutSeconds; a connection silent for longer is dead.
        raw = self._request("/api/v1/pods", query, (self._timeout, timeout_seconds + self._timeout), what)
        with self._lock:
            self._watches.add(raw)
        try:
            buffer = b""
            for chunk in raw.stream(amt=None, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield self._watch_event(line, what)
        except KubeError:
            raise
        except _TRANSPORT_ERRORS as exc:
            with self._lock:
                stopped = raw not in self._watches
            if not stopped:
                raise _wrap(exc, what) from exc
        finally:
            with self._lock:
                self._watches.discard(raw)
            raw.release_conn()

    @staticmethod
    def _watch_event(line: bytes, what: str) -> tuple[str, JsonObject]:
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise KubeError(f"{what}: unreadable event: {exc}") from exc
        if not isinstance(event, dict):
            event = {}
        kind = str(event.get("type", ""))
        obj = subobject(event, "object")
        if kind == "ERROR":
            code = obj.get("code")
            raise KubeError(
                f"{what}: {obj.get('reason')}: {obj.get('message')}", status=code if isinstance(code, int) else None
            )
        return kind, obj

    def stop_watches(self) -> None:
        """End every open watch now (for shutdown): their iterators finish without error."""
        with self._lock:
            responses = list(self._watches)
            self._watches.clear()
        for raw in responses:
            # Best effort: the socket may be gone already.
            with contextlib.suppress(Exception):
                raw.shutdown()

    def get_node(self, node: str) -> JsonObject:
        """The agent's own Node (its instance-type label and providerID: common/cloud_estimates.py)."""
        return self._get_json(f"/api/v1/nodes/{quote(node, safe='')}", [], f"reading node {node}")

    # -- metrics.k8s.io --------------------------------------------------------------------

    def get_node_metrics(self, node: str) -> JsonObject:
        """NodeMetrics for NODE. KubeError(status=404) when Metrics Server or the node is absent."""
        return self._get_json(
            f"/apis/{METRICS_GROUP}/{METRICS_VERSION}/nodes/{quote(node, safe='')}", [],
            f"reading {METRICS_GROUP} for node {node}",
        )

    def get_pod_metrics(self, namespace: str, name: str) -> JsonObject:
        """PodMetrics for one pod. KubeError(status=404) when there is none (yet)."""
        return self._get_json(
            f"/apis/{METRICS_GROUP}/{METRICS_VERSION}/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}",
            [], f"reading {METRICS_GROUP} for pod {namespace}/{name}",
        )

    def list_pod_metrics(self, namespace: str) -> list[JsonObject]:
        """PodMetrics of every pod of NAMESPACE that Metrics Server has, in one GET."""
        what = f"listing {METRICS_GROUP} pods of namespace {namespace}"
        body = self._get_json(
            f"/apis/{METRICS_GROUP}/{METRICS_VERSION}/namespaces/{quote(namespace, safe='')}/pods", [], what
        )
        items = body.get("items")
        if not isinstance(items, list):
            raise KubeError(f"{what}: the answer has no items list")
        return [item for item in items if isinstance(item, Mapping)]

    def close(self) -> None:
        self.stop_watches()
        self._api.close()


# -- keeping a watch alive ------------------------------------------------------------------


class PodEvents(Protocol):
    """Where NodePodWatch delivers what it learns (podmeta.PodMetadataCache)."""

    def replace(self, pods: list[JsonObject]) -> None: ...

    def apply(self, event_type: str, pod: JsonObject) -> None: ...


@dataclass
class Backoff:
    """Exponential backoff with jitter: initial, ×2 each failure, capped; reset on success."""

    initial_seconds: float = 1.0
    max_seconds: float = 60.0
    jitter: float = 0.2
    failures: int = 0

    def next_delay(self, rand: Callable[[], float] = random.random) -> float:
        base = min(self.max_seconds, self.initial_seconds * (2 ** self.failures))
        self.failures += 1
        return base * (1.0 + self.jitter * (2.0 * rand() - 1.0))

    def reset(self) -> None:
        self.failures = 0


class NodePodWatch:
    """A background thread that keeps PodEvents up to date with the pods of one node.

    Never raises into the agent and never dies: while the API is away (or anything unexpected
    happens) it logs once, counts each failed attempt (`failures`) and tries again with backoff;
    when the API answers again it lists afresh.
    """

    def __init__(
        self,
        client: KubeClient,
        node: str,
        sink: PodEvents,
        resync_seconds: float = DEFAULT_RESYNC_SECONDS,
        backoff: Backoff | None = None,
        on_error: Callable[[KubeError], None] | None = None,
    ) -> None:
        self.client = client
        self.node = node
        self.sink = sink
        self.resync_seconds = resync_seconds
        self.backoff = backoff or Backoff()
        self.on_error = on_error
        self.failures = 0  # failed attempts since start (for the errors counter)
        self.connected = False
        self.lists = 0  # successful lists (initial, resyncs, reconnects)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubejoule-pod-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        while self._thread is not None and self._thread.is_alive() and time.monotonic() < deadline:
            # Again and again: a watch opened just after the first call must be cut as well.
            self.client.stop_watches()
            self._thread.join(0.05)

    def _run(self) -> None:
        outage_logged = False
        last_list = float("-inf")
        while not self._stop.is_set():
            # A server that ends every watch at once must not make us list in a tight loop.
            wait = MIN_RELIST_SECONDS - (time.monotonic() - last_list)
            if wait > 0 and self._stop.wait(wait):
                break
            last_list = time.monotonic()
            try:
                listing = self.client.list_node_pods(self.node)
                self.sink.replace(listing.items)
                self.lists += 1
                self.backoff.reset()
                if outage_logged:
                    log.warning("pod watch for node %s is connected again", self.node)
                    outage_logged = False
                self.connected = True  # last: whoever sees it connected also sees it said so
                self._watch(listing.resource_version)
            except Exception as exc:  # noqa: BLE001 - the watch must outlive any surprise in the data
                self.connected = False
                if self._stop.is_set():
                    break
                expected = isinstance(exc, KubeError)
                if isinstance(exc, KubeError) and exc.status == 410:  # our resourceVersion is too old
                    continue
                self.failures += 1
                if self.on_error is not None:
                    self.on_error(exc if isinstance(exc, KubeError) else KubeError(f"unexpected {exc!r}"))
                if not outage_logged:
                    log.warning(
                        "pod watch for node %s failed (%s); pod series keep their pod_uid with empty "
                        "names until the API answers again; retrying with backoff",
                        self.node,
                        exc if expected else f"unexpected {exc!r}",
                        exc_info=not expected,  # a bug's traceback, once
                    )
                    outage_logged = True
                self._stop.wait(self.backoff.next_delay())

    def _watch(self, resource_version: str | None) -> None:
        # Spread the resyncs of many agents over time.
        timeout = self.resync_seconds * (1.0 + 0.1 * random.random())
        for event_type, pod in self.client.watch_node_pods(self.node, resource_version, timeout):
            if self._stop.is_set():
                return
            if event_type == "BOOKMARK":
                continue
            # Defence in depth: the field selector should already have kept other nodes out.
            if subobject(pod, "spec").get("nodeName") not in (None, self.node):
                continue
            self.sink.apply(event_type, pod)
