"""Work that must never slow a scheduling decision down: a bounded queue and one thread.

`submit()` never blocks: when the queue is full the item is dropped and counted, and the caller
goes on. The standalone scheduler sends its Events and status patches this way, the extender
its decision-log lines.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

_STOP = object()  # tells the thread to end


class BackgroundQueue(Generic[T]):
    """Feeds each submitted item to `handle` in one daemon thread, in order. An exception from
    `handle` is counted in `failed` and passed to `on_error` (default: logged), and the thread
    goes on. Counts: `done`, `dropped`, `failed`."""

    def __init__(
        self,
        name: str,
        size: int,
        handle: Callable[[T], None],
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self.name = name
        self._handle = handle
        self._on_error = on_error
        self._queue: queue.Queue[object] = queue.Queue(size)
        self.done = 0
        self.dropped = 0
        self.failed = 0
        self.closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: T) -> bool:
        """Queue `item`; False (and counted) when the queue is full or stopped."""
        if self.closed:
            self.dropped += 1
            return False
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def __len__(self) -> int:
        return self._queue.qsize()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                self._handle(item)  # type: ignore[arg-type]
                self.done += 1
            except Exception as exc:  # noqa: BLE001 — counted; the next item goes on
                self.failed += 1
                if self._on_error is not None:
                    self._on_error(exc)
                else:
                    log.exception("%s: an item failed", self.name)
            finally:
                self._queue.task_done()

    def drain(self, timeout_seconds: float = 5.0) -> bool:
        """Wait until every item submitted so far is handled; False on timeout."""
        deadline = time.monotonic() + timeout_seconds
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                done.wait(remaining)
        return True

    def stop(self, timeout_seconds: float = 5.0) -> None:
        """Handle what is queued (up to the timeout), then end the thread; later submissions
        are dropped."""
        self.closed = True
        self.drain(timeout_seconds)
        try:
            self._queue.put(_STOP, timeout=1.0)
        except queue.Full:
            return  # the thread is stuck in an item; it is a daemon
        self._thread.join(timeout_seconds)
