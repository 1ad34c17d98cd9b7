"""Pod metadata (namespace, name, owner kind) by pod UID, fed by the pod watch (agent/kube/client.py).

The cache is read while building every Snapshot, so reads never wait on the API: a lookup is a
dict access under a lock that writers hold only for dict updates. An unknown UID gives no names —
its pod series keep their `pod_uid` with empty `namespace` and `pod` until the watch delivers it.
A deleted pod's names are kept for a while (`deleted_ttl_seconds`): its cgroup, and the last
interval of its energy, usually outlive the API object by a few seconds.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.monitor.snapshot import Snapshot
from common.jsonvalue import JsonObject, subobject, subobjects, text

DEFAULT_DELETED_TTL_SECONDS = 300.0


@dataclass(frozen=True)
class PodMeta:
    uid: str
    namespace: str
    name: str
    owner_kind: str | None = None  # kind of the controlling owner: ReplicaSet, DaemonSet, Job, ...
    node: str | None = None
    host_network: bool = False
    phase: str | None = None


def pod_meta(pod: JsonObject) -> PodMeta | None:
    """PodMeta from a pod's JSON as the API sends it; None without a UID."""
    metadata = subobject(pod, "metadata")
    uid = metadata.get("uid")
    if not uid:
        return None
    spec = subobject(pod, "spec")
    owners = subobjects(metadata, "ownerReferences")
    controller = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    return PodMeta(
        uid=str(uid),
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        owner_kind=str(controller["kind"]) if controller and controller.get("kind") else None,
        node=text(spec, "nodeName"),
        host_network=bool(spec.get("hostNetwork")),
        phase=text(subobject(pod, "status"), "phase"),
    )


class PodMetadataCache:
    """Thread-safe uid → PodMeta, kept by NodePodWatch through replace() and apply()."""

    def __init__(
        self,
        deleted_ttl_seconds: float = DEFAULT_DELETED_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.deleted_ttl_seconds = deleted_ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._live: dict[str, PodMeta] = {}
        self._deleted: dict[str, tuple[PodMeta, float]] = {}  # uid → (meta, forget after)
        self.synced = False  # True once a full list has arrived

    # -- writers (the watch thread) ----------------------------------------------------------

    def replace(self, pods: list[JsonObject]) -> None:
        """A full list: pods missing from it were deleted while we were not watching."""
        metas = [m for m in (pod_meta(p) for p in pods) if m is not None]
        now = self._clock()
        with self._lock:
            fresh = {m.uid: m for m in metas}
            for uid, meta in self._live.items():
                if uid not in fresh:
                    self._deleted[uid] = (meta, now + self.deleted_ttl_seconds)
            for uid in fresh:
                self._deleted.pop(uid, None)
            self._live = fresh
            self._expire(now)
            self.synced = True

    def apply(self, event_type: str, pod: JsonObject) -> None:
        """One watch event: ADDED, MODIFIED or DELETED."""
        meta = pod_meta(pod)
        if meta is None:
            return
        now = self._clock()
        with self._lock:
            if event_type == "DELETED":
                self._live.pop(meta.uid, None)
                self._deleted[meta.uid] = (meta, now + self.deleted_ttl_seconds)
            elif event_type in ("ADDED", "MODIFIED"):
                self._live[meta.uid] = meta
                self._deleted.pop(meta.uid, None)
            self._expire(now)

    def _expire(self, now: float) -> None:
        for uid in [uid for uid, (_, until) in self._deleted.items() if until <= now]:
            del self._deleted[uid]

    # -- readers (the sampler, the metrics reader) -------------------------------------------

    def get(self, uid: str) -> PodMeta | None:
        """The pod's metadata, also for a recently deleted pod; None when unknown."""
        with self._lock:
            meta = self._live.get(uid)
            if meta is not None:
                return meta
            entry = self._deleted.get(uid)
        if entry is None or entry[1] <= self._clock():
            return None
        return entry[0]

    def uid_of(self, namespace: str, name: str) -> str | None:
        """The UID of the live pod NAMESPACE/NAME on this node, if the watch knows it."""
        with self._lock:
            for meta in self._live.values():
                if meta.name == name and meta.namespace == namespace:
                    return meta.uid
        return None

    def pods(self) -> list[PodMeta]:
        """The pods on the node now (not the deleted ones)."""
        with self._lock:
            return list(self._live.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._live)


def with_pod_names(snapshot: Snapshot, cache: PodMetadataCache | None) -> Snapshot:
    """The snapshot with namespace and name filled in for every pod the cache knows."""
    if cache is None or not snapshot.pods:
        return snapshot
    pods = []
    changed = False
    for pod in snapshot.pods:
        meta = cache.get(pod.uid)
        if meta is not None and (pod.namespace, pod.name) != (meta.namespace, meta.name):
            pod = dataclasses.replace(pod, namespace=meta.namespace, name=meta.name)
            changed = True
        pods.append(pod)
    return dataclasses.replace(snapshot, pods=tuple(pods)) if changed else snapshot
