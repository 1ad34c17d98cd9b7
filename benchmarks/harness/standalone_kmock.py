"""An emulated Kubernetes API for the scheduler's tests and benchmarks: `EmulatedCluster` runs
kmock's KubernetesEmulator, completed where a scheduler needs it (benchmarks/harness/kmock_api.py:
bindings, evictions, optimistic concurrency, watches that miss nothing), on 127.0.0.1 from an event
loop in a background thread, with synchronous helpers for tests. The scheduler under test uses
the real `kubernetes` client against `EmulatedCluster.url`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

import kmock

from benchmarks.harness.kmock_api import BindingAttempt, ClusterEmulator, EvictionAttempt


class EmulatedCluster:
    """A ClusterEmulator on 127.0.0.1, run by an event loop in a background thread."""

    def __init__(self) -> None:
        self.emulator: ClusterEmulator | None = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._url = ""
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)

    def __enter__(self) -> EmulatedCluster:
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("the emulator did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return self._url

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with ClusterEmulator() as emulator, kmock.Server(emulator) as server:
            self.emulator = emulator
            self._url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()
            # Open watches would hold the server's shutdown for its full grace period.
            current = asyncio.current_task()
            for task in asyncio.all_tasks():
                if task is not current:
                    task.cancel()

    # -- synchronous helpers for tests (through the emulator's own HTTP client) -----------------

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        async def go() -> Any:
            assert self.emulator is not None
            headers = (
                {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else None
            )
            async with self.emulator.request(method, path, json=body, headers=headers) as resp:
                data = await resp.json(content_type=None)
                if resp.status >= 400:
                    raise RuntimeError(f"{method} {path}: {resp.status} {data}")
                return data

        return asyncio.run_coroutine_threadsafe(go(), self._loop).result(15)

    def create_node(self, node: Mapping[str, Any]) -> Any:
        return self.call("POST", "/api/v1/nodes", node)

    def create_pod(self, pod: Mapping[str, Any]) -> Any:
        ns = pod["metadata"].get("namespace", "default")
        return self.call("POST", f"/api/v1/namespaces/{ns}/pods", pod)

    def get_pod(self, namespace: str, name: str) -> Any:
        return self.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def list_pods(self) -> list[Any]:
        return list(self.call("GET", "/api/v1/pods")["items"])

    def list_events(self) -> list[Any]:
        try:
            return list(self.call("GET", "/api/v1/events")["items"])
        except RuntimeError:  # no event was ever created: the resource is unknown
            return []

    def evictions(self) -> list[EvictionAttempt]:
        assert self.emulator is not None
        return list(self.emulator.evictions)

    def create(self, path: str, obj: Mapping[str, Any]) -> Any:
        return self.call("POST", path, obj)

    def bindings(self) -> list[BindingAttempt]:
        assert self.emulator is not None
        return list(self.emulator.bindings)

    def fail_next_bindings(self, count: int) -> None:
        assert self.emulator is not None
        self._loop.call_soon_threadsafe(setattr, self.emulator, "fail_next_bindings", count)


__all__ = ["BindingAttempt", "ClusterEmulator", "EmulatedCluster", "EvictionAttempt"]


def serve_forever() -> None:
    """`python -m benchmarks.harness.standalone_kmock`: serve an emulated cluster in its own process
    (benchmarks), print its URL, stop when stdin closes."""
    import sys

    with EmulatedCluster() as cluster:
        print(cluster.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    serve_forever()
