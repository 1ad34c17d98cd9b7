"""Keeping a ClusterCache in step with the API server: list, then watch; list again on 410.

One thread per kind (nodes, pods), as an informer does it. Each thread lists its kind, applies
the listing to the cache, then watches from there and applies every event in order; when the
server says the resourceVersion is too old (410 Gone) it lists again, and on any other failure
it backs off (0.5 s doubling to 30 s) and resumes the watch. A listing is applied only by the
thread that watches the same kind, so a listing older than events already applied can never
roll them back.

Both schedulers use it: the standalone scheduler (`standalone/`) with its own handlers, which
also feed its scheduling queue, and the extender (`cmd/cli.py`), with the plain handlers below, so
that `/prioritize` counts pods bound since each node's telemetry sample.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from common.jsonvalue import subobject
from scheduler.cluster import kube
from scheduler.cluster.cache import ClusterCache
from scheduler.domain.model import NodeState, NodeTelemetry

log = logging.getLogger(__name__)

MAX_WATCH_BACKOFF_SECONDS = 30.0
FIRST_WATCH_BACKOFF_SECONDS = 0.5


class Watch(Protocol):
    def __iter__(self) -> Iterator[dict[str, object]]: ...

    def close(self) -> None: ...


class WatchApi(Protocol):
    """The list and watch calls the cache needs; `KubeWatchApi` is the real one."""

    def list_pods(self) -> tuple[list[dict[str, object]], str | None]: ...

    def list_nodes(self) -> tuple[list[dict[str, object]], str | None]: ...

    def watch_pods(self, resource_version: str | None) -> Watch: ...

    def watch_nodes(self, resource_version: str | None) -> Watch: ...


class KubeWatchApi:
    """WatchApi over the Kubernetes API (scheduler/cluster/kube.py)."""

    # kube-scheduler's pod informer skips terminated pods: they hold no resources.
    POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

    def __init__(
        self, api: kube.ApiClient, timeout_seconds: float = 10.0, watch_timeout_seconds: int = 300
    ) -> None:
        self.api = api
        self.timeout_seconds = timeout_seconds
        self.watch_timeout_seconds = watch_timeout_seconds

    def list_pods(self) -> tuple[list[dict[str, object]], str | None]:
        return kube.list_pods(self.api, self.POD_FIELD_SELECTOR)

    def list_nodes(self) -> tuple[list[dict[str, object]], str | None]:
        return kube.list_nodes(self.api)

    def watch_pods(self, resource_version: str | None) -> Watch:
        return kube.watch_pods(
            self.api,
            resource_version,
            self.POD_FIELD_SELECTOR,
            self.watch_timeout_seconds,
            self.watch_timeout_seconds + 30.0,
        )

    def watch_nodes(self, resource_version: str | None) -> Watch:
        return kube.watch_nodes(
            self.api,
            resource_version,
            self.watch_timeout_seconds,
            self.watch_timeout_seconds + 30.0,
        )


EventHandler = Callable[[str, Mapping[str, object]], None]


class ClusterWatch:
    """Feeds `cache` from `api`. The handlers default to plain cache updates; the standalone
    scheduler passes its own (which update the cache and its queue). `on_pods_listed` gets the
    keys of the pods waiting for this scheduler after each pod listing."""

    def __init__(
        self,
        api: WatchApi,
        cache: ClusterCache,
        on_pod_event: EventHandler | None = None,
        on_node_event: EventHandler | None = None,
        on_pods_listed: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.api = api
        self.cache = cache
        self.on_pod_event = on_pod_event or self.apply_pod
        self.on_node_event = on_node_event or self.apply_node
        self.on_pods_listed = on_pods_listed
        self.pods_synced = threading.Event()
        self.nodes_synced = threading.Event()
        self.failures = 0  # watch or list failures since start (not 410s)
        self._streams: set[Watch] = set()
        self._streams_lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Called (from a watch thread) after each listing and each event applied; must be
        cheap (the extender's only wakes its preparer thread)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            try:
                listener()
            except Exception:
                log.exception("cluster listener failed")

    # -- plain handlers --

    def apply_pod(self, kind: str, obj: Mapping[str, object]) -> None:
        if kind == "DELETED":
            self.cache.delete_pod(obj)
        else:
            self.cache.upsert_pod(obj)

    def apply_node(self, kind: str, obj: Mapping[str, object]) -> None:
        if kind == "DELETED":
            self.cache.delete_node(str(subobject(obj, "metadata").get("name") or ""))
        else:
            self.cache.upsert_node(obj)

    def relist_nodes(self) -> None:
        nodes, _ = self.api.list_nodes()
        self.cache.replace_nodes(nodes)

    def relist_pods(self) -> None:
        pods, _ = self.api.list_pods()
        pending = self.cache.replace_pods(pods)
        if self.on_pods_listed is not None:
            self.on_pods_listed(pending)

    # -- reading (the extender's ClusterView) --

    @property
    def synced(self) -> bool:
        """Both kinds listed at least once."""
        return self.nodes_synced.is_set() and self.pods_synced.is_set()

    def node_states(
        self, telemetry: Callable[[str], NodeTelemetry | None] | None = None
    ) -> list[NodeState]:
        """The cache's node states once both kinds are synced; none before (a node list
        without its pods would make every node look empty)."""
        return self.cache.node_states(telemetry) if self.synced else []

    # -- running --

    def run_kind(
        self,
        name: str,
        stop: threading.Event,
        synced: threading.Event,
        relist: Callable[[], None],
        watch: Callable[[str | None], Watch],
        apply: EventHandler,
    ) -> None:
        """List, then watch and apply, until `stop` is set (one kind; its own thread)."""
        need_list = True
        version: str | None = None
        failures = 0
        while not stop.is_set():
            try:
                if need_list:
                    relist()
                    need_list = False
                    synced.set()
                    self._changed()
                stream = watch(version)
                with self._streams_lock:
                    self._streams.add(stream)
                try:
                    for event in stream:
                        failures = 0
                        obj = subobject(event, "object")
                        seen = subobject(obj, "metadata").get("resourceVersion")
                        version = seen if isinstance(seen, str) and seen else version
                        if event.get("type") != "BOOKMARK":
                            apply(str(event.get("type")), obj)
                            self._changed()
                        if stop.is_set():
                            break
                finally:
                    with self._streams_lock:
                        self._streams.discard(stream)
                    stream.close()
            except kube.ApiError as exc:
                if exc.status == 410:  # our resourceVersion is too old: list again
                    need_list = True
                    continue
                failures += 1
                self.failures += 1
                log.warning("%s watch failed: %s", name, exc)
                stop.wait(_backoff(failures))
            except Exception:
                failures += 1
                self.failures += 1
                log.exception("%s watch failed", name)
                stop.wait(_backoff(failures))

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        """One daemon thread per kind; they end when `stop` is set and close() is called."""
        kinds = (
            ("nodes", self.nodes_synced, self.relist_nodes, self.api.watch_nodes, self.on_node_event),
            ("pods", self.pods_synced, self.relist_pods, self.api.watch_pods, self.on_pod_event),
        )
        threads = [
            threading.Thread(
                target=self.run_kind,
                args=(name, stop, synced, relist, watch, apply),
                name=f"watch-{name}",
                daemon=True,
            )
            for name, synced, relist, watch, apply in kinds
        ]
        for thread in threads:
            thread.start()
        return threads

    def close(self) -> None:
        """Close the open watch streams (their threads then see `stop` and end)."""
        with self._streams_lock:
            streams = list(self._streams)
        for stream in streams:
            stream.close()


def _backoff(failures: int) -> float:
    return min(MAX_WATCH_BACKOFF_SECONDS, FIRST_WATCH_BACKOFF_SECONDS * 2 ** min(failures, 6))
