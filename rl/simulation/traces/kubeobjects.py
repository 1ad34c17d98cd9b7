"""The simulated pods as the Kubernetes API would show them.

A trace row or a DaemonSet entry becomes a v1.Pod (JSON) with one container requesting the
CPU and memory given — a zero request is an absent key, as a pod that sets none, and no limits
(a trace gives none) — and its controlling owner. The simulator reads these objects with the
scheduler's own parser (`pod_info_from_k8s`), so a simulated pod's requests, kube-scheduler's
non-zero stand-ins for the requests it leaves out (100 m CPU, 200 MiB), its containers, owner
and priority are what the scheduler would compute for the real pod.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

NAMESPACE = "sim"
CONTAINER = "main"
GIB_BYTES = 2**30
# cluster-autoscaler's annotation: "false" keeps the node from being scaled down.
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"


class OwnerReference(TypedDict):
    apiVersion: str  # noqa: N815 (Kubernetes' keys)
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: NotRequired[bool]  # noqa: N815


class ObjectMeta(TypedDict, total=False):
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]  # noqa: N815


class ContainerResources(TypedDict):
    requests: dict[str, str]


class ContainerObject(TypedDict):
    name: str
    resources: ContainerResources
    image: NotRequired[str]


class PodSpecObject(TypedDict):
    containers: list[ContainerObject]
    priority: NotRequired[int]
    nodeName: NotRequired[str]  # noqa: N815
    schedulerName: NotRequired[str]  # noqa: N815


class PodObject(TypedDict):
    """A v1.Pod as this module writes it (the keys it sets)."""

    apiVersion: str  # noqa: N815
    kind: str
    metadata: ObjectMeta
    spec: PodSpecObject


def requests_object(cpu_cores: float, memory_gib: float) -> dict[str, str]:
    """`resources.requests` of a container: CPU in millicores, memory in bytes; zero: absent."""
    requests = {}
    cpu = round(cpu_cores * 1000)
    memory = round(memory_gib * GIB_BYTES)
    if cpu:
        requests["cpu"] = f"{cpu}m"
    if memory:
        requests["memory"] = str(memory)
    return requests


def pod_object(
    name: str,
    uid: str,
    cpu_cores: float,
    memory_gib: float,
    owner_kind: str | None = None,
    owner_name: str | None = None,
    priority: int = 0,
    node_name: str | None = None,
    annotations: dict[str, str] | None = None,
) -> PodObject:
    """A v1.Pod with one container (module docstring); `owner_kind` None: a bare pod."""
    metadata: ObjectMeta = {"namespace": NAMESPACE, "name": name, "uid": uid}
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner_kind:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1" if owner_kind == "Job" else "apps/v1",
                "kind": owner_kind,
                "name": owner_name or name,
                "uid": f"{uid}-owner",
                "controller": True,
            }
        ]
    container: ContainerObject = {"name": CONTAINER, "resources": {"requests": requests_object(cpu_cores, memory_gib)}}
    spec: PodSpecObject = {"containers": [container]}
    if priority:
        spec["priority"] = priority
    if node_name is not None:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
