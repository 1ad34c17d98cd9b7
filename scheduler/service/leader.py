"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it.

* A candidate reads the Lease. If it is held by someone else whose record changed less than
  `leaseDurationSeconds` ago *by our own clock* (the time we first saw that record, taken after
  the read returned, so clock skew between replicas does not matter and a slow read never
  makes the record look older than it is), we wait. Otherwise — free, expired, or ours — we write
  it with our identity and a new `renewTime`, carrying the `resourceVersion` we read: if another
  replica wrote in between, the API answers 409 Conflict and we are not the leader.
* The leader renews every `retry_period_seconds` and considers itself leader only until
  `renew_deadline_seconds` after the start of its last successful renewal. Because
  `renew_deadline < lease_duration` and the others wait `lease_duration` from when *they* saw
  that renewal, the old leader has stopped before anyone else can take over.
* On a clean stop the leader releases the Lease (empty holder), so a standby takes over at
  its next try instead of after a full lease duration.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from common.jsonvalue import subobject
from scheduler.cluster import kube

log = logging.getLogger(__name__)


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str = "kube-system"
    name: str = "kubejoule-scheduler"
    identity: str = field(default_factory=default_identity)
    lease_duration_seconds: float = 15.0  # kube-scheduler's defaults: 15 / 10 / 2 s
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.renew_deadline_seconds < self.lease_duration_seconds:
            raise ValueError("need 0 < renew_deadline_seconds < lease_duration_seconds")
        if not 0 < self.retry_period_seconds < self.renew_deadline_seconds:
            raise ValueError("need 0 < retry_period_seconds < renew_deadline_seconds")


class LeaseStore(Protocol):
    """Where the Lease lives. Raises kube.ApiError (409 on a concurrent change)."""

    def get(self) -> dict[str, object] | None: ...

    def create(self, lease: Mapping[str, object]) -> dict[str, object]: ...

    def replace(self, lease: Mapping[str, object]) -> dict[str, object]: ...


class KubeLeaseStore:
    """The Lease in the API server."""

    def __init__(self, api: kube.ApiClient, namespace: str, name: str, timeout_seconds: float = 5.0) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.timeout_seconds = timeout_seconds

    def get(self) -> dict[str, object] | None:
        return kube.get_lease(self.api, self.namespace, self.name, self.timeout_seconds)

    def create(self, lease: Mapping[str, object]) -> dict[str, object]:
        return kube.create_lease(self.api, self.namespace, lease, self.timeout_seconds)

    def replace(self, lease: Mapping[str, object]) -> dict[str, object]:
        return kube.replace_lease(self.api, self.namespace, self.name, lease, self.timeout_seconds)


def _micro_time(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        config: LeaderElectionConfig,
        on_change: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.config = config
        self.on_change = on_change
        self._clock = clock
        self._wall = wall_clock
        self._valid_until = -math.inf  # leader until then (monotonic)
        self._leading = False
        self._observed: tuple[object, ...] | None = None  # the Lease last seen: holder, renewTime, resourceVersion
        self._observed_at = -math.inf
        self.transitions_seen = 0
        self.errors = 0
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return self.config.identity

    def is_leader(self) -> bool:
        return self._leading and self._clock() < self._valid_until

    def _set_leading(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            log.info("%s %s leadership", self.identity, "acquired" if leading else "lost")
            if self.on_change is not None:
                self.on_change(leading)

    def _new_lease(self, previous: dict[str, object] | None, now_wall: float) -> dict[str, object]:
        spec = dict(subobject(previous or {}, "spec"))
        holder = spec.get("holderIdentity") or ""
        changed_hands = holder != self.identity
        count = spec.get("leaseTransitions")
        transitions = count if isinstance(count, int) else 0
        if previous is not None and changed_hands and holder:
            transitions += 1
        spec.update(
            {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration_seconds)),
                "renewTime": _micro_time(now_wall),
                "leaseTransitions": transitions,
            }
        )
        if changed_hands or not spec.get("acquireTime"):
            spec["acquireTime"] = _micro_time(now_wall)
        metadata: dict[str, object] = {"name": self.config.name, "namespace": self.config.namespace}
        if previous is not None:
            old_meta = subobject(previous, "metadata")
            metadata = {**old_meta, **metadata}
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; returns whether we lead afterwards."""
        with self._lock:
            started = self._clock()
            try:
                current = self.store.get()
                seen_at = self._clock()  # after the read: the record is at least this fresh
                if current is None:
                    self.store.create(self._new_lease(None, self._wall()))
                else:
                    spec = subobject(current, "spec")
                    holder = spec.get("holderIdentity") or ""
                    record = (
                        holder,
                        spec.get("renewTime"),
                        subobject(current, "metadata").get("resourceVersion"),
                    )
                    if record != self._observed:
                        self._observed = record
                        self._observed_at = seen_at
                    seconds = spec.get("leaseDurationSeconds")
                    duration = float(
                        seconds if isinstance(seconds, int | float) and seconds
                        else self.config.lease_duration_seconds
                    )
                    held_by_other = holder not in ("", self.identity)
                    if held_by_other and seen_at < self._observed_at + duration:
                        self._valid_until = -math.inf
                        self._set_leading(False)
                        return False
                    if held_by_other:
                        self.transitions_seen += 1
                    self.store.replace(self._new_lease(current, self._wall()))
            except kube.ApiError as exc:
                if not exc.conflict:
                    self.errors += 1
                    log.warning("leader election: %s", exc)
                # Keep leading until the renew deadline runs out: one failed renewal is not fatal.
                if self._clock() >= self._valid_until:
                    self._set_leading(False)
                return self.is_leader()
            self._valid_until = started + self.config.renew_deadline_seconds
            self._set_leading(True)
            return True

    def release(self) -> None:
        """Give the Lease up (clean shutdown), so a standby need not wait for it to expire."""
        with self._lock:
            if not self._leading:
                return
            self._valid_until = -math.inf
            self._set_leading(False)
            try:
                current = self.store.get()
                if current is None or subobject(current, "spec").get("holderIdentity") != (
                    self.identity
                ):
                    return
                lease = dict(current)
                lease["spec"] = {
                    **subobject(current, "spec"),
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "renewTime": _micro_time(self._wall()),
                }
                self.store.replace(lease)
            except kube.ApiError as exc:
                log.warning("leader election: releasing the lease failed: %s", exc)

    def run(self, stop: threading.Event) -> None:
        """Try or renew every retry period until `stop`; then release."""
        try:
            while not stop.is_set():
                self.try_acquire_or_renew()
                stop.wait(self.config.retry_period_seconds)
        finally:
            self.release()
