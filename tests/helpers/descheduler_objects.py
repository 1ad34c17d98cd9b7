"""Kubernetes JSON nodes and pods shaped like descheduler's test builders (its test/test_utils.go
`BuildTestNode`, `BuildTestPod` and their setters), read back as rl.simulation.controllers.descheduler's Node and Pod —
so the translated test tables also exercise our readers of the JSON."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rl.simulation.controllers.descheduler.model import Node, Pod

Obj = dict[str, Any]
EXTENDED = "example.com/foo"
MIRROR_ANNOTATIONS = {
    "kubernetes.io/created-by": '{"kind":"SerializedReference","apiVersion":"v1"}',
    "kubernetes.io/config.source": "api",
    "kubernetes.io/config.mirror": "mirror",
}


def node_json(name: str, millicpu: int, memory: int, pods: int, *apply: Callable[[Obj], None]) -> Obj:
    """`BuildTestNode`: capacity and allocatable alike, labels empty."""
    values = {"cpu": f"{millicpu}m", "memory": str(memory), "pods": str(pods)}
    node: Obj = {
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {"capacity": dict(values), "allocatable": dict(values)},
    }
    for change in apply:
        change(node)
    return node


def pod_json(name: str, cpu: int, memory: int, node: str, *apply: Callable[[Obj], None]) -> Obj:
    """`BuildTestPod`: one container requesting `cpu` millicores and `memory` bytes (a negative
    amount leaves the key out), an empty limits list, namespace default."""
    requests: Obj = {}
    if cpu >= 0:
        requests["cpu"] = f"{cpu}m"
    if memory >= 0:
        requests["memory"] = str(memory)
    pod: Obj = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests, "limits": {}}}],
                 "nodeName": node},
        "status": {},
    }
    for change in apply:
        change(pod)
    return pod


def owner(kind: str, name: str = "", uid: str = "") -> Callable[[Obj], None]:
    def apply(pod: Obj) -> None:
        pod["metadata"]["ownerReferences"] = [{"kind": kind, "name": name, "uid": uid}]

    return apply


rs_owner = owner("ReplicaSet", "replicaset-1")
ss_owner = owner("StatefulSet", "statefulset-1")
ds_owner = owner("DaemonSet", "daemonset-1")
normal_owner = owner("Pod")  # `SetNormalOwnerRef`: an owner of kind Pod


def annotations(values: Mapping[str, str]) -> Callable[[Obj], None]:
    def apply(pod: Obj) -> None:
        pod["metadata"].setdefault("annotations", {}).update(values)

    return apply


def priority(value: int) -> Callable[[Obj], None]:
    def apply(pod: Obj) -> None:
        pod["spec"]["priority"] = value

    return apply


def local_storage(pod: Obj) -> None:
    """`SetHostPathEmptyDirVolumeSource`."""
    pod["spec"]["volumes"] = [
        {"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {"sizeLimit": "10"}}
    ]


def best_effort(pod: Obj) -> None:
    """`MakeBestEffortPod`: no requests, no limits."""
    pod["spec"]["containers"][0]["resources"] = {}


def node_selector(labels: Mapping[str, str]) -> Callable[[Obj], None]:
    def apply(pod: Obj) -> None:
        pod["spec"]["nodeSelector"] = dict(labels)

    return apply


def tolerations(*items: Mapping[str, str]) -> Callable[[Obj], None]:
    def apply(pod: Obj) -> None:
        pod["spec"]["tolerations"] = [dict(t) for t in items]

    return apply


def pod_extended(amount: int) -> Callable[[Obj], None]:
    def apply(pod: Obj) -> None:
        pod["spec"]["containers"][0]["resources"]["requests"][EXTENDED] = str(amount)

    return apply


def unschedulable(node: Obj) -> None:
    node["spec"]["unschedulable"] = True


def node_labels(labels: Mapping[str, str]) -> Callable[[Obj], None]:
    def apply(node: Obj) -> None:
        node["metadata"]["labels"] = dict(labels)

    return apply


def node_taint(key: str, value: str, effect: str = "NoSchedule") -> Callable[[Obj], None]:
    def apply(node: Obj) -> None:
        node["spec"]["taints"] = [{"key": key, "value": value, "effect": effect}]

    return apply


def node_extended(amount: int) -> Callable[[Obj], None]:
    def apply(node: Obj) -> None:
        node["status"]["capacity"][EXTENDED] = str(amount)
        node["status"]["allocatable"][EXTENDED] = str(amount)

    return apply


def nodes_and_pods(nodes: list[Obj], pods: list[Obj]) -> tuple[list[Node], dict[str, list[Pod]]]:
    read = [Node.from_k8s(n) for n in nodes]
    on: dict[str, list[Pod]] = {n.name: [] for n in read}
    for raw in pods:
        pod = Pod.from_k8s(raw)
        on.setdefault(pod.node, []).append(pod)
    return read, on
