"""The objects descheduler works on: nodes and pods with every resource by name (cpu in
millicores, memory in bytes, the pod count, extended resources such as `example.com/foo`), read
from Kubernetes JSON or built by the simulator; and the resource arithmetic of its
nodeutilization package and of `fitsRequest` (kubernetes-sigs/descheduler at DESCHEDULER_COMMIT,
pkg/descheduler/node/node.go, pkg/utils/pod.go `GetResourceRequestQuantity`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from common.jsonvalue import subobject, subobjects
from common.quantity import quantity_units
from scheduler.cluster.kubeobjects import node_info_from_k8s, pod_info_from_k8s
from scheduler.cluster.podfacts import PodFacts
from scheduler.domain.model import NodeInfo, PodInfo, ShapeError

CPU, MEMORY, PODS = "cpu", "memory", "pods"
BASIC = (CPU, MEMORY, PODS)
_NOT_EXTENDED = ("cpu", "memory", "pods", "ephemeral-storage", "storage")


def _extended(values: Mapping[str, object], where: str) -> dict[str, int]:
    """The extended resources (a domain-prefixed name, `hugepages-*`) of a ResourceList."""
    out: dict[str, int] = {}
    for name, value in values.items():
        if name not in _NOT_EXTENDED:
            try:
                if not isinstance(value, str | int | float):
                    raise TypeError(f"a {type(value).__name__}")
                out[name] = quantity_units(value)
            except (TypeError, ValueError) as exc:
                raise ShapeError(f"{where}.{name}: not a quantity: {value!r}") from exc
    return out


@dataclass(frozen=True)
class Pod:
    info: PodInfo
    facts: PodFacts
    node: str
    extended: tuple[tuple[str, int], ...] = ()  # extended resource requests
    ref: int | None = None  # the simulator's handle on the pod (its trace index)

    @property
    def name(self) -> str:
        return self.info.name

    @classmethod
    def from_k8s(cls, pod: Mapping[str, object]) -> Pod:
        info = pod_info_from_k8s(pod)
        spec = subobject(pod, "spec")
        extended: dict[str, int] = {}
        for c in subobjects(spec, "containers"):
            for name, value in _container_extended(c).items():
                extended[name] = extended.get(name, 0) + value
        for c in subobjects(spec, "initContainers"):  # an init container's request is a floor
            for name, value in _container_extended(c).items():
                extended[name] = max(extended.get(name, 0), value)
        node = info.node_name or ""
        return cls(info, PodFacts.from_k8s(pod), node, tuple(sorted(extended.items())))


def _container_extended(container: Mapping[str, object]) -> dict[str, int]:
    requests = subobject(subobject(container, "resources"), "requests")
    return _extended(requests, f"container {container.get('name') or '?'}.requests")


@dataclass(frozen=True)
class Node:
    info: NodeInfo
    extended: tuple[tuple[str, int], ...] = ()  # extended allocatable resources

    @property
    def name(self) -> str:
        return self.info.name

    def allocatable(self, resource: str) -> int | None:
        """The node's allocatable `resource`; None when the node has none of it."""
        a = self.info.allocatable
        if resource == CPU:
            return a.cpu_millicores
        if resource == MEMORY:
            return a.memory_bytes
        if resource == PODS:
            return a.pods
        return dict(self.extended).get(resource)

    @classmethod
    def from_k8s(cls, node: Mapping[str, object]) -> Node:
        status = subobject(node, "status")
        values = subobject(status, "allocatable") or subobject(status, "capacity")
        return cls(node_info_from_k8s(node), tuple(sorted(_extended(values, "status").items())))


class PodRequests:
    """A pod's request of each resource (`GetResourceRequestQuantity`: 0 when it requests none;
    the pod count is never a request)."""

    def __init__(self, values: Mapping[str, int]) -> None:
        self.values = dict(values)

    @classmethod
    def of(cls, pod: Pod) -> PodRequests:
        """cpu and memory when some container names them (even as 0), and the extended ones."""
        r, containers = pod.info.requests, pod.info.container_resources()
        values = dict(pod.extended)
        if r.cpu_millicores or any(c.cpu_request_millicores is not None for c in containers):
            values[CPU] = r.cpu_millicores
        if r.memory_bytes or any(c.memory_request_bytes is not None for c in containers):
            values[MEMORY] = r.memory_bytes
        return cls(values)

    def get(self, resource: str) -> int:
        return self.values.get(resource, 0)


def node_usage(pods: Sequence[Pod], resources: Sequence[str]) -> dict[str, int]:
    """`NodeUtilization`: the requests of `pods` summed per resource; the pod count for pods."""
    usage = {name: 0 for name in resources}
    for pod in pods:
        requests = PodRequests.of(pod)
        for name in resources:
            usage[name] += 1 if name == PODS else requests.get(name)
    return usage


def fits_request(requests: PodRequests, node: Node, pods_on_node: Sequence[Pod]) -> bool:
    """`fitsRequest`: each resource the pod requests (and the pod count) must be available —
    allocatable minus the node's pods' requests; a resource the node lacks is unavailable."""
    names = [PODS, *requests.values]
    used = node_usage(pods_on_node, names)
    for name in names:
        alloc = node.allocatable(name)
        if alloc is None:
            return False
        available = alloc - used[name]
        if name != PODS and requests.get(name) > available:
            return False
        if name == PODS and available <= 0:
            return False
    return True


def qos_class(info: PodInfo) -> str:
    """The pod's QoS class from its containers' cpu and memory requests and limits (a limit
    without a request is the API's default request)."""
    containers = info.container_resources()
    values = [
        (c.cpu_request_millicores, c.cpu_limit_millicores, c.memory_request_bytes, c.memory_limit_bytes)
        for c in containers
    ]
    if all(v is None or v == 0 for row in values for v in row):
        return "BestEffort"
    guaranteed = all(
        cl is not None and ml is not None and cr in (None, cl) and mr in (None, ml)
        for cr, cl, mr, ml in values
    )
    return "Guaranteed" if guaranteed else "Burstable"
