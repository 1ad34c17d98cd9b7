"""The live cluster as the rebalancer's decision sees it: the watch's nodes and pods (the cluster
cache for node states, a tracker for each pod's eviction facts), the telemetry store's samples,
the PodDisruptionBudgets, and the lifetime predictor — turned into `NodeView`s.

A pod whose JSON cannot be read is not dropped: it stays known to its node as unreadable, and
that node is never emptied (`unreadable_pod`), since its requests and owner are unknown."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from common.curves import PowerCurve
from common.jsonvalue import subobject
from scheduler.cluster.cache import TERMINAL_PHASES, ClusterCache
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.cluster.node_table import placed_time
from scheduler.cluster.podfacts import KEEPS_LIFETIME, PodFacts, never_evict_reason, node_bound
from scheduler.cluster.watch import ClusterWatch, WatchApi
from scheduler.decisions.rebalance import NodeView, PodView, cpu_shares, fresh_utilization
from scheduler.decisions.rebalance_lifetime import remaining as predicted_remaining
from scheduler.decisions.rebalance_prices import pod_eviction_cost
from scheduler.domain.model import NodeState, NodeTelemetry, PodInfo, Resources, ShapeError
from scheduler.lifetimes import LifetimePredictor
from scheduler.rebalancer.pdbs import MULTIPLE, Budget, covering

log = logging.getLogger(__name__)

# The NoSchedule taint the rebalancer puts on a node it empties (no new pods: the evicted ones go
# elsewhere); off again after the node's cool-down if cluster-autoscaler did not remove it.
REBALANCING_TAINT = "kubejoule.io/rebalancing"
# cluster-autoscaler's taints (a node it is removing, NoSchedule, or found unneeded, soft) and
# the rebalancer's own: such a node is neither emptied nor given pods.
LEAVE_ALONE_TAINTS = (
    "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler", REBALANCING_TAINT,
)
UNREADABLE = "unreadable_pod"


@dataclass(frozen=True)
class TrackedPod:
    key: str
    node: str
    info: PodInfo | None  # None: unreadable
    facts: PodFacts | None
    started: float  # wall seconds: status.startTime, else when it was placed


def _key(obj: Mapping[str, object]) -> str:
    meta = subobject(obj, "metadata")
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


class PodTracker:
    """Every pod bound to a node with its facts; applies each watch event to the cache too."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self._lock = threading.Lock()
        self._pods: dict[str, TrackedPod] = {}

    def _read(self, obj: Mapping[str, object]) -> TrackedPod | None:
        node = subobject(obj, "spec").get("nodeName")
        if not node or not isinstance(node, str) or subobject(obj, "status").get("phase") in TERMINAL_PHASES:
            return None
        key = _key(obj)
        try:
            facts = PodFacts.from_k8s(obj)
            info = pod_info_from_k8s(obj)
        except ShapeError as exc:
            log.warning("pod %s is unreadable (its node is left alone): %s", key, exc)
            return TrackedPod(key, node, None, None, 0.0)
        return TrackedPod(key, node, info, facts, facts.started or placed_time(obj))

    def apply(self, kind: str, obj: Mapping[str, object]) -> None:
        if kind == "DELETED":
            self.cache.delete_pod(obj)
        else:
            self.cache.upsert_pod(obj)
        tracked = None if kind == "DELETED" else self._read(obj)
        with self._lock:
            if tracked is None:
                self._pods.pop(_key(obj), None)
            else:
                self._pods[tracked.key] = tracked

    def replace(self, pods: Iterable[Mapping[str, object]]) -> None:
        tracked = [t for obj in pods if (t := self._read(obj)) is not None]
        with self._lock:
            self._pods = {t.key: t for t in tracked}

    def snapshot(self) -> list[TrackedPod]:
        with self._lock:
            return list(self._pods.values())


class RebalancerWatch(ClusterWatch):
    """The cluster watch, with pod listings and events also given to the tracker."""

    def __init__(self, api: WatchApi, cache: ClusterCache, tracker: PodTracker) -> None:
        super().__init__(api, cache, on_pod_event=tracker.apply)
        self.tracker = tracker

    def relist_pods(self) -> None:
        pods, _ = self.api.list_pods()
        self.cache.replace_pods(pods)
        self.tracker.replace(pods)


def node_curve(
    telemetry: NodeTelemetry | None, configured: Mapping[str, PowerCurve], name: str
) -> PowerCurve | None:
    """The curve the node's agent exports, else the configured one; None when neither."""
    if telemetry is not None and telemetry.curve_points is not None:
        try:
            return PowerCurve.from_points(telemetry.curve_points)
        except ValueError:
            return None
    return configured.get(name)


@dataclass(frozen=True)
class LiveInputs:
    states: Sequence[NodeState]
    pods: Sequence[TrackedPod]
    budgets: Sequence[Budget]
    curves: Mapping[str, PowerCurve]
    predictor: LifetimePredictor | None
    now: float  # wall seconds
    max_staleness_s: float
    cooling: Callable[[str], bool]


def node_views(inputs: LiveInputs) -> list[NodeView]:
    by_node: dict[str, list[TrackedPod]] = {}
    for pod in inputs.pods:
        by_node.setdefault(pod.node, []).append(pod)
    return [_view(state, by_node.get(state.info.name, []), inputs) for state in inputs.states]


def _view(state: NodeState, tracked: list[TrackedPod], inputs: LiveInputs) -> NodeView:
    info = state.info
    name = info.name
    utilization = fresh_utilization(state, inputs.now, inputs.max_staleness_s)
    readable = [t for t in tracked if t.info is not None and t.facts is not None]
    movable = [t for t in readable if not node_bound(t.info.annotations, t.facts)]  # type: ignore[union-attr,arg-type]
    staying = [t for t in readable if t not in movable]
    # each pod's share of the measured CPU, node-bound pods (DaemonSets') included
    shares = cpu_shares((utilization or 0.0) * state.cores,
                        [t.info.requests.cpu_millicores for t in movable + staying])  # type: ignore[union-attr]
    pods = [_pod(t, share, inputs) for t, share in zip(movable, shares, strict=False)]
    pods += [_unreadable(t) for t in tracked if t.info is None or t.facts is None]
    schedulable = info.ready and not info.unschedulable and not any(
        t.key in LEAVE_ALONE_TAINTS for t in info.taints
    )
    return NodeView(
        state=state,
        curve=node_curve(state.telemetry, inputs.curves, name),
        utilization=utilization,
        pods=tuple(pods),
        schedulable=schedulable,
        cooling=inputs.cooling(name),
    )


def _pod(t: TrackedPod, share: float, inputs: LiveInputs) -> PodView:
    assert t.info is not None and t.facts is not None
    info, facts = t.info, t.facts
    age = max(0.0, inputs.now - t.started)
    blocker = never_evict_reason(info.annotations, facts)
    budget = covering(inputs.budgets, info.namespace, dict(info.labels))
    if budget == MULTIPLE and blocker is None:
        blocker = MULTIPLE
    remaining = predicted_remaining(inputs.predictor, info, age)
    return PodView(
        key=t.key,
        info=info,
        cpu_cores=share,
        run_seconds=age,
        restarts=info.owner_kind not in KEEPS_LIFETIME,
        remaining=remaining,
        eviction_cost=pod_eviction_cost(info.annotations, facts.priority),
        blocker=blocker,
        workload=budget.key if isinstance(budget, Budget) else None,
        pdb_room=budget.allowed if isinstance(budget, Budget) else None,
    )


def _unreadable(t: TrackedPod) -> PodView:
    """A pod whose JSON could not be read: it keeps its node from being emptied."""
    return PodView(t.key, PodInfo("", t.key, "", Resources()), 0.0, 0.0, True, None,
                   blocker=UNREADABLE)
