"""kmock's KubernetesEmulator on 127.0.0.1, run on its own event loop in a thread so synchronous
code (the `kubernetes` client in scheduler/cluster/kube.py) can talk to it from a plain test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kmock


class EmulatorThread:
    def __init__(self) -> None:
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._done: asyncio.Event | None = None
        self._emulator: kmock.KubernetesEmulator | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced to the test by start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._done = asyncio.Event()
        async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
            self._emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._done.wait()

    def start(self) -> EmulatorThread:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(f"kmock emulator did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._done is not None:
            self._loop.call_soon_threadsafe(self._done.set)
        self._thread.join(10)

    def put(self, resource: str, namespace: str | None, name: str, obj: dict[str, Any]) -> None:
        """Store an object, e.g. put("v1/nodes", None, "n1", {...}), in the emulator's thread."""

        async def store() -> None:
            assert self._emulator is not None
            self._emulator.objects[resource, namespace, name] = obj

        asyncio.run_coroutine_threadsafe(store(), self._loop).result(10)


@contextmanager
def kube_emulator() -> Iterator[EmulatorThread]:
    emulator = EmulatorThread().start()
    try:
        yield emulator
    finally:
        emulator.stop()
