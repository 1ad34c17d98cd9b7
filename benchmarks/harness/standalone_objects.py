"""Real-shaped Kubernetes objects (camelCase dicts) for the standalone scheduler's tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.cluster.kubeobjects import node_info_from_k8s, pod_info_from_k8s
from scheduler.domain.model import NodeState, Resources


def container(
    name: str = "app",
    requests: Mapping[str, str] | None = None,
    restart_policy: str | None = None,
    limits: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.example/app:1"}
    if requests is not None:
        c["resources"] = {"requests": dict(requests)}
    if limits is not None:
        c.setdefault("resources", {})["limits"] = dict(limits)
    if restart_policy is not None:
        c["restartPolicy"] = restart_policy
    return c


def pod(
    name: str = "p",
    *,
    namespace: str = "default",
    containers: Sequence[Mapping[str, Any]] | None = None,
    init_containers: Sequence[Mapping[str, Any]] = (),
    requests: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity_terms: Sequence[Mapping[str, Any]] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    overhead: Mapping[str, str] | None = None,
    scheduler_name: str = "kubejoule-scheduler",
    node_name: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": list(containers)
        if containers is not None
        else [container(requests=requests)],
    }
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity_terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": list(affinity_terms)
                }
            }
        }
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if overhead:
        spec["overhead"] = dict(overhead)
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    ephemeral_storage: str | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    ready: bool = True,
    unschedulable: bool = False,
    capacity_cpu: str | None = None,
) -> dict[str, Any]:
    """A Node whose capacity equals its allocatable, except CPU capacity if `capacity_cpu`."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    if ephemeral_storage is not None:
        allocatable["ephemeral-storage"] = ephemeral_storage
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": {**allocatable, "cpu": capacity_cpu or cpu},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def node_state(node_obj: Mapping[str, Any], bound: Sequence[Mapping[str, Any]] = ()) -> NodeState:
    """A NodeState with the requests of `bound` pods added, as the scheduler's cache does."""
    infos = [pod_info_from_k8s(p) for p in bound]
    requested = Resources()
    nonzero = Resources()
    for info in infos:
        requested = requested + info.requests
        nonzero = nonzero + (info.nonzero_requests or info.requests)
    return NodeState(
        info=node_info_from_k8s(node_obj),
        requested=requested,
        nonzero_requested=nonzero,
        pod_count=len(infos),
    )
