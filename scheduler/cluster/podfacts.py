"""What eviction rules read of a pod beyond its scheduling view (`PodInfo`): every owner, its
volumes, whether it is terminating, when it started, the priority its spec gives (or none).

One reader of these facts for the energy rebalancer (scheduler/rebalancer/) and the descheduler
peer the simulator runs (rl/simulation/controllers/descheduler/); `PodFacts.from_k8s` reads a v1.Pod, the simulator
builds them from its trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common.kubetime import parse_timestamp
from scheduler.domain.model import MIRROR_POD_ANNOTATION, ShapeError

# kubelet's annotation naming where a pod came from ("api" for pods of the API server; "file",
# "http" for static pods), k8s.io/kubernetes pkg/kubelet/types ConfigSourceAnnotationKey.
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
# Controllers whose evicted pod is replaced by one that goes on where it stopped (a service's);
# the pod of any other (a Job's) starts over and loses its work (Kubernetes' documentation of
# ReplicaSet, StatefulSet, ReplicationController and Job). rl/simulation/engine/workloads.py applies it.
KEEPS_LIFETIME = frozenset({"ReplicationController", "ReplicaSet", "StatefulSet"})
# cluster-autoscaler's per-pod override of its drain rules.
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def _mapping(value: object, where: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ShapeError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _items(value: object, where: str) -> list[Mapping[str, object]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ShapeError(f"{where}: expected a list, got {type(value).__name__}")
    return [_mapping(v, f"{where}[{i}]") for i, v in enumerate(value)]


@dataclass(frozen=True)
class OwnerRef:
    kind: str
    name: str = ""
    uid: str = ""
    controller: bool = False


@dataclass(frozen=True)
class PodFacts:
    """The eviction-relevant facts of one pod. Annotations, labels, phase and requests stay in
    its PodInfo."""

    owners: tuple[OwnerRef, ...] = ()
    priority: int | None = None  # spec.priority; None when the spec has none
    local_storage: bool = False  # an emptyDir or hostPath volume
    pvc: bool = False  # a persistentVolumeClaim volume
    resource_claims: bool = False  # spec.resourceClaims
    terminating: bool = False  # metadata.deletionTimestamp is set
    created: float | None = None  # metadata.creationTimestamp, Unix seconds
    started: float | None = None  # status.startTime, Unix seconds

    @property
    def owner_kinds(self) -> tuple[str, ...]:
        return tuple(o.kind for o in self.owners)

    @property
    def bare(self) -> bool:
        return not self.owners

    @property
    def daemonset(self) -> bool:
        return "DaemonSet" in self.owner_kinds

    @classmethod
    def from_k8s(cls, pod: Mapping[str, object]) -> PodFacts:
        """From a v1.Pod (JSON); ShapeError naming the field when one has the wrong type."""
        meta = _mapping(pod.get("metadata"), "metadata")
        spec = _mapping(pod.get("spec"), "spec")
        status = _mapping(pod.get("status"), "status")
        owners = tuple(
            OwnerRef(
                str(o.get("kind") or ""),
                str(o.get("name") or ""),
                str(o.get("uid") or ""),
                o.get("controller") is True,
            )
            for o in _items(meta.get("ownerReferences"), "metadata.ownerReferences")
        )
        volumes = _items(spec.get("volumes"), "spec.volumes")
        priority = spec.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ShapeError(f"spec.priority: expected an integer, got {priority!r}")
        return cls(
            owners=owners,
            priority=priority,
            local_storage=any(
                v.get("emptyDir") is not None or v.get("hostPath") is not None for v in volumes
            ),
            pvc=any(v.get("persistentVolumeClaim") is not None for v in volumes),
            resource_claims=bool(spec.get("resourceClaims")),
            terminating=meta.get("deletionTimestamp") is not None,
            created=parse_timestamp(meta.get("creationTimestamp")),
            started=parse_timestamp(status.get("startTime")),
        )


def annotation(annotations: tuple[tuple[str, str], ...], key: str) -> str | None:
    for k, v in annotations:
        if k == key:
            return v
    return None


def is_mirror(annotations: tuple[tuple[str, str], ...]) -> bool:
    return annotation(annotations, MIRROR_POD_ANNOTATION) is not None


def is_static(annotations: tuple[tuple[str, str], ...]) -> bool:
    """A static pod: its config source is known and not the API server."""
    source = annotation(annotations, CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != "api"


def safe_to_evict(annotations: tuple[tuple[str, str], ...]) -> bool | None:
    """cluster-autoscaler's annotation: True / False when set to "true" / "false", else None."""
    value = annotation(annotations, SAFE_TO_EVICT_ANNOTATION)
    return {"true": True, "false": False}.get(value or "")


# Karpenter's per-pod opt-out of voluntary disruption (karpenter.sh/v1 DoNotDisruptAnnotationKey).
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"


def node_bound(info_annotations: tuple[tuple[str, str], ...], facts: PodFacts) -> bool:
    """A pod that belongs to its node (a DaemonSet's, a mirror or static pod): it stays when
    the node's workload moves and never makes the node non-empty."""
    return facts.daemonset or is_mirror(info_annotations) or is_static(info_annotations)


def never_evict_reason(annotations: tuple[tuple[str, str], ...], facts: PodFacts) -> str | None:
    """Why the energy rebalancer must never evict this pod (a metric label), None when it may:
    a pod bound to its node, a pod without an owner (nothing would recreate it), one with an
    emptyDir or hostPath volume (its data would be lost), one cluster-autoscaler's
    `safe-to-evict: "false"` or Karpenter's `do-not-disrupt: "true"` protects, one already
    terminating."""
    if facts.daemonset:
        return "daemonset"
    if is_mirror(annotations) or is_static(annotations):
        return "mirror"
    if facts.terminating:
        return "terminating"
    if facts.bare:
        return "bare"
    if facts.local_storage:
        return "local_storage"
    if safe_to_evict(annotations) is False:
        return "not_safe_to_evict"
    if annotation(annotations, DO_NOT_DISRUPT_ANNOTATION) == "true":
        return "do_not_disrupt"
    return None
