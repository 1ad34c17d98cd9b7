"""Pods and Nodes read from Kubernetes JSON into `PodInfo` / `NodeInfo`: from the msgspec
structs of `scheduler.cluster.kubejson` (decoded straight from bytes: the extender's bodies, the API's
watch events) or from parsed JSON (converted to them first).

Every field is checked for its JSON type: a wrong type is a `ShapeError` (a ValueError) naming
the field (`spec.tolerations[0].effect: expected a string, got int`), which the extender
answers with a 400; maps' values (labels, quantities) are checked here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from common.kubetime import parse_timestamp
from common.quantity import quantity_units
from scheduler.cluster.kubejson import (
    Container,
    Map,
    Node,
    NodeAffinity,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    Requirement,
    ResourceRequirements,
    Term,
    convert,
)
from scheduler.domain.model import (
    APP_CONTAINER,
    DEFAULT_MEMORY_REQUEST_BYTES,
    DEFAULT_MILLI_CPU_REQUEST,
    INIT_CONTAINER,
    SIDECAR_CONTAINER,
    ContainerResources,
    NodeInfo,
    PodInfo,
    Resources,
    SelectorRequirement,
    SelectorTerm,
    ShapeError,
    Taint,
    Toleration,
)

# Kubernetes quantities are int64 in their smallest unit (millicores, bytes).
_MAX_AMOUNT = 2**63 - 1

# -- leaves: strings, maps, quantities ----------------------------------------------------------


def _text(value: object, where: str) -> str:
    """A JSON string; absent (None) is ""."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ShapeError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def string_map(value: Map | None, where: str) -> tuple[tuple[str, str], ...]:
    """Labels, annotations, a nodeSelector: string to string, sorted."""
    return tuple(sorted((k, _text(v, f"{where}.{k}")) for k, v in (value or {}).items()))


def _clip(text: str, limit: int = 80) -> str:
    """A message quotes at most `limit` characters of what it refuses (a 400-digit value is
    not echoed back whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def amount(value: object, scale: int, where: str) -> int:
    """A quantity in whole units (`scale` of them per base unit: 1000 for millicores), rounded up
    as Kubernetes' MilliValue()/Value() round it (0.0005 CPU is 1m, never 0). Refused (a
    ShapeError): a negative quantity — the API server accepts none in requests, limits,
    overhead, capacity or allocatable — and one past int64 in its unit (2^63 − 1 millicores,
    bytes, pods), where Kubernetes' own MilliValue()/Value() would overflow."""
    if not isinstance(value, str | int | float):  # null, a list, an object: as parse_decimal says
        raise ShapeError(f"{where}: {_clip(f'not a Kubernetes quantity: {value!r}')}")
    try:
        units = _units(type(value).__name__, value, scale) if type(value) in _CACHED else quantity_units(value, scale)
    except ValueError as exc:
        raise ShapeError(f"{where}: {_clip(str(exc))}") from exc
    if units < 0:
        raise ShapeError(f"{where}: quantity {_clip(repr(value))} is negative")
    if units > _MAX_AMOUNT:
        raise ShapeError(f"{where}: quantity {_clip(repr(value))} is out of range")
    return units


# Quantities repeat (every pod of a Deployment asks "500m"): their exact parse is remembered,
# by type as well as value (True == 1, and True is no quantity).
_CACHED = (str, int, float)


@functools.lru_cache(maxsize=4096)
def _units(kind: str, value: str | int | float, scale: int) -> int:
    return quantity_units(value, scale)


def resources(values: Map | None, where: str, pods: int = 0) -> Resources:
    """A ResourceList (`{"cpu": "500m", "memory": "1Gi", …}`); ShapeError names a bad quantity
    by `where`."""
    values = values or {}
    cpu = values.get("cpu")
    mem = values.get("memory")
    eph = values.get("ephemeral-storage")
    pod_count = values.get("pods")
    return Resources(
        cpu_millicores=amount(cpu, 1000, f"{where}.cpu") if cpu is not None else 0,
        memory_bytes=amount(mem, 1, f"{where}.memory") if mem is not None else 0,
        pods=int(amount(pod_count, 1, f"{where}.pods")) if pod_count is not None else pods,
        ephemeral_storage_bytes=amount(eph, 1, f"{where}.ephemeral-storage") if eph is not None else 0,
    )


def resources_from_k8s(
    values: Mapping[str, object] | None, pods: int = 0, where: str = "resources"
) -> Resources:
    """Resources from a ResourceList in parsed JSON (`{"cpu": "500m", "memory": "1Gi", …}`);
    ShapeError names a bad quantity, or a value that is no object, by `where`."""
    if values is not None and not isinstance(values, Mapping):
        raise ShapeError(f"{where}: expected an object, got {type(values).__name__}")
    return resources(dict(values or {}), where, pods)


def _in_range(total: Resources, where: str) -> Resources:
    """A sum of quantities (a pod's requests) that still fits int64 in its units."""
    for name, units in (
        ("cpu", total.cpu_millicores),
        ("memory", total.memory_bytes),
        ("ephemeral-storage", total.ephemeral_storage_bytes),
    ):
        if units > _MAX_AMOUNT:
            raise ShapeError(f"{where}: the pod's total {name} request is out of range")
    return total


# -- requests ----------------------------------------------------------------------------------


def _requests_map(container: Container) -> Map:
    return (container.resources.requests if container.resources is not None else None) or {}


def _requests(container: Container, where: str) -> Resources:
    return resources(_requests_map(container), f"{where}.resources.requests")


def _nonzero(container: Container, where: str) -> Resources:
    raw = _requests_map(container)
    requests = resources(raw, f"{where}.resources.requests")
    # Only a *missing* key gets the default; an explicit "0" stays 0, as in kube-scheduler.
    return Resources(
        cpu_millicores=requests.cpu_millicores if "cpu" in raw else DEFAULT_MILLI_CPU_REQUEST,
        memory_bytes=requests.memory_bytes if "memory" in raw else DEFAULT_MEMORY_REQUEST_BYTES,
        pods=requests.pods,
        ephemeral_storage_bytes=requests.ephemeral_storage_bytes,
    )


def _spec(spec: PodSpec | Mapping[str, object] | None) -> PodSpec:
    return convert(spec, PodSpec, "spec")


def _summed(spec: PodSpec, count: Callable[[Container, str], Resources]) -> Resources:
    total = Resources()
    for i, container in enumerate(spec.containers or ()):
        total = total + count(container, f"spec.containers[{i}]")
    sidecars = Resources()
    init_peak = Resources()
    for i, container in enumerate(spec.initContainers or ()):
        requests = count(container, f"spec.initContainers[{i}]")
        if container.restartPolicy == "Always":
            sidecars = sidecars + requests
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(sidecars + requests)
    total = _pod_level((total + sidecars).max(init_peak), spec)
    overhead = resources(spec.overhead, "spec.overhead")
    return _in_range(total + overhead + Resources(pods=1), "spec")


def _pod_level(containers: Resources, spec: PodSpec) -> Resources:
    """kube-scheduler's rule for pod-level requests (`spec.resources`, PodLevelResources: on by
    default since 1.34; component-helpers' PodRequests): a cpu or memory request set for the
    pod replaces its containers' total of that resource (defaults for containers without
    requests included); other resources stay the containers'."""
    raw = (spec.resources.requests if spec.resources is not None else None) or {}
    if "cpu" not in raw and "memory" not in raw:
        return containers
    pod = resources(raw, "spec.resources.requests")
    return Resources(
        cpu_millicores=pod.cpu_millicores if "cpu" in raw else containers.cpu_millicores,
        memory_bytes=pod.memory_bytes if "memory" in raw else containers.memory_bytes,
        pods=containers.pods,
        ephemeral_storage_bytes=containers.ephemeral_storage_bytes,
    )


def effective_requests(spec: PodSpec | Mapping[str, object] | None) -> Resources:
    """A pod's requests as kube-scheduler counts them (resource fit, scoring).

    max(Σ app containers + Σ restartable (sidecar) init containers,
        each non-restartable init container + the sidecars started before it) — its cpu and
    memory replaced by the pod-level request where `spec.resources` sets one — + overhead;
    plus one pod. ShapeError when a field has the wrong JSON type.
    """
    return _summed(_spec(spec), _requests)


def nonzero_requests(spec: PodSpec | Mapping[str, object] | None) -> Resources:
    """A pod's requests as kube-scheduler's NodeResourcesFit *scoring* counts them: like
    effective_requests(), but each container (app or init) that sets no CPU or no memory
    request counts DEFAULT_MILLI_CPU_REQUEST / DEFAULT_MEMORY_REQUEST_BYTES for it."""
    return _summed(_spec(spec), _nonzero)


def _optional_amount(values: Map, key: str, scale: int, where: str) -> int | None:
    value = values.get(key)
    return None if value is None else amount(value, scale, f"{where}.{key}")


def _container(container: Container, where: str, kind: str) -> ContainerResources:
    res = container.resources or ResourceRequirements()
    requests, limits = res.requests or {}, res.limits or {}
    return ContainerResources(
        name=container.name or "",
        kind=kind,
        cpu_request_millicores=_optional_amount(requests, "cpu", 1000, f"{where}.resources.requests"),
        cpu_limit_millicores=_optional_amount(limits, "cpu", 1000, f"{where}.resources.limits"),
        memory_request_bytes=_optional_amount(requests, "memory", 1, f"{where}.resources.requests"),
        memory_limit_bytes=_optional_amount(limits, "memory", 1, f"{where}.resources.limits"),
    )


def pod_containers(spec: PodSpec | Mapping[str, object] | None) -> tuple[ContainerResources, ...]:
    """Every container of a pod spec with its requests and limits: app containers first, then
    init containers (sidecars marked) in spec order."""
    spec = _spec(spec)
    found = [
        _container(c, f"spec.containers[{i}]", APP_CONTAINER)
        for i, c in enumerate(spec.containers or ())
    ]
    for i, c in enumerate(spec.initContainers or ()):
        kind = SIDECAR_CONTAINER if c.restartPolicy == "Always" else INIT_CONTAINER
        found.append(_container(c, f"spec.initContainers[{i}]", kind))
    return tuple(found)


# -- scheduling constraints ----------------------------------------------------------------------


def _requirements(items: list[Requirement] | None, where: str) -> tuple[SelectorRequirement, ...]:
    found = []
    for i, item in enumerate(items or ()):
        path = f"{where}[{i}]"
        values = tuple(_text(v, f"{path}.values[{k}]") for k, v in enumerate(item.values or ()))
        found.append(SelectorRequirement(item.key or "", item.operator or "", values))
    return tuple(found)


def _term(term: Term | None, path: str) -> SelectorTerm:
    term = term or Term()
    return SelectorTerm(
        _requirements(term.matchExpressions, f"{path}.matchExpressions"),
        _requirements(term.matchFields, f"{path}.matchFields"),
    )


_AFFINITY = "spec.affinity.nodeAffinity"


def _node_affinity(spec: PodSpec) -> NodeAffinity:
    return (spec.affinity.nodeAffinity if spec.affinity is not None else None) or NodeAffinity()


def _required_terms(spec: PodSpec) -> tuple[SelectorTerm, ...]:
    where = f"{_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    required = _node_affinity(spec).requiredDuringSchedulingIgnoredDuringExecution
    terms = (required.nodeSelectorTerms if required is not None else None) or ()
    return tuple(_term(term, f"{where}[{i}]") for i, term in enumerate(terms))


def _preferred_terms(spec: PodSpec) -> tuple[tuple[int, SelectorTerm], ...]:
    """preferredDuringSchedulingIgnoredDuringExecution as (weight, term) pairs."""
    where = f"{_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = _node_affinity(spec).preferredDuringSchedulingIgnoredDuringExecution or ()
    return tuple(
        (item.weight, _term(item.preference, f"{where}[{i}].preference"))
        for i, item in enumerate(preferred)
    )


def _tolerations(spec: PodSpec) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            key=t.key or "", operator=t.operator or "Equal", value=t.value or "", effect=t.effect or ""
        )
        for t in spec.tolerations or ()
    )


def _owner(meta: ObjectMeta) -> tuple[str | None, str | None]:
    """The kind and name of the controlling owner reference (else the first one); (None, None)
    without owners."""
    owners = meta.ownerReferences or []
    if not owners:
        return None, None
    controlling = [o for o in owners if o.controller is True] or owners
    kind = _text(controlling[0].kind, "metadata.ownerReferences[].kind") or None
    name = _text(controlling[0].name, "metadata.ownerReferences[].name") or None
    return kind, name


def _priority(value: int | None) -> int:
    if value is None:
        return 0
    if not -(2**31) <= value < 2**31:  # an int32 in the API
        raise ShapeError(f"spec.priority: {_clip(str(value))} is out of range")
    return value


# -- the objects ----------------------------------------------------------------------------------


def pod_info_from_k8s(pod: Pod | Mapping[str, object]) -> PodInfo:
    """PodInfo from a v1.Pod (a decoded struct, or parsed JSON); ShapeError naming the field
    when a field has the wrong type or value."""
    pod = convert(pod, Pod, "")
    meta = pod.metadata or ObjectMeta()
    spec = pod.spec or PodSpec()
    status = pod.status or PodStatus()
    owner_kind, owner_name = _owner(meta)
    return PodInfo(
        namespace=meta.namespace or "default",
        name=meta.name or "",
        uid=meta.uid or "",
        requests=effective_requests(spec),
        node_selector=string_map(spec.nodeSelector, "spec.nodeSelector"),
        required_affinity=_required_terms(spec),
        preferred_affinity=_preferred_terms(spec),
        tolerations=_tolerations(spec),
        scheduler_name=spec.schedulerName or "default-scheduler",
        node_name=spec.nodeName or None,
        annotations=string_map(meta.annotations, "metadata.annotations"),
        labels=string_map(meta.labels, "metadata.labels"),
        phase=status.phase or None,
        nonzero_requests=nonzero_requests(spec),
        owner_kind=owner_kind,
        owner_name=owner_name,
        priority=_priority(spec.priority),
        containers=pod_containers(spec),
        overhead=resources(spec.overhead, "spec.overhead"),
    )


def node_info_from_k8s(node: Node | Mapping[str, object]) -> NodeInfo:
    """NodeInfo from a v1.Node (a decoded struct, or parsed JSON); ShapeError naming the field
    when a field has the wrong type or value."""
    node = convert(node, Node, "")
    meta = node.metadata or ObjectMeta()
    spec = node.spec or NodeSpec()
    status = node.status or NodeStatus()
    conditions = status.conditions or []
    ready_conditions = [
        (i, c) for i, c in enumerate(conditions)
        if c.type == "Ready" and _text(c.status, f"status.conditions[{i}].status") == "True"
    ]
    ready = bool(ready_conditions)
    ready_since = parse_timestamp(ready_conditions[0][1].lastTransitionTime) if ready else None
    # A node with no conditions at all (as in some extender payloads) is taken as ready.
    if not conditions:
        ready = True
    allocatable = "status.allocatable" if status.allocatable else "status.capacity"
    return NodeInfo(
        name=meta.name or "",
        allocatable=resources(status.allocatable or status.capacity, allocatable),
        labels=string_map(meta.labels, "metadata.labels"),
        taints=tuple(
            Taint(t.key or "", t.value or "", t.effect or "") for t in spec.taints or ()
        ),
        ready=ready,
        unschedulable=bool(spec.unschedulable),
        capacity=resources(status.capacity, "status.capacity") if status.capacity else None,
        ready_since=ready_since,
    )
