"""The standalone scheduler's queue of pods to place, shaped like kube-scheduler's
(pkg/scheduler/backend/queue at v1.36.3):

* `active` — ready to be tried, the highest priority first and, among equals, the pod with the
  earliest timestamp — when it was added, or when its last attempt failed — as kube-scheduler's
  default QueueSort plugin orders its activeQ (queuesort/priority_sort.go `Less`; the timestamp
  is refreshed on every failed attempt: scheduling_queue.go `AddUnschedulableIfNotPresent`);
* `backoff` — waiting out the pod's backoff, `initial × 2^(attempts−1)` seconds capped at `max`
  (kube-scheduler: 1 s and 10 s), counted from when its last attempt failed, as kube-scheduler
  counts it from the pod's `Timestamp` (backoff_queue.go `getBackoffTime`);
* `unschedulable` — nothing fits: parked until the cluster changes (a node added or changed,
  a pod deleted…) or `unschedulable_timeout_seconds` passes.

A parked pod the cluster may now fit goes back through its backoff: to `active` at once if its
backoff since its last attempt is over, else to `backoff` for what is left of it
(scheduling_queue.go `requeuePodWithQueueingStrategy`). When nothing is active, the pod whose
backoff ends first is tried early, as kube-scheduler does since 1.33 (feature SchedulerPopFromBackoffQ,
beta and on by default: active_queue.go `pop`); a pod backing off after a transient error (an API
error, a conflict) is not, as kube-scheduler keeps those in a queue of their own
(`podErrorBackoffQ`).

A pod is never dropped: it leaves the queue only when it is bound or deleted (`remove`). If
the cluster changed *while* a pod was being tried, an "unschedulable" verdict may be stale, so
the pod goes to backoff instead of being parked (kube-scheduler's move-request cycle).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
IN_FLIGHT = "in_flight"


class _ActiveQueue:
    """The active pods, popped by (−priority, timestamp, order added): a heap pruned lazily."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, float, int, str]] = []
        self._entries: dict[str, tuple[int, float, int, str]] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def push(self, key: str, priority: int, timestamp: float) -> None:
        if key in self._entries:
            return
        entry = (-priority, timestamp, next(self._seq), key)
        self._entries[key] = entry
        heapq.heappush(self._heap, entry)

    def discard(self, key: str) -> None:
        self._entries.pop(key, None)

    def pop(self) -> str | None:
        while self._heap:
            entry = heapq.heappop(self._heap)
            if self._entries.get(entry[3]) is entry:
                del self._entries[entry[3]]
                return entry[3]
        return None


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
        self._active = _ActiveQueue()
        self._priority: dict[str, int] = {}  # key → the pod's priority (spec.priority)
        self._timestamp: dict[str, float] = {}  # key → when added, refreshed at each failure
        # (ready_at, seq, key), lazily pruned: pods moved after they found no room, and pods
        # backing off after a transient error (never tried early), as kube-scheduler's podBackoffQ
        # and podErrorBackoffQ
        self._backoff: list[tuple[float, int, str]] = []
        self._error_backoff: list[tuple[float, int, str]] = []
        self._backoff_ready: dict[str, int] = {}  # key → the seq of its live entry
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

    def add(self, key: str, priority: int = 0) -> None:
        """A new or changed pod (`priority`: its spec.priority): try it now (unless it is in
        backoff, or being tried)."""
        with self._cond:
            self._priority[key] = priority
            self._timestamp.setdefault(key, self._clock())
            if key in self._in_flight:
                self._requeue_after_flight.add(key)
                return
            if key in self._active or key in self._backoff_ready:
                return
            self._unschedulable.pop(key, None)
            self._activate(key)
            self._cond.notify()

    def remove(self, key: str) -> None:
        """The pod is bound or gone."""
        with self._cond:
            self._active.discard(key)
            self._backoff_ready.pop(key, None)
            self._unschedulable.pop(key, None)
            self._in_flight.pop(key, None)
            self._requeue_after_flight.discard(key)
            self._attempts.pop(key, None)
            self._priority.pop(key, None)
            self._timestamp.pop(key, None)

    # -- the scheduling loop --

    def pop(self, timeout_seconds: float) -> str | None:
        """The next pod to try, waiting up to `timeout_seconds`; None if there is none."""
        deadline = self._clock() + timeout_seconds
        with self._cond:
            while True:
                now = self._clock()
                self._promote(now)
                key = self._next()
                if key is not None:
                    self._in_flight[key] = self._moves
                    self._attempts[key] = self._attempts.get(key, 0) + 1
                    return key
                wait = deadline - now
                if wait <= 0:
                    return None
                for heap in (self._backoff, self._error_backoff):
                    if heap:
                        wait = min(wait, max(0.0, heap[0][0] - now))
                self._cond.wait(wait)

    def done(self, key: str) -> None:
        """Placed: forget the pod (its binding is in flight or done)."""
        self.remove(key)

    def backoff(self, key: str) -> None:
        """A transient failure: retry after the pod's backoff."""
        with self._cond:
            self._in_flight.pop(key, None)
            self._requeue_after_flight.discard(key)
            self._timestamp[key] = self._clock()
            self._to_backoff(key, error=True)
            self._cond.notify()

    def unschedulable(self, key: str) -> None:
        """Nothing fits now: park until the cluster changes (or the timeout)."""
        with self._cond:
            popped_at = self._in_flight.pop(key, None)
            self._timestamp[key] = self._clock()
            changed_meanwhile = popped_at is not None and popped_at != self._moves
            if changed_meanwhile or key in self._requeue_after_flight:
                self._requeue_after_flight.discard(key)
                self._to_backoff(key)
            else:
                self._unschedulable[key] = self._clock()
            self._cond.notify()

    def cluster_changed(self) -> None:
        """Something that could make a parked pod fit happened: retry them all (after what is
        left of their backoff)."""
        with self._cond:
            self._moves += 1
            for key in list(self._unschedulable):
                del self._unschedulable[key]
                self._to_backoff(key)
            self._cond.notify_all()

    # -- internals (hold the lock) --

    def _activate(self, key: str) -> None:
        self._active.push(key, self._priority.get(key, 0), self._timestamp.get(key, self._clock()))

    def _backoff_seconds(self, key: str) -> float:
        attempts = max(1, self._attempts.get(key, 1))
        return min(self.max_backoff_seconds, self.initial_backoff_seconds * 2 ** (attempts - 1))

    def _to_backoff(self, key: str, error: bool = False) -> None:
        """Back off from the pod's last failed attempt (its timestamp): to the active queue at
        once if that backoff is already over (kube-scheduler's requeuePodWithQueueingStrategy)."""
        now = self._clock()
        ready_at = self._timestamp.get(key, now) + self._backoff_seconds(key)
        if ready_at <= now and not error:
            self._activate(key)  # its backoff ran out while it was parked
            return
        seq = self._backoff_ready[key] = next(self._seq)
        heapq.heappush(self._error_backoff if error else self._backoff, (ready_at, seq, key))

    def _next(self) -> str | None:
        """The pod to try now: the first active one, else (nothing active) the one whose backoff
        ends first, unless it backs off after an error."""
        if self._active:
            return self._active.pop()
        while self._backoff:
            _, seq, key = heapq.heappop(self._backoff)
            if self._backoff_ready.get(key) == seq:
                del self._backoff_ready[key]
                return key
        return None

    def _promote(self, now: float) -> None:
        for heap in (self._backoff, self._error_backoff):
            while heap and heap[0][0] <= now:
                _, seq, key = heapq.heappop(heap)
                if self._backoff_ready.get(key) == seq:
                    del self._backoff_ready[key]
                    self._activate(key)
        if self._unschedulable:
            horizon = now - self.unschedulable_timeout_seconds
            for key in [k for k, t in self._unschedulable.items() if t <= horizon]:
                del self._unschedulable[key]
                self._to_backoff(key)
