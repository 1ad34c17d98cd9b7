"""descheduler's DefaultEvictor: which pods a strategy may evict (`filter`) and, with `nodeFit`,
whether a pod would fit another node before it is evicted (`pre_eviction_filter`).

Source: kubernetes-sigs/descheduler at DESCHEDULER_COMMIT, pkg/framework/plugins/defaultevictor/
(defaultevictor.go `Filter`, `PreEvictionFilter`, `getEffectivePodProtections`,
`legacyGetPodProtections`; constraints.go; types.go `defaultPodProtections`), pkg/utils/pod.go
(mirror, static, critical-priority, DaemonSet and local-storage tests) and
pkg/descheduler/node/node.go (`NodeFit`, `fitsRequest`). Its README documents the defaults
(every protection of `defaultPodProtections` on, `nodeFit: false`).

`filter(pod)`:
1. the annotation `descheduler.alpha.kubernetes.io/evict` makes any pod evictable;
2. with `noEvictionPolicy: Mandatory`, `descheduler.alpha.kubernetes.io/prefer-no-eviction`
   makes it not evictable;
3. otherwise a mirror pod, a static pod, a terminating pod, and every enabled protection's pod
   is not evictable: SystemCriticalPods (priority ≥ 2 000 000 000, and below
   `priorityThreshold` when one is set — only while that protection is on), FailedBarePods (a
   pod without owner references; with the protection off, such a pod only when Failed),
   PodsWithLocalStorage (an emptyDir or hostPath volume), DaemonSetPods (an owner of kind
   DaemonSet), PodsWithPVC, PodsWithoutPDB, PodsWithResourceClaims; then `minReplicas` (a pod
   with one owner whose pods number fewer) and `minPodAge` (started less than that ago).
   The deprecated boolean arguments apply only when `podProtections` lists nothing.

Not modelled (no such objects in the simulator): label and namespace-label selectors, priority
thresholds given by PriorityClass name, protected storage classes of PodsWithPVC.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rl.simulation.controllers.descheduler.model import Node, Pod, PodRequests, fits_request
from scheduler.cluster.podfacts import annotation, is_mirror, is_static
from scheduler.domain.filters import matches_node_selector, tolerates

EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
SYSTEM_CRITICAL_PRIORITY = 2 * 1_000_000_000  # pkg/utils/priority.go

PODS_WITH_LOCAL_STORAGE = "PodsWithLocalStorage"
DAEMONSET_PODS = "DaemonSetPods"
SYSTEM_CRITICAL_PODS = "SystemCriticalPods"
FAILED_BARE_PODS = "FailedBarePods"
PODS_WITH_PVC = "PodsWithPVC"
PODS_WITHOUT_PDB = "PodsWithoutPDB"
PODS_WITH_RESOURCE_CLAIMS = "PodsWithResourceClaims"
DEFAULT_PROTECTIONS = (
    PODS_WITH_LOCAL_STORAGE, SYSTEM_CRITICAL_PODS, FAILED_BARE_PODS, DAEMONSET_PODS,
)
EXTRA_PROTECTIONS = (PODS_WITH_PVC, PODS_WITHOUT_PDB, PODS_WITH_RESOURCE_CLAIMS)
MANDATORY = "Mandatory"
PREFERRED = "Preferred"


@dataclass(frozen=True)
class DefaultEvictorArgs:
    """DefaultEvictorArgs; every default is descheduler's."""

    node_fit: bool = False
    priority_threshold: int | None = None
    min_replicas: int = 0
    min_pod_age_s: float | None = None
    no_eviction_policy: str = ""  # "" | Preferred | Mandatory
    default_disabled: tuple[str, ...] = ()  # podProtections.defaultDisabled
    extra_enabled: tuple[str, ...] = ()  # podProtections.extraEnabled
    # The deprecated booleans (used only when both lists above are empty).
    evict_local_storage_pods: bool = False
    evict_daemonset_pods: bool = False
    evict_system_critical_pods: bool = False
    evict_failed_bare_pods: bool = False
    ignore_pvc_pods: bool = False
    ignore_pods_without_pdb: bool = False

    def __post_init__(self) -> None:
        if self.no_eviction_policy not in ("", PREFERRED, MANDATORY):
            raise ValueError(f"noEvictionPolicy: unknown value {self.no_eviction_policy!r}")
        unknown = [p for p in self.default_disabled if p not in DEFAULT_PROTECTIONS]
        unknown += [p for p in self.extra_enabled if p not in EXTRA_PROTECTIONS]
        if unknown:
            raise ValueError(f"podProtections: unknown or misplaced protection {unknown[0]!r}")


def effective_protections(args: DefaultEvictorArgs) -> tuple[str, ...]:
    """The protections in force (`getEffectivePodProtections`), in descheduler's order."""
    if not args.default_disabled and not args.extra_enabled:
        legacy = []
        if not args.evict_local_storage_pods:
            legacy.append(PODS_WITH_LOCAL_STORAGE)
        if not args.evict_daemonset_pods:
            legacy.append(DAEMONSET_PODS)
        if not args.evict_system_critical_pods:
            legacy.append(SYSTEM_CRITICAL_PODS)
        if not args.evict_failed_bare_pods:
            legacy.append(FAILED_BARE_PODS)
        if args.ignore_pvc_pods:
            legacy.append(PODS_WITH_PVC)
        if args.ignore_pods_without_pdb:
            legacy.append(PODS_WITHOUT_PDB)
        return tuple(legacy)
    kept = [p for p in DEFAULT_PROTECTIONS if p not in args.default_disabled]
    return (*kept, *args.extra_enabled)


@dataclass
class DefaultEvictor:
    """The evictor of one descheduling cycle. `replicas(uid)`: the pods of an owner;
    `covered_by_pdb(pod)`: a PodDisruptionBudget selects it; `nodes()`: the ready nodes and
    `pods_on(node)`: their pods, for nodeFit; `now`: seconds, as the pods' start times."""

    args: DefaultEvictorArgs = field(default_factory=DefaultEvictorArgs)
    replicas: Callable[[str], int] = lambda uid: 0
    covered_by_pdb: Callable[[Pod], bool] = lambda pod: False
    nodes: Callable[[], Sequence[Node]] = lambda: ()
    pods_on: Callable[[str], Sequence[Pod]] = lambda name: ()
    now: float = 0.0

    def __post_init__(self) -> None:
        self.protections = frozenset(effective_protections(self.args))

    def filter(self, pod: Pod) -> bool:
        annotations = pod.info.annotations
        if annotation(annotations, EVICT_ANNOTATION) is not None:
            return True
        if (
            self.args.no_eviction_policy == MANDATORY
            and annotation(annotations, NO_EVICTION_ANNOTATION) is not None
        ):
            return False
        if is_mirror(annotations) or is_static(annotations) or pod.facts.terminating:
            return False
        return not self._protected(pod) and self._constraints_pass(pod)

    def _protected(self, pod: Pod) -> bool:
        facts, on = pod.facts, self.protections
        priority = facts.priority
        if SYSTEM_CRITICAL_PODS in on:
            if priority is not None and priority >= SYSTEM_CRITICAL_PRIORITY:
                return True
            threshold = self.args.priority_threshold
            if threshold is not None and priority is not None and priority >= threshold:
                return True
        if facts.bare and (FAILED_BARE_PODS in on or pod.info.phase != "Failed"):
            return True
        if PODS_WITH_LOCAL_STORAGE in on and facts.local_storage:
            return True
        if DAEMONSET_PODS in on and facts.daemonset:
            return True
        if PODS_WITH_PVC in on and facts.pvc:
            return True
        if PODS_WITHOUT_PDB in on and not self.covered_by_pdb(pod):
            return True
        return PODS_WITH_RESOURCE_CLAIMS in on and facts.resource_claims

    def _constraints_pass(self, pod: Pod) -> bool:
        owners = pod.facts.owners
        minimum = self.args.min_replicas
        if minimum > 1 and len(owners) == 1 and self.replicas(owners[0].uid) < minimum:
            return False
        if self.args.min_pod_age_s is not None:
            started = pod.facts.started
            if started is None or self.now - started < self.args.min_pod_age_s:
                return False
        return True

    def pre_eviction_filter(self, pod: Pod) -> bool:
        """With nodeFit: the pod fits one of the ready nodes other than its own."""
        if not self.args.node_fit:
            return True
        return any(
            node_fit(pod, node, self.pods_on(node.name))
            for node in self.nodes()
            if node.name != pod.node
        )


def tolerates_taints(pod: Pod, node: Node, effects: tuple[str, ...] | None) -> bool:
    """Every taint of `node` (of `effects` only, when given) is tolerated by the pod."""
    return all(
        any(tolerates(t, taint) for t in pod.info.tolerations)
        for taint in node.info.taints
        if effects is None or taint.effect in effects
    )


def node_fit(pod: Pod, node: Node, pods_on_node: Sequence[Pod]) -> bool:
    """descheduler's `NodeFit` (node.go): schedulable, node selector and required affinity,
    NoSchedule/NoExecute taints tolerated, the requests fit beside the node's pods (its
    inter-pod anti-affinity check has nothing to check here: no pod carries any)."""
    if node.info.unschedulable or not matches_node_selector(pod.info, node.info):
        return False
    if not tolerates_taints(pod, node, ("NoSchedule", "NoExecute")):
        return False
    return fits_request(PodRequests.of(pod), node, pods_on_node)
