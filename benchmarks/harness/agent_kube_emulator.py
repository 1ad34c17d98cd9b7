"""A Kubernetes API for the agent's tests: kmock's KubernetesEmulator on 127.0.0.1, run on its own
event loop in a background thread so that synchronous code (the agent) can talk to it.

The emulator keeps its objects while its HTTP server is stopped and started again on the same
port, which is how tests take the API away mid-run and bring it back. Two things it does not do by
itself are added here, because the agent relies on them from a real API server:

- `fieldSelector=spec.nodeName=X` on pod lists and watches (kmock ignores field selectors);
- `timeoutSeconds` on watches: the server ends the watch then, which is how the agent resyncs
  (kmock keeps every watch open until the client goes);
- `resourceVersion` on stored pods (so that watches can resume).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import threading
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import kmock
import yaml
from kmock._internal import rendering

from agent.kube.client import KubeClient

T = TypeVar("T")

PODS = kmock.resource("", "v1", "pods")
NODES = kmock.resource("", "v1", "nodes")
NODE_METRICS = kmock.resource("metrics.k8s.io", "v1beta1", "nodes")
POD_METRICS = kmock.resource("metrics.k8s.io", "v1beta1", "pods")


def _field_matches(obj: Any, selector: str | None) -> bool:
    """Evaluate a comma-separated `path=value` / `path!=value` field selector on an object."""
    if not selector:
        return True
    for term in selector.split(","):
        negate = "!=" in term
        path, _, wanted = term.partition("!=" if negate else "=")
        value: Any = obj
        for part in path.strip().split("."):
            value = value.get(part) if isinstance(value, dict) else None
        equal = (value if value is not None else "") == wanted.lstrip("=").strip()
        if equal == negate:
            return False
    return True


class SelectingEmulator(kmock.KubernetesEmulator):
    """The emulator, honouring field selectors on lists and watches as the API server does."""

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_list(request)
        selector = request.params.get("fieldSelector")
        assert isinstance(payload, dict)
        payload["items"] = [item for item in payload["items"] if _field_matches(item, selector)]
        return payload

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        selector = request.params.get("fieldSelector")
        timeout = request.params.get("timeoutSeconds")
        deadline = asyncio.get_running_loop().time() + float(timeout) if timeout else None
        events = cast(AsyncGenerator[rendering.Payload, None], super()._serve_watch(request))
        try:
            while True:
                remaining = None if deadline is None else deadline - asyncio.get_running_loop().time()
                if remaining is not None and remaining <= 0:
                    return
                try:
                    event = await asyncio.wait_for(anext(events), remaining)
                except (StopAsyncIteration, TimeoutError):
                    return
                if isinstance(event, dict) and not _field_matches(event.get("object", {}), selector):
                    continue
                yield event
        finally:
            await events.aclose()


class EmulatedCluster:
    """The emulator in a background thread: start, stop and start it again on the same port.

    As a context manager it serves on entry and is closed on exit."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="kmock", daemon=True)
        self.thread.start()
        self.handler = SelectingEmulator()
        for res, kind, namespaced in ((PODS, "Pod", True), (NODES, "Node", False), (NODE_METRICS, "NodeMetrics", False), (POD_METRICS, "PodMetrics", True)):
            self.handler.resources[res] = kmock.ResourceInfo(kind=kind, namespaced=namespaced, verbs={"get", "list", "watch"})
        self._server: kmock.Server | None = None
        self.port: int | None = None
        self._versions = itertools.count(1)
        self._call(self.handler.__aenter__())

    def __enter__(self) -> EmulatedCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float = 10) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # -- the server ------------------------------------------------------------------------

    def start(self) -> None:
        """Serve on 127.0.0.1 — on a new port the first time, on the same port after that."""
        assert self._server is None, "already serving"

        async def enter() -> kmock.Server:
            server = kmock.Server(self.handler, port=self.port)
            await server.__aenter__()
            return server

        self._server = self._call(enter())
        self.port = self._server.port

    def stop(self) -> None:
        """Stop serving (open watches are cut); the objects are kept for the next start()."""
        server, self._server = self._server, None
        if server is None:
            return

        async def leave() -> None:
            # Cut the streaming watch responses first: a graceful shutdown would wait for them.
            runner = server.server.runner
            web_server = runner.server if runner is not None else None
            for connection in list(getattr(web_server, "connections", []) or []):
                connection.force_close()
            await server.__aexit__(None, None, None)

        self._call(leave(), timeout=30)

    @property
    def url(self) -> str:
        assert self.port is not None, "not started"
        return f"http://127.0.0.1:{self.port}"

    def write_kubeconfig(self, path: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kmock", "cluster": {"server": self.url}}],
            "users": [{"name": "agent", "user": {"token": "test-token"}}],
            "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "agent"}}],
            "current-context": "kmock",
        }
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    @contextlib.contextmanager
    def client(self, directory: Path, request_timeout_seconds: float = 3.0) -> Iterator[KubeClient]:
        """The agent's client for this API, through a kubeconfig written in DIRECTORY."""
        client = KubeClient.connect(self.write_kubeconfig(directory / "kubeconfig"), request_timeout_seconds=request_timeout_seconds)
        try:
            yield client
        finally:
            client.close()

    def close(self) -> None:
        self.stop()
        self._call(self.handler.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def requests_for(self, plural: str) -> list[rendering.Request]:
        return [r for r in list(self.handler) if r.resource is not None and r.resource.plural == plural]

    # -- objects ---------------------------------------------------------------------------

    def add_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        uid: str | None = None,
        owner_kind: str | None = "ReplicaSet",
        host_network: bool = False,
    ) -> str:
        """Create a pod through the API (so that watches see ADDED); returns its uid."""
        uid = uid or str(uuid.uuid4())
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": str(next(self._versions)),
        }
        if owner_kind:
            metadata["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": owner_kind, "name": f"{name}-owner", "uid": str(uuid.uuid4()), "controller": True}
            ]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"nodeName": node, "hostNetwork": host_network, "containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Running"},
        }
        self._request("post", f"/api/v1/namespaces/{namespace}/pods", pod)
        return uid

    def add_node(self, name: str, labels: dict[str, str], provider_id: str | None = None) -> None:
        """Create a Node (the agent reads its own: instance-type label and providerID)."""
        spec = {"providerID": provider_id} if provider_id else {}
        node = {"apiVersion": "v1", "kind": "Node", "spec": spec,
                "metadata": {"name": name, "labels": labels, "resourceVersion": str(next(self._versions))}}
        self._request("post", "/api/v1/nodes", node)

    def delete_pod(self, namespace: str, name: str) -> None:
        self._request("delete", f"/api/v1/namespaces/{namespace}/pods/{name}", None)

    def _request(self, method: str, path: str, body: Any) -> None:
        async def send() -> None:
            assert self._server is not None, "the emulator must be serving to change objects"
            async with self._server.client.request(method, path, json=body) as response:
                assert response.status < 300, await response.text()

        self._call(send())

    def set_node_metrics(self, node: str, cpu: str, memory: str, timestamp: str, window: str = "15s") -> None:
        self.handler.objects[NODE_METRICS, None, node] = {
            "apiVersion": "metrics.k8s.io/v1beta1",
            "kind": "NodeMetrics",
            "metadata": {"name": node},
            "timestamp": timestamp,
            "window": window,
            "usage": {"cpu": cpu, "memory": memory},
        }

    def set_pod_metrics(
        self, namespace: str, name: str, containers: dict[str, tuple[str, str]], timestamp: str, window: str = "15s"
    ) -> None:
        """containers: container name → (cpu quantity, memory quantity)."""
        self.handler.objects[POD_METRICS, namespace, name] = {
            "apiVersion": "metrics.k8s.io/v1beta1",
            "kind": "PodMetrics",
            "metadata": {"name": name, "namespace": namespace},
            "timestamp": timestamp,
            "window": window,
            "containers": [
                {"name": cname, "usage": {"cpu": cpu, "memory": memory}} for cname, (cpu, memory) in containers.items()
            ],
        }

    def delete_metrics(self) -> None:
        """Take metrics.k8s.io away, as on a cluster without Metrics Server."""
        for key in list(self.handler.objects):
            if key[0] in (NODE_METRICS, POD_METRICS):
                del self.handler.objects[key]
        for res in (NODE_METRICS, POD_METRICS):
            if res in self.handler.resources:
                del self.handler.resources[res]

    def snapshot_objects(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(obj.raw) for obj in self.handler.objects.values() if not obj.deleted]


def unreachable_kubeconfig(path: Path) -> Path:
    """A kubeconfig for an API server that has gone away (its port is closed)."""
    with EmulatedCluster() as cluster:
        cluster.write_kubeconfig(path)
    return path
