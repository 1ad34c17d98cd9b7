"""descheduler's HighNodeUtilization: evict the pods of under-utilized nodes so the scheduler
(with NodeResourcesFit MostAllocated) packs them onto fewer nodes and the autoscaler removes
the rest.

Source: kubernetes-sigs/descheduler at DESCHEDULER_COMMIT, pkg/framework/plugins/nodeutilization/
(highnodeutilization.go `Balance`; nodeutilization.go `evictPodsFromSourceNodes`, `evictPods`,
`sortNodesByUsage`, `isNodeBelowThreshold`, `capNodeCapacityToThreshold`,
`assessAvailableResourceInNodes`, `ResourceUsageToResourceThreshold`; validation.go;
classifier/classifier.go), pkg/descheduler/pod/pods.go (`ListPodsOnANode`,
`SortPodsBasedOnPriorityLowToHigh`), pkg/utils/pod.go (`PodToleratesTaints`) and
pkg/descheduler/evictions/evictions.go (the evictor's limits). One cycle (`balance`):

1. Usage of every node: the requests of its pods (not Succeeded or Failed) per resource — the
   thresholds' resources, cpu, memory and pods (the pod count) — as a percentage of
   allocatable (0 where allocatable is 0; a resource the node lacks has no percentage).
2. A node is under-utilized when every threshold resource is at or below its threshold; the
   others are destinations unless `spec.unschedulable` (an unschedulable under-utilized node is
   still a source).
3. Nothing happens without an under-utilized node, with no more of them than
   `numberOfNodes`, when every node is under-utilized, or without a destination.
4. The room to fill is Σ over destinations of (allocatable − usage) per resource. Sources go in
   ascending order of their summed usage (millicores + bytes + pods); each one's evictable pods
   (the evictor's filter, and with `evictionModes: [OnlyThresholdingResources]` only pods
   requesting a threshold resource) go lowest priority first, then BestEffort, Burstable,
   Guaranteed, pods without `prefer-no-eviction` first. A pod is skipped unless it tolerates
   every taint of some destination, and unless the evictor's pre-eviction filter passes; an
   eviction the API refuses (a PodDisruptionBudget without room) is skipped. Each eviction
   takes the pod's requests (and one pod) off the room; the cycle stops when any resource's
   room reaches 0 or the evictor's total limit is hit, and leaves a node at its per-node limit.

Go's `sort.Slice` is not stable; ties keep their input order here (nodes in node order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rl.simulation.controllers.descheduler.evictor import (
    NO_EVICTION_ANNOTATION,
    DefaultEvictor,
    tolerates_taints,
)
from rl.simulation.controllers.descheduler.model import (
    BASIC,
    CPU,
    PODS,
    Node,
    Pod,
    PodRequests,
    node_usage,
    qos_class,
)
from scheduler.cluster.podfacts import annotation

ONLY_THRESHOLDING_RESOURCES = "OnlyThresholdingResources"
_QOS_ORDER = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
_DONE = ("Succeeded", "Failed")


@dataclass(frozen=True)
class HighNodeUtilizationArgs:
    """HighNodeUtilizationArgs (thresholds in percent of allocatable)."""

    thresholds: Mapping[str, float] = field(default_factory=dict)
    number_of_nodes: int = 0
    eviction_modes: tuple[str, ...] = ()
    exclude_namespaces: tuple[str, ...] = ()  # evictableNamespaces.exclude

    def __post_init__(self) -> None:
        message = validation_error(self)
        if message is not None:
            raise ValueError(message)


def validation_error(args: HighNodeUtilizationArgs) -> str | None:
    """`ValidateHighNodeUtilizationArgs`' message, None when the arguments are valid."""
    if not args.thresholds:
        return "no resource threshold is configured"
    for name in sorted(args.thresholds):
        if not 0 <= args.thresholds[name] <= 100:
            return f"{name} threshold not in [0, 100] range"
    for mode in args.eviction_modes:
        if mode != ONLY_THRESHOLDING_RESOURCES:
            return f"invalid eviction mode {mode}"
    if args.number_of_nodes < 0:
        return "numberOfNodes must be >= 0"
    return None


@dataclass(frozen=True)
class EvictionLimits:
    """The policy's maxNoOfPodsToEvictPerNode / PerNamespace / Total (None: no limit)."""

    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None


class NodeLimit(Exception):
    pass


class TotalLimit(Exception):
    pass


class PodEvictor:
    """Counts a cycle's evictions against the limits and asks `evict` (the eviction API:
    False when it refuses) for each."""

    def __init__(self, evict: Callable[[Pod], bool], limits: EvictionLimits | None = None) -> None:
        self._evict = evict
        self.limits = limits or EvictionLimits()
        self.evicted: list[Pod] = []
        self._by_node: dict[str, int] = {}
        self._by_namespace: dict[str, int] = {}

    def evict(self, pod: Pod) -> bool:
        """True when the pod was evicted; raises NodeLimit / TotalLimit at those limits."""
        limits = self.limits
        if limits.total is not None and len(self.evicted) + 1 > limits.total:
            raise TotalLimit()
        if limits.per_node is not None and self._by_node.get(pod.node, 0) + 1 > limits.per_node:
            raise NodeLimit()
        namespace = pod.info.namespace
        if (
            limits.per_namespace is not None
            and self._by_namespace.get(namespace, 0) + 1 > limits.per_namespace
        ):
            return False
        if not self._evict(pod):
            return False
        self.evicted.append(pod)
        self._by_node[pod.node] = self._by_node.get(pod.node, 0) + 1
        self._by_namespace[namespace] = self._by_namespace.get(namespace, 0) + 1
        return True


def usage_percentages(
    usage: Mapping[str, int | None], capacity: Mapping[str, int | None]
) -> dict[str, float]:
    """`ResourceUsageToResourceThreshold`: used / capacity × 100 per resource both know (0 for
    a zero capacity)."""
    out: dict[str, float] = {}
    for name, used in usage.items():
        total = capacity.get(name)
        if used is None or total is None:
            continue
        out[name] = used / total * 100 if total > 0 else 0.0
    return out


def below_threshold(usage: Mapping[str, float], thresholds: Mapping[str, float]) -> bool:
    """`isNodeBelowThreshold`: no threshold resource above its threshold."""
    return all(usage.get(name, 0.0) <= value for name, value in thresholds.items())


def sort_by_usage(usages: Sequence[tuple[str, Mapping[str, int]]]) -> list[str]:
    """`sortNodesByUsage` ascending: by the sum of millicores, bytes and counts."""
    return [name for name, _ in sorted(usages, key=lambda item: sum(item[1].values()))]


def eviction_order(pods: Sequence[Pod]) -> list[Pod]:
    """`SortPodsBasedOnPriorityLowToHigh`: no priority first, then lowest priority; on equal
    priority BestEffort, Burstable, Guaranteed; pods without prefer-no-eviction first."""

    def key(pod: Pod) -> tuple[bool, int, int, bool]:
        priority = pod.facts.priority
        no_eviction = annotation(pod.info.annotations, NO_EVICTION_ANNOTATION) is not None
        return (priority is not None, priority or 0, _QOS_ORDER[qos_class(pod.info)], no_eviction)

    return sorted(pods, key=key)


def requests_any(pod: Pod, names: Sequence[str]) -> bool:
    """`withResourceRequestForAny`: some container names one of the resources in its requests."""
    containers = pod.info.container_resources()
    extended = dict(pod.extended)
    for name in names:
        if name == CPU and any(c.cpu_request_millicores is not None for c in containers):
            return True
        if name == "memory" and any(c.memory_request_bytes is not None for c in containers):
            return True
        if name in extended:
            return True
    return False


def balance(
    nodes: Sequence[Node],
    pods_on: Mapping[str, Sequence[Pod]],
    args: HighNodeUtilizationArgs,
    evictor: DefaultEvictor,
    pod_evictor: PodEvictor,
) -> list[Pod]:
    """One HighNodeUtilization cycle (module docstring); returns the pods evicted."""
    thresholds = dict(args.thresholds)
    names = sorted(set(thresholds) | set(BASIC))
    live = {n.name: [p for p in pods_on.get(n.name, ()) if p.info.phase not in _DONE] for n in nodes}
    usage = {n.name: node_usage(live[n.name], names) for n in nodes}
    sources: list[Node] = []
    destinations: list[Node] = []
    for node in nodes:
        percent = usage_percentages(usage[node.name], {r: node.allocatable(r) for r in names})
        if below_threshold(percent, thresholds):
            sources.append(node)
        elif not node.info.unschedulable:
            destinations.append(node)
    if not sources or len(sources) <= args.number_of_nodes or len(sources) == len(nodes):
        return []
    if not destinations:
        return []
    room = {name: 0 for name in names}
    for node in destinations:
        for name in names:
            room[name] += (node.allocatable(name) or 0) - usage[node.name][name]
    order = sort_by_usage([(n.name, usage[n.name]) for n in sources])
    for name in order:
        removable = [p for p in live[name] if _pod_filter(p, evictor, args)]
        try:
            _evict_from(eviction_order(removable), destinations, room, names, evictor, pod_evictor, args)
        except TotalLimit:
            break
    return list(pod_evictor.evicted)


def _pod_filter(pod: Pod, evictor: DefaultEvictor, args: HighNodeUtilizationArgs) -> bool:
    if not evictor.filter(pod):
        return False
    return ONLY_THRESHOLDING_RESOURCES not in args.eviction_modes or requests_any(
        pod, list(args.thresholds)
    )


def _evict_from(
    pods: Sequence[Pod],
    destinations: Sequence[Node],
    room: dict[str, int],
    names: Sequence[str],
    evictor: DefaultEvictor,
    pod_evictor: PodEvictor,
    args: HighNodeUtilizationArgs,
) -> None:
    """`evictPods` for one source node; TotalLimit propagates."""

    def more_room() -> bool:
        return all(value > 0 for value in room.values())

    if not more_room():
        return
    for pod in pods:
        if not any(_tolerates_all(pod, d) for d in destinations):
            continue
        if pod.info.namespace in args.exclude_namespaces or not evictor.pre_eviction_filter(pod):
            continue
        try:
            if not pod_evictor.evict(pod):
                continue
        except NodeLimit:
            return
        requests = PodRequests.of(pod)
        for name in names:
            room[name] -= 1 if name == PODS else requests.get(name)
        if not more_room():
            return


def _tolerates_all(pod: Pod, node: Node) -> bool:
    """`PodToleratesTaints` for one destination: at least as many tolerations as taints, and
    every taint (whatever its effect) tolerated."""
    return len(pod.info.tolerations) >= len(node.info.taints) and tolerates_taints(pod, node, None)
