"""Plain data the scheduler works on: pods, nodes, resources, telemetry.

Everything here is built from Kubernetes JSON (camelCase dicts, as the API and the extender
send them) and is free of any client library, so the simulator (`rl/`), the extender and the
standalone scheduler share one implementation of filtering and scoring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.kubetime import parse_timestamp
from agent.quantity import quantity_units

# -- reading Kubernetes JSON -----------------------------------------------------------------------
#
# The extender parses whatever kube-scheduler (or anyone) posts, so every field is checked for
# its JSON type on the way in: a wrong type anywhere is a ShapeError (a ValueError) naming the
# field, which the extender answers with a 400, never an AttributeError deep in the scorer.


class ShapeError(ValueError):
    """A Kubernetes object with a field of the wrong JSON type or value."""


# Kubernetes quantities are int64 in their smallest unit (millicores, bytes).
_MAX_AMOUNT = 2**63 - 1


def _object(value: Any, where: str) -> Mapping[str, Any]:
    """A JSON object; absent (None) is empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ShapeError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _array(value: Any, where: str) -> Sequence[Any]:
    """A JSON array; absent (None) is empty."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ShapeError(f"{where}: expected an array, got {type(value).__name__}")
    return value


def _objects(value: Any, where: str) -> list[tuple[str, Mapping[str, Any]]]:
    """An array of JSON objects, each with its own path for messages."""
    return [(f"{where}[{i}]", _object(item, f"{where}[{i}]")) for i, item in enumerate(_array(value, where))]


def _text(value: Any, where: str) -> str:
    """A JSON string; absent (None) is ""."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ShapeError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _texts(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_text(v, f"{where}[{i}]") for i, v in enumerate(_array(value, where)))


def _string_map(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """Labels, annotations, a nodeSelector: string to string, sorted."""
    return tuple(sorted((k, _text(v, f"{where}.{k}")) for k, v in _object(value, where).items()))


def _amount(value: Any, scale: int, where: str) -> int:
    """A quantity in whole units (`scale` of them per base unit: 1000 for millicores), rounded up
    as Kubernetes' MilliValue()/Value() round it (0.0005 CPU is 1m, never 0). Refused (a
    ShapeError): a negative quantity — the API server accepts none in requests, limits,
    overhead, capacity or allocatable — and one past int64 in its unit (2^63 − 1 millicores,
    bytes, pods), where Kubernetes' own MilliValue()/Value() would overflow."""
    try:
        amount = quantity_units(value, scale)
    except ValueError as exc:
        raise ShapeError(f"{where}: {_clip(str(exc))}") from exc
    if amount < 0:
        raise ShapeError(f"{where}: quantity {_clip(repr(value))} is negative")
    if amount > _MAX_AMOUNT:
        raise ShapeError(f"{where}: quantity {_clip(repr(value))} is out of range")
    return amount


def _clip(text: str, limit: int = 80) -> str:
    """A message quotes at most `limit` characters of what it refuses (a 400-digit value is
    not echoed back whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _in_range(total: Resources, where: str) -> Resources:
    """A sum of quantities (a pod's requests) that still fits int64 in its units."""
    for name, amount in (
        ("cpu", total.cpu_millicores),
        ("memory", total.memory_bytes),
        ("ephemeral-storage", total.ephemeral_storage_bytes),
    ):
        if amount > _MAX_AMOUNT:
            raise ShapeError(f"{where}: the pod's total {name} request is out of range")
    return total


@dataclass(frozen=True)
class Resources:
    """Requests or capacity. CPU in millicores, memory and storage in bytes, pods as a count."""

    cpu_millicores: int = 0
    memory_bytes: int = 0
    pods: int = 0
    ephemeral_storage_bytes: int = 0

    @classmethod
    def from_k8s(
        cls, values: Mapping[str, Any] | None, pods: int = 0, where: str = "resources"
    ) -> Resources:
        """From a ResourceList (`{"cpu": "500m", "memory": "1Gi", …}`); ShapeError names a bad
        quantity by `where`."""
        values = _object(values, where)
        cpu = values.get("cpu")
        mem = values.get("memory")
        eph = values.get("ephemeral-storage")
        pod_count = values.get("pods")
        return cls(
            cpu_millicores=_amount(cpu, 1000, f"{where}.cpu") if cpu is not None else 0,
            memory_bytes=_amount(mem, 1, f"{where}.memory") if mem is not None else 0,
            pods=int(_amount(pod_count, 1, f"{where}.pods")) if pod_count is not None else pods,
            ephemeral_storage_bytes=(
                _amount(eph, 1, f"{where}.ephemeral-storage") if eph is not None else 0
            ),
        )

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millicores + other.cpu_millicores,
            self.memory_bytes + other.memory_bytes,
            self.pods + other.pods,
            self.ephemeral_storage_bytes + other.ephemeral_storage_bytes,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millicores - other.cpu_millicores,
            self.memory_bytes - other.memory_bytes,
            self.pods - other.pods,
            self.ephemeral_storage_bytes - other.ephemeral_storage_bytes,
        )

    def max(self, other: Resources) -> Resources:
        return Resources(
            max(self.cpu_millicores, other.cpu_millicores),
            max(self.memory_bytes, other.memory_bytes),
            max(self.pods, other.pods),
            max(self.ephemeral_storage_bytes, other.ephemeral_storage_bytes),
        )


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True)
class Toleration:
    key: str = ""  # empty key with operator Exists tolerates everything
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect


@dataclass(frozen=True)
class SelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class SelectorTerm:
    """A node selector term: all of its requirements must hold (terms are ORed)."""

    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()


def _requests_of(container: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    resources = _object(container.get("resources"), f"{where}.resources")
    return _object(resources.get("requests"), f"{where}.resources.requests")


def _container_requests(container: Mapping[str, Any], where: str) -> Resources:
    return Resources.from_k8s(_requests_of(container, where), where=f"{where}.resources.requests")


def effective_requests(
    spec: Mapping[str, Any],
    container_requests: Callable[[Mapping[str, Any], str], Resources] = _container_requests,
) -> Resources:
    """A pod's requests as kube-scheduler counts them (resource fit, scoring).

    max(Σ app containers + Σ restartable (sidecar) init containers,
        each non-restartable init container + the sidecars started before it) + overhead;
    plus one pod. ShapeError when a field has the wrong JSON type.
    """
    total = Resources()
    for where, container in _objects(spec.get("containers"), "spec.containers"):
        total = total + container_requests(container, where)
    sidecars = Resources()
    init_peak = Resources()
    for where, container in _objects(spec.get("initContainers"), "spec.initContainers"):
        requests = container_requests(container, where)
        if _text(container.get("restartPolicy"), f"{where}.restartPolicy") == "Always":
            sidecars = sidecars + requests
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(sidecars + requests)
    total = (total + sidecars).max(init_peak)
    overhead = Resources.from_k8s(spec.get("overhead"), where="spec.overhead")
    return _in_range(total + overhead + Resources(pods=1), "spec")


# kube-scheduler's stand-ins for a container that sets no CPU or memory request, used by the
# NodeResourcesFit scoring strategies (not by the fit filter): 100 millicores and 200 MiB.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST_BYTES = 200 * 1024 * 1024


def _nonzero_container_requests(container: Mapping[str, Any], where: str) -> Resources:
    raw = _requests_of(container, where)
    requests = Resources.from_k8s(raw, where=f"{where}.resources.requests")
    # Only a *missing* key gets the default; an explicit "0" stays 0, as in kube-scheduler.
    return Resources(
        cpu_millicores=requests.cpu_millicores if "cpu" in raw else DEFAULT_MILLI_CPU_REQUEST,
        memory_bytes=requests.memory_bytes if "memory" in raw else DEFAULT_MEMORY_REQUEST_BYTES,
        pods=requests.pods,
        ephemeral_storage_bytes=requests.ephemeral_storage_bytes,
    )


def nonzero_requests(spec: Mapping[str, Any]) -> Resources:
    """A pod's requests as kube-scheduler's NodeResourcesFit *scoring* counts them: like
    effective_requests(), but each container (app or init) that sets no CPU or no memory
    request counts DEFAULT_MILLI_CPU_REQUEST / DEFAULT_MEMORY_REQUEST_BYTES for it."""
    return effective_requests(spec, _nonzero_container_requests)


def _requirements(items: Any, where: str) -> tuple[SelectorRequirement, ...]:
    return tuple(
        SelectorRequirement(
            key=_text(item.get("key"), f"{path}.key"),
            operator=_text(item.get("operator"), f"{path}.operator"),
            values=_texts(item.get("values"), f"{path}.values"),
        )
        for path, item in _objects(items, where)
    )


def _node_affinity(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    affinity = _object(spec.get("affinity"), "spec.affinity")
    return _object(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")


def _selector_term(term: Mapping[str, Any], path: str) -> SelectorTerm:
    return SelectorTerm(
        _requirements(term.get("matchExpressions"), f"{path}.matchExpressions"),
        _requirements(term.get("matchFields"), f"{path}.matchFields"),
    )


def _selector_terms(spec: Mapping[str, Any]) -> tuple[SelectorTerm, ...]:
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = _object(
        _node_affinity(spec).get("requiredDuringSchedulingIgnoredDuringExecution"), where
    )
    return tuple(
        _selector_term(term, path)
        for path, term in _objects(required.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
    )


def _preferred_terms(spec: Mapping[str, Any]) -> tuple[tuple[int, SelectorTerm], ...]:
    """preferredDuringSchedulingIgnoredDuringExecution as (weight, term) pairs."""
    where = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = _node_affinity(spec).get("preferredDuringSchedulingIgnoredDuringExecution")
    terms = []
    for path, item in _objects(preferred, where):
        weight = item.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise ShapeError(f"{path}.weight: expected an integer, got {weight!r}")
        preference = _object(item.get("preference"), f"{path}.preference")
        terms.append((weight, _selector_term(preference, f"{path}.preference")))
    return tuple(terms)


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    tolerations = []
    for path, t in _objects(spec.get("tolerations"), "spec.tolerations"):
        seconds = t.get("tolerationSeconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            raise ShapeError(f"{path}.tolerationSeconds: expected an integer, got {seconds!r}")
        tolerations.append(
            Toleration(
                key=_text(t.get("key"), f"{path}.key"),
                operator=_text(t.get("operator"), f"{path}.operator") or "Equal",
                value=_text(t.get("value"), f"{path}.value"),
                effect=_text(t.get("effect"), f"{path}.effect"),
            )
        )
    return tuple(tolerations)


# Pods that belong to their node rather than to the workload: a DaemonSet's pod runs on every
# node, and a static pod's mirror (annotated, and owned by its Node) exists wherever the kubelet
# runs it. A node whose pods are all of these is empty: scaling it down moves no workload
# (cluster-autoscaler ignores them the same way when it looks for unneeded nodes).
NODE_BOUND_OWNER_KINDS = ("DaemonSet", "Node")
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def is_node_daemon_pod(pod: PodInfo) -> bool:
    """A DaemonSet pod, or a static pod's mirror: it never makes its node non-empty."""
    if pod.owner_kind in NODE_BOUND_OWNER_KINDS:
        return True
    return any(key == MIRROR_POD_ANNOTATION for key, _ in pod.annotations)


def _owner(meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The kind and name of the controlling owner reference (else the first one); (None, None)
    without owners."""
    owners = [o for _, o in _objects(meta.get("ownerReferences"), "metadata.ownerReferences")]
    if not owners:
        return None, None
    controlling = [o for o in owners if o.get("controller") is True] or owners
    kind = _text(controlling[0].get("kind"), "metadata.ownerReferences[].kind") or None
    name = _text(controlling[0].get("name"), "metadata.ownerReferences[].name") or None
    return kind, name


def _priority(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapeError(f"spec.priority: expected an integer, got {_clip(repr(value))}")
    if not -(2**31) <= value < 2**31:  # an int32 in the API
        raise ShapeError(f"spec.priority: {value} is out of range")
    return value


# Container kinds, as the pod spec places them.
APP_CONTAINER = "app"
INIT_CONTAINER = "init"
SIDECAR_CONTAINER = "sidecar"  # an init container with restartPolicy: Always


@dataclass(frozen=True)
class ContainerResources:
    """One container's CPU and memory requests and limits as its spec writes them; None when
    the key is absent (TargetLoadPacking and kube-scheduler tell an absent key from "0")."""

    name: str = ""
    kind: str = APP_CONTAINER  # APP_CONTAINER | INIT_CONTAINER | SIDECAR_CONTAINER
    cpu_request_millicores: int | None = None
    cpu_limit_millicores: int | None = None
    memory_request_bytes: int | None = None
    memory_limit_bytes: int | None = None


def _optional_amount(values: Mapping[str, Any], key: str, scale: int, where: str) -> int | None:
    value = values.get(key)
    return None if value is None else _amount(value, scale, f"{where}.{key}")


def _container_resources(
    container: Mapping[str, Any], where: str, kind: str
) -> ContainerResources:
    resources = _object(container.get("resources"), f"{where}.resources")
    requests = _object(resources.get("requests"), f"{where}.resources.requests")
    limits = _object(resources.get("limits"), f"{where}.resources.limits")
    return ContainerResources(
        name=_text(container.get("name"), f"{where}.name"),
        kind=kind,
        cpu_request_millicores=_optional_amount(requests, "cpu", 1000, f"{where}.resources.requests"),
        cpu_limit_millicores=_optional_amount(limits, "cpu", 1000, f"{where}.resources.limits"),
        memory_request_bytes=_optional_amount(requests, "memory", 1, f"{where}.resources.requests"),
        memory_limit_bytes=_optional_amount(limits, "memory", 1, f"{where}.resources.limits"),
    )


def pod_containers(spec: Mapping[str, Any]) -> tuple[ContainerResources, ...]:
    """Every container of a pod spec with its requests and limits: app containers first, then
    init containers (sidecars marked) in spec order."""
    containers = [
        _container_resources(c, where, APP_CONTAINER)
        for where, c in _objects(spec.get("containers"), "spec.containers")
    ]
    for where, c in _objects(spec.get("initContainers"), "spec.initContainers"):
        always = _text(c.get("restartPolicy"), f"{where}.restartPolicy") == "Always"
        containers.append(
            _container_resources(c, where, SIDECAR_CONTAINER if always else INIT_CONTAINER)
        )
    return tuple(containers)


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    requests: Resources  # effective requests, see effective_requests()
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: tuple[SelectorTerm, ...] = ()  # ORed terms; empty = no constraint
    # preferredDuringScheduling node affinity: (weight, term) pairs, scored by NodeAffinity.
    preferred_affinity: tuple[tuple[int, SelectorTerm], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    annotations: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    phase: str | None = None
    # Requests with kube-scheduler's scoring defaults (see nonzero_requests()); None = `requests`.
    nonzero_requests: Resources | None = None
    # Kind of the controlling owner reference (Job, ReplicaSet, StatefulSet, DaemonSet, …);
    # None for a bare pod. `priority`: spec.priority as the admission controller resolved it.
    owner_kind: str | None = None
    priority: int = 0
    # The controlling owner's name (a ReplicaSet's, a Job's): the pod's workload, whose finished
    # pods' lifetimes predict its own (scheduler/lifetimes). None for a bare pod.
    owner_name: str | None = None
    # Per-container requests and limits (pod_containers()); None = not known (a PodInfo built by
    # hand from totals): see container_resources().
    containers: tuple[ContainerResources, ...] | None = None
    overhead: Resources = Resources()  # spec.overhead (RuntimeClass), included in `requests`

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def container_resources(self) -> tuple[ContainerResources, ...]:
        """`containers`, or for a PodInfo that only knows its totals one app container
        requesting them (a zero total is an absent key, as a pod without requests has)."""
        if self.containers is not None:
            return self.containers
        cpu = self.requests.cpu_millicores - self.overhead.cpu_millicores
        memory = self.requests.memory_bytes - self.overhead.memory_bytes
        return (
            ContainerResources(
                cpu_request_millicores=cpu or None, memory_request_bytes=memory or None
            ),
        )

    @classmethod
    def from_k8s(cls, pod: Mapping[str, Any]) -> PodInfo:
        """From a v1.Pod (JSON); ShapeError, naming the field, when a field has the wrong type."""
        pod = _object(pod, "pod")
        meta = _object(pod.get("metadata"), "metadata")
        spec = _object(pod.get("spec"), "spec")
        status = _object(pod.get("status"), "status")
        owner_kind, owner_name = _owner(meta)
        return cls(
            namespace=_text(meta.get("namespace"), "metadata.namespace") or "default",
            name=_text(meta.get("name"), "metadata.name"),
            uid=_text(meta.get("uid"), "metadata.uid"),
            requests=effective_requests(spec),
            node_selector=_string_map(spec.get("nodeSelector"), "spec.nodeSelector"),
            required_affinity=_selector_terms(spec),
            preferred_affinity=_preferred_terms(spec),
            tolerations=_tolerations(spec),
            scheduler_name=(
                _text(spec.get("schedulerName"), "spec.schedulerName") or "default-scheduler"
            ),
            node_name=_text(spec.get("nodeName"), "spec.nodeName") or None,
            annotations=_string_map(meta.get("annotations"), "metadata.annotations"),
            labels=_string_map(meta.get("labels"), "metadata.labels"),
            phase=_text(status.get("phase"), "status.phase") or None,
            nonzero_requests=nonzero_requests(spec),
            owner_kind=owner_kind,
            owner_name=owner_name,
            priority=_priority(spec.get("priority")),
            containers=pod_containers(spec),
            overhead=Resources.from_k8s(spec.get("overhead"), where="spec.overhead"),
        )


@dataclass(frozen=True)
class NodeInfo:
    name: str
    allocatable: Resources
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    # status.capacity (TargetLoadPacking and PEAKS divide by it); None = same as allocatable.
    capacity: Resources | None = None
    # When the Ready condition last became True (epoch seconds); None: not ready or unknown.
    ready_since: float | None = None

    @property
    def cpu_capacity_millicores(self) -> int:
        return (self.capacity or self.allocatable).cpu_millicores

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def cpu_cores(self) -> float:
        return self.allocatable.cpu_millicores / 1000.0

    @classmethod
    def from_k8s(cls, node: Mapping[str, Any]) -> NodeInfo:
        """From a v1.Node (JSON); ShapeError, naming the field, when a field has the wrong type."""
        node = _object(node, "node")
        meta = _object(node.get("metadata"), "metadata")
        spec = _object(node.get("spec"), "spec")
        status = _object(node.get("status"), "status")
        conditions = _objects(status.get("conditions"), "status.conditions")
        ready_conditions = [
            c
            for path, c in conditions
            if _text(c.get("type"), f"{path}.type") == "Ready"
            and _text(c.get("status"), f"{path}.status") == "True"
        ]
        ready = bool(ready_conditions)
        ready_since = parse_timestamp(ready_conditions[0].get("lastTransitionTime")) if ready else None
        # A node with no conditions at all (as in some extender payloads) is taken as ready.
        if not conditions:
            ready = True
        unschedulable = spec.get("unschedulable")
        if unschedulable is not None and not isinstance(unschedulable, bool):
            raise ShapeError(f"spec.unschedulable: expected true or false, got {unschedulable!r}")
        allocatable = "status.allocatable" if status.get("allocatable") else "status.capacity"
        return cls(
            name=_text(meta.get("name"), "metadata.name"),
            allocatable=Resources.from_k8s(
                status.get("allocatable") or status.get("capacity"), where=allocatable
            ),
            labels=_string_map(meta.get("labels"), "metadata.labels"),
            taints=tuple(
                Taint(
                    _text(t.get("key"), f"{path}.key"),
                    _text(t.get("value"), f"{path}.value"),
                    _text(t.get("effect"), f"{path}.effect"),
                )
                for path, t in _objects(spec.get("taints"), "spec.taints")
            ),
            ready=ready,
            unschedulable=bool(unschedulable),
            capacity=(
                Resources.from_k8s(status.get("capacity"), where="status.capacity")
                if status.get("capacity")
                else None
            ),
            ready_since=ready_since,
        )


@dataclass(frozen=True)
class NodeTelemetry:
    """What the TelemetryStore knows of one node. Times are wall-clock seconds."""

    node: str
    sample_time: float
    watts: float | None = None
    source: str = "none"  # rapl | estimated | none
    utilization: float | None = None  # 0..1
    cores: float | None = None
    curve_points: tuple[float, ...] | None = None  # 11 calibration points, if exported

    def age_seconds(self, now: float) -> float:
        return max(0.0, now - self.sample_time)


@dataclass(frozen=True)
class NodeState:
    """One candidate node as the scorer sees it."""

    info: NodeInfo
    requested: Resources = field(default_factory=Resources)  # bound + assumed pods
    telemetry: NodeTelemetry | None = None
    # CPU (cores) requested by pods bound or assumed after the telemetry sample was taken.
    cpu_since_sample_cores: float = 0.0
    pod_count: int = 0  # pods on the node (bound + assumed)
    # Σ of those pods' nonzero_requests (kube-scheduler's NonZeroRequested); None = `requested`.
    nonzero_requested: Resources | None = None
    # Of pod_count, the DaemonSet and mirror (static) pods: they run on every node and never make
    # it non-empty (is_node_daemon_pod()).
    daemon_pod_count: int = 0
    # The pods bound since the sample, where the producer knows them (TargetLoadPacking reads them).
    pods_since_sample: tuple[PodInfo, ...] = ()

    @property
    def empty(self) -> bool:
        """No pods other than DaemonSet and mirror pods: the node a scale-down would remove."""
        return self.pod_count - self.daemon_pod_count <= 0

    @property
    def cores(self) -> float:
        """The node's cores: as its agent counts them, else its allocatable CPU (0: unknown)."""
        return (self.telemetry.cores if self.telemetry is not None else None) or self.info.cpu_cores


# The score every node gets where a scorer must not express a preference (shadow mode), on the
# 0–100 scale. (A node without fresh telemetry gets no neutral score: docs/scheduler.md,
# "Missing telemetry never wins".)
NEUTRAL_SCORE = 50.0

# Why a score is or is not from fresh telemetry; scores carry them as small integers, their
# index in REASONS, until a decision line or an answer is written.
REASON_OK = "ok"
REASON_STALE = "stale"
REASON_MISSING = "missing"
REASON_NO_CURVE = "no_curve"
REASONS = (REASON_OK, REASON_STALE, REASON_MISSING, REASON_NO_CURVE)
