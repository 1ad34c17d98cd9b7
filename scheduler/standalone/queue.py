"""The standalone scheduler's queue of pods to place, shaped like kube-scheduler's:

* `active` — ready to be tried, first in first out;
* `backoff` — tried and failed for a transient reason (API error, conflict): ready again after
  `initial × 2^(attempts−1)` seconds, capped at `max` (kube-scheduler: 1 s and 10 s);
* `unschedulable` — nothing fits: parked until the cluster changes (a node added or changed,
  a pod deleted…) or `unschedulable_timeout_seconds` passes, then moved to backoff.

A pod is never dropped: it leaves the queue only when it is bound or deleted (`remove`). If
the cluster changed *while* a pod was being tried, an "unschedulable" verdict may be stale, so
the pod goes to backoff instead of being parked (kube-scheduler's move-request cycle).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
IN_FLIGHT = "in_flight"


class SchedulingQueue:
    def __init__(
        self,
        initial_backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 10.0,
        unschedulable_timeout_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.initial_backoff_seconds = initial_backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.unschedulable_timeout_seconds = unschedulable_timeout_seconds
        self._clock = clock
        self._cond = threading.Condition()
        self._active: OrderedDict[str, None] = OrderedDict()
        self._backoff: list[tuple[float, int, str]] = []  # (ready_at, seq, key), lazily pruned
        self._backoff_ready: dict[str, float] = {}
        self._unschedulable: dict[str, float] = {}  # key → parked at
        self._in_flight: dict[str, int] = {}  # key → move generation when popped
        self._requeue_after_flight: set[str] = set()
        self._attempts: dict[str, int] = {}
        self._moves = 0  # bumped by every cluster change
        self._seq = itertools.count()

    # -- state --

    def lengths(self) -> dict[str, int]:
        with self._cond:
            return {
                ACTIVE: len(self._active),
                BACKOFF: len(self._backoff_ready),
                UNSCHEDULABLE: len(self._unschedulable),
                IN_FLIGHT: len(self._in_flight),
            }

    def where(self, key: str) -> str | None:
        with self._cond:
            if key in self._in_flight:
                return IN_FLIGHT
            if key in self._active:
                return ACTIVE
            if key in self._backoff_ready:
                return BACKOFF
            if key in self._unschedulable:
                return UNSCHEDULABLE
            return None

    def __len__(self) -> int:
        with self._cond:
            return (
                len(self._active)
                + len(self._backoff_ready)
                + len(self._unschedulable)
                + len(self._in_flight)
            )

    def attempts(self, key: str) -> int:
        with self._cond:
            return self._attempts.get(key, 0)

    # -- adding and removing --

    def add(self, key: str) -> None:
        """A new or changed pod: try it now (unless it is in backoff, or being tried)."""
        with self._cond:
            if key in self._in_flight:
                self._requeue_after_flight.add(key)
                return
            if key in self._active or key in self._backoff_ready:
                return
            self._unschedulable.pop(key, None)
            self._active[key] = None
            self._cond.notify()

    def remove(self, key: str) -> None:
        """The pod is bound or gone."""
        with self._cond:
            self._active.pop(key, None)
            self._backoff_ready.pop(key, None)
            self._unschedulable.pop(key, None)
            self._in_flight.pop(key, None)
            self._requeue_after_flight.discard(key)
            self._attempts.pop(key, None)

    # -- the scheduling loop --

    def pop(self, timeout_seconds: float) -> str | None:
        """The next pod to try, waiting up to `timeout_seconds`; None if there is none."""
        deadline = self._clock() + timeout_seconds
        with self._cond:
            while True:
                now = self._clock()
                self._promote(now)
                if self._active:
                    key, _ = self._active.popitem(last=False)
                    self._in_flight[key] = self._moves
                    self._attempts[key] = self._attempts.get(key, 0) + 1
                    return key
                wait = deadline - now
                if wait <= 0:
                    return None
                if self._backoff:
                    wait = min(wait, max(0.0, self._backoff[0][0] - now))
                self._cond.wait(wait)

    def done(self, key: str) -> None:
        """Placed: forget the pod (its binding is in flight or done)."""
        self.remove(key)

    def backoff(self, key: str) -> None:
        """A transient failure: retry after the pod's backoff."""
        with self._cond:
            self._in_flight.pop(key, None)
            self._requeue_after_flight.discard(key)
            self._to_backoff(key)
            self._cond.notify()

    def unschedulable(self, key: str) -> None:
        """Nothing fits now: park until the cluster changes (or the timeout)."""
        with self._cond:
            popped_at = self._in_flight.pop(key, None)
            changed_meanwhile = popped_at is not None and popped_at != self._moves
            if changed_meanwhile or key in self._requeue_after_flight:
                self._requeue_after_flight.discard(key)
                self._to_backoff(key)
            else:
                self._unschedulable[key] = self._clock()
            self._cond.notify()

    def cluster_changed(self) -> None:
        """Something that could make a parked pod fit happened: retry them all (after their
        backoff)."""
        with self._cond:
            self._moves += 1
            for key in list(self._unschedulable):
                del self._unschedulable[key]
                self._to_backoff(key)
            self._cond.notify_all()

    # -- internals (hold the lock) --

    def _backoff_seconds(self, key: str) -> float:
        attempts = max(1, self._attempts.get(key, 1))
        return min(self.max_backoff_seconds, self.initial_backoff_seconds * 2 ** (attempts - 1))

    def _to_backoff(self, key: str) -> None:
        ready_at = self._clock() + self._backoff_seconds(key)
        self._backoff_ready[key] = ready_at
        heapq.heappush(self._backoff, (ready_at, next(self._seq), key))

    def _promote(self, now: float) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._backoff)
            if self._backoff_ready.get(key) == ready_at:
                del self._backoff_ready[key]
                self._active[key] = None
        if self._unschedulable:
            horizon = now - self.unschedulable_timeout_seconds
            for key in [k for k, t in self._unschedulable.items() if t <= horizon]:
                del self._unschedulable[key]
                self._to_backoff(key)
