"""Plain data the scheduler works on: pods, nodes, resources, telemetry.

Everything here is built from Kubernetes JSON (camelCase dicts, as the API and the extender
send them) and is free of any client library, so the simulator (`rl/`), the extender and the
standalone scheduler share one implementation of filtering and scoring.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}


def parse_quantity(value: str | int | float) -> float:
    """A Kubernetes resource quantity ("500m", "2Gi", "1.5", 3) as a float in base units."""
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


@dataclass(frozen=True)
class Resources:
    """Requests or capacity. CPU in millicores, memory and storage in bytes, pods as a count."""

    cpu_millicores: int = 0
    memory_bytes: int = 0
    pods: int = 0
    ephemeral_storage_bytes: int = 0

    @classmethod
    def from_k8s(cls, values: Mapping[str, Any] | None, pods: int = 0) -> Resources:
        values = values or {}
        cpu = values.get("cpu")
        mem = values.get("memory")
        eph = values.get("ephemeral-storage")
        pod_count = values.get("pods")
        return cls(
            cpu_millicores=round(parse_quantity(cpu) * 1000) if cpu is not None else 0,
            memory_bytes=round(parse_quantity(mem)) if mem is not None else 0,
            pods=int(parse_quantity(pod_count)) if pod_count is not None else pods,
            ephemeral_storage_bytes=round(parse_quantity(eph)) if eph is not None else 0,
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


def _container_requests(container: Mapping[str, Any]) -> Resources:
    return Resources.from_k8s((container.get("resources") or {}).get("requests"))


def effective_requests(
    spec: Mapping[str, Any],
    container_requests: Callable[[Mapping[str, Any]], Resources] = _container_requests,
) -> Resources:
    """A pod's requests as kube-scheduler counts them (resource fit, scoring).

    max(Σ app containers + Σ restartable (sidecar) init containers,
        each non-restartable init container + the sidecars started before it) + overhead;
    plus one pod.
    """
    total = Resources()
    for container in spec.get("containers") or []:
        total = total + container_requests(container)
    sidecars = Resources()
    init_peak = Resources()
    for container in spec.get("initContainers") or []:
        requests = container_requests(container)
        if container.get("restartPolicy") == "Always":
            sidecars = sidecars + requests
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(sidecars + requests)
    total = (total + sidecars).max(init_peak)
    overhead = Resources.from_k8s(spec.get("overhead"))
    return total + overhead + Resources(pods=1)


# kube-scheduler's stand-ins for a container that sets no CPU or memory request, used by the
# NodeResourcesFit scoring strategies (not by the fit filter): 100 millicores and 200 MiB.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST_BYTES = 200 * 1024 * 1024


def _nonzero_container_requests(container: Mapping[str, Any]) -> Resources:
    raw = (container.get("resources") or {}).get("requests") or {}
    requests = Resources.from_k8s(raw)
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


def _requirements(items: Sequence[Mapping[str, Any]] | None) -> tuple[SelectorRequirement, ...]:
    return tuple(
        SelectorRequirement(
            key=str(item.get("key", "")),
            operator=str(item.get("operator", "")),
            values=tuple(str(v) for v in item.get("values") or ()),
        )
        for item in items or ()
    )


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    requests: Resources  # effective requests, see effective_requests()
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: tuple[SelectorTerm, ...] = ()  # ORed terms; empty = no constraint
    tolerations: tuple[Toleration, ...] = ()
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    annotations: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    phase: str | None = None
    # Requests with kube-scheduler's scoring defaults (see nonzero_requests()); None = `requests`.
    nonzero_requests: Resources | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_k8s(cls, pod: Mapping[str, Any]) -> PodInfo:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        terms = tuple(
            SelectorTerm(_requirements(t.get("matchExpressions")), _requirements(t.get("matchFields")))
            for t in affinity.get("nodeSelectorTerms") or ()
        )
        tolerations = tuple(
            Toleration(
                key=str(t.get("key") or ""),
                operator=str(t.get("operator") or "Equal"),
                value=str(t.get("value") or ""),
                effect=str(t.get("effect") or ""),
            )
            for t in spec.get("tolerations") or ()
        )
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            requests=effective_requests(spec),
            node_selector=tuple(sorted((spec.get("nodeSelector") or {}).items())),
            required_affinity=terms,
            tolerations=tolerations,
            scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
            node_name=spec.get("nodeName") or None,
            annotations=tuple(sorted((meta.get("annotations") or {}).items())),
            labels=tuple(sorted((meta.get("labels") or {}).items())),
            phase=status.get("phase"),
            nonzero_requests=nonzero_requests(spec),
        )


@dataclass(frozen=True)
class NodeInfo:
    name: str
    allocatable: Resources
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def cpu_cores(self) -> float:
        return self.allocatable.cpu_millicores / 1000.0

    @classmethod
    def from_k8s(cls, node: Mapping[str, Any]) -> NodeInfo:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        # A node with no conditions at all (as in some extender payloads) is taken as ready.
        if not status.get("conditions"):
            ready = True
        return cls(
            name=str(meta.get("name") or ""),
            allocatable=Resources.from_k8s(status.get("allocatable") or status.get("capacity")),
            labels=tuple(sorted((meta.get("labels") or {}).items())),
            taints=tuple(
                Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
                for t in spec.get("taints") or ()
            ),
            ready=ready,
            unschedulable=bool(spec.get("unschedulable", False)),
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


@dataclass(frozen=True)
class ScoreResult:
    node: str
    score: float  # 0..100, absolute; 50 neutral
    delta_watts: float | None = None
    reason: str = "ok"  # ok | stale | missing | no_curve | ...


class Scorer(Protocol):
    """Scores all candidate nodes for one pod in one call. Scores are absolute (0–100) and a
    node's score never depends on which other candidates are offered."""

    name: str

    def score(self, pod: PodInfo, nodes: Sequence[NodeState], now: float) -> list[ScoreResult]: ...
