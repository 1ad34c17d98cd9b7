"""The API calls the scheduler makes, the binder threads, and the shadow-mode recommendation."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import ParamSpec, Protocol

from scheduler.cluster import kube
from scheduler.cluster.watch import KubeWatchApi, WatchApi
from scheduler.decisions.placement import Decision
from scheduler.domain.model import PodInfo
from scheduler.standalone.settings import EVENT_MESSAGE_MAX_CHARS, RECOMMENDED_SCORES

P = ParamSpec("P")


class ClusterApi(WatchApi, Protocol):
    """The API calls the scheduler makes; `KubeClusterApi` is the real one."""

    def bind(self, pod: PodInfo, node: str) -> None: ...

    def get_pod(self, namespace: str, name: str) -> dict[str, object] | None: ...

    def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, object]) -> None: ...

    def create_event(self, namespace: str, event: Mapping[str, object]) -> None: ...

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, object]) -> None: ...


class KubeClusterApi(KubeWatchApi):
    """ClusterApi over the Kubernetes API (scheduler/cluster/kube.py)."""

    def bind(self, pod: PodInfo, node: str) -> None:
        kube.bind_pod(self.api, pod.namespace, pod.name, pod.uid, node, self.timeout_seconds)

    def get_pod(self, namespace: str, name: str) -> dict[str, object] | None:
        return kube.get_pod(self.api, namespace, name, self.timeout_seconds)

    def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, object]) -> None:
        kube.patch_pod_status(self.api, namespace, name, patch, self.timeout_seconds)

    def create_event(self, namespace: str, event: Mapping[str, object]) -> None:
        kube.create_event(self.api, namespace, event, self.timeout_seconds)

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, object]) -> None:
        kube.patch_event(self.api, namespace, name, patch, self.timeout_seconds)


def recommendation_message(decision: Decision) -> str:
    """Shadow mode's advice, as an Event message: the energy pick and the best energy scores
    (JSON). An Event, not an annotation: writing on pods would need the right to patch any pod."""
    scores = json.dumps(decision.top_scores(RECOMMENDED_SCORES), separators=(",", ":"))
    message = f"energy recommendation: {decision.recommended or 'none'}; scores: {scores}"
    return message[:EVENT_MESSAGE_MAX_CHARS]


class BinderPool:
    """Binding calls in a few threads, so the next pod is decided while the API answers; keeps
    the bindings in flight so that `drain` can wait for every one of them."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="scheduler-bind")
        self._inflight: set[Future[str]] = set()
        self._lock = threading.Lock()

    def submit(self, bind: Callable[P, str], /, *args: P.args, **kwargs: P.kwargs) -> None:
        future = self._pool.submit(bind, *args, **kwargs)
        with self._lock:
            self._inflight.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future[str]) -> None:
        with self._lock:
            self._inflight.discard(future)

    def drain(self, timeout_seconds: float) -> None:
        # Every binding in flight, not a no-op on one worker: with several binder threads a
        # no-op can finish while another thread is still binding.
        with self._lock:
            pending = list(self._inflight)
        wait(pending, timeout=timeout_seconds)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
