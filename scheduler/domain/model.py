"""Plain data the scheduler works on: pods, nodes, resources, telemetry, node workloads.

Free of any client library, so the simulator (`rl/`), the extender and the standalone
scheduler share one implementation of filtering and scoring. `scheduler.cluster.kubeobjects` reads them
from Kubernetes JSON (`pod_info_from_k8s`, `node_info_from_k8s`, `resources_from_k8s`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ShapeError(ValueError):
    """A Kubernetes object with a field of the wrong JSON type or value (the extender answers
    it with a 400 naming the field)."""


@dataclass(frozen=True)
class Resources:
    """Requests or capacity. CPU in millicores, memory and storage in bytes, pods as a count."""

    cpu_millicores: int = 0
    memory_bytes: int = 0
    pods: int = 0
    ephemeral_storage_bytes: int = 0

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


# kube-scheduler's stand-ins for a container that sets no CPU or memory request, used by the
# NodeResourcesFit scoring strategies (not by the fit filter): 100 millicores and 200 MiB.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST_BYTES = 200 * 1024 * 1024



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


@dataclass(frozen=True)
class NodeTelemetry:
    """What the TelemetryStore knows of one node. Times are wall-clock seconds."""

    node: str
    sample_time: float
    watts: float | None = None
    source: str = "none"  # rapl | estimated | platform | none
    utilization: float | None = None  # 0..1
    cores: float | None = None
    # 11 points of the node's power curve, if exported: what the node draws, GPUs and the
    # platform's rest included (scheduler/telemetry/exposition.py)
    curve_points: tuple[float, ...] | None = None

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


@dataclass(frozen=True)
class NodeWorkload:
    """What the scheduler knows of a node's pods and life, DaemonSet pods excepted (feature
    schemas v2 and v3, `scheduler.learning`: the cluster cache and the simulator fill it in)."""

    pod_start_times: tuple[float, ...] = ()  # when each non-DaemonSet pod was placed
    job_pods: int = 0  # how many of them a Job owns
    ready_since: float | None = None  # when the node became ready; None: unknown
    in_scale_down_window: bool = False
    # Feature schema v3 (scheduler.learning.features_v3); v2 rows never read these.
    pods_end_at: float | None = None  # predicted end of the last of those pods; None: no predictor
    autoscaler_known: bool = False  # the next two are known
    deletion_candidate: bool = False  # cluster-autoscaler's DeletionCandidate… soft taint
    unneeded_since: float | None = None  # when it was marked unneeded (None: not, or unknown)
    last_scale_up: float | None = None  # the cluster's last scale-up; None: unknown


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
