"""Events (`Scheduled`, `FailedScheduling`) and `PodScheduled=False` status patches: side effects
that must not slow placement down, sent by one background thread once started.

As client-go's event recorder does (`tools/record`, its event logger: an LRU of 4,096 events),
an Event identical to one sent before — the same pod, type, reason and message, e.g. a pod
retried and still unschedulable — is not created again: the first one's `count` goes up and its
`lastTimestamp` moves (a patch; a new Event if the old one has expired)."""

from __future__ import annotations

import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.cluster import kube
from scheduler.cluster.kubejson import rfc3339
from scheduler.domain.model import PodInfo
from scheduler.service.background import BackgroundQueue

if TYPE_CHECKING:
    from scheduler.standalone.binding import ClusterApi

log = logging.getLogger(__name__)

SENT_EVENTS_KEPT = 4096  # client-go's event logger's LRU size


def _side_effect_failed(exc: Exception) -> None:
    if isinstance(exc, kube.ApiError):
        log.debug("event/status write failed: %s", exc)
    else:
        log.error("event/status write failed", exc_info=exc)


def side_effects(size: int) -> BackgroundQueue[Callable[[], None]]:
    """Events and status patches, sent by one background thread. Bounded: when the API is too
    slow the oldest work is kept and new work is dropped (and counted), never the scheduler."""
    return BackgroundQueue("scheduler-events", size, lambda work: work(), _side_effect_failed)


@dataclass(slots=True)
class _Sent:
    """An Event sent: its name, and how many times it happened (its `count`)."""

    name: str
    count: int = 1


class PodEvents:
    """What the scheduler tells about a pod: Events, and the PodScheduled condition when the pod
    cannot be placed (patched again only when the message changes). Inline until `start`."""

    def __init__(
        self,
        api: ClusterApi,
        component: str,
        identity: str,
        wall_clock: Callable[[], float],
    ) -> None:
        self.api = api
        self.component = component
        self.identity = identity
        self._wall = wall_clock
        self._seq = itertools.count()
        self._queue: BackgroundQueue[Callable[[], None]] | None = None
        self._unschedulable_messages: dict[str, str] = {}
        # (namespace, pod, uid, type, reason, message) → its Event's name and count, oldest first
        self._sent: OrderedDict[tuple[str, ...], _Sent] = OrderedDict()

    def start(self, size: int) -> None:
        self._queue = side_effects(size)

    def drain(self, timeout_seconds: float) -> None:
        if self._queue is not None:
            self._queue.drain(timeout_seconds)

    def stop(self) -> None:
        if self._queue is not None:
            self._queue.stop(2.0)
            self._queue = None

    def forget(self, key: str) -> None:
        """The pod is placed or gone: a later failure is news again."""
        self._unschedulable_messages.pop(key, None)

    def unschedulable(self, pod: PodInfo, message: str) -> None:
        self.event(pod, "Warning", "FailedScheduling", message)
        if self._unschedulable_messages.get(pod.key) != message:
            self._unschedulable_messages[pod.key] = message
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": rfc3339(self._wall()),
            }
            patch = {"status": {"conditions": [condition]}}
            self._submit(lambda: self.api.patch_pod_status(pod.namespace, pod.name, patch))

    def event(self, pod: PodInfo, type_: str, reason: str, message: str) -> None:
        wall = self._wall()
        key = (pod.namespace, pod.name, pod.uid, type_, reason, message)
        seen = self._sent.get(key)
        if seen is not None:
            self._sent.move_to_end(key)
            seen.count += 1
            name, count = seen.name, seen.count
            patch = {"count": count, "lastTimestamp": rfc3339(wall)}
            self._submit(lambda: self._repeat(pod, type_, reason, message, name, patch))
            return
        name = f"{pod.name}.{time.time_ns():x}{next(self._seq):x}"
        self._sent[key] = _Sent(name)
        if len(self._sent) > SENT_EVENTS_KEPT:
            self._sent.popitem(last=False)
        event = self._event(pod, type_, reason, message, name, wall)
        self._submit(lambda: self.api.create_event(pod.namespace, event))

    def _repeat(self, pod: PodInfo, type_: str, reason: str, message: str, name: str,
                patch: Mapping[str, object]) -> None:
        try:
            self.api.patch_event(pod.namespace, name, patch)
        except kube.ApiError as exc:
            if not exc.not_found:
                raise
            event = self._event(pod, type_, reason, message, name, self._wall())  # expired
            self.api.create_event(pod.namespace, {**event, "count": patch["count"]})

    def _event(self, pod: PodInfo, type_: str, reason: str, message: str, name: str,
               wall: float) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": pod.namespace,
                "name": pod.name,
                "uid": pod.uid,
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.identity or self.component,
            "firstTimestamp": rfc3339(wall),
            "lastTimestamp": rfc3339(wall),
            "count": 1,
        }

    def _submit(self, work: Callable[[], None]) -> None:
        if self._queue is not None:
            self._queue.submit(work)
        else:
            try:
                work()
            except kube.ApiError as exc:
                log.debug("event/status write failed: %s", exc)
