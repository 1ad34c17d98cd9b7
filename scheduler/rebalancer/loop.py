"""The live rebalancer: every interval, while it leads, one round of the decision
(scheduler/decisions/rebalance.py) over the watched cluster, then its moves — recommended in
shadow mode, carried out in active mode.

A round does nothing, and says why (`kubejoule_rebalancer_rounds_total{result}`), when it cannot
trust what it sees: the watch has not listed nodes and pods yet (`not_synced`), the telemetry
store has not refreshed (`telemetry_not_ready`), the wall clock moved by more than
`max_clock_jump_seconds` against the monotonic one since the last round (`clock_jump`: pod ages
and sample ages would be wrong), or the PodDisruptionBudgets cannot be listed
(`pdbs_unavailable`).

Shadow mode: each move's node gets the annotation `kubejoule.io/rebalance` (JSON: the saving,
its cost, the horizon, Karpenter's score, where each pod would go, when) and a
`RebalanceRecommended` Event; the node then rests for its cool-down, so a recommendation is
made (and its saving counted) once per cool-down.

Active mode: the node gets the NoSchedule taint `kubejoule.io/rebalancing` (so the evicted pods
go elsewhere; the update carries the node's resourceVersion, and a conflict skips the move),
a `Rebalancing` Event, then each pod is evicted through the Eviction API (policy/v1): the API
server refuses a pod whose PodDisruptionBudget has no room (429) — the node's remaining pods are
then left alone. The rebalancer never deletes a node: cluster-autoscaler removes it once empty.
The taint comes off after the node's cool-down if the node is still there (also a taint left
by an earlier leader, counted from when this one first saw it).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping

from common.curves import PowerCurve
from common.jsonvalue import subobject, subobjects
from scheduler.cluster import kube
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.kubejson import rfc3339
from scheduler.config.rebalancer import RebalancerConfig
from scheduler.decisions.rebalance import Move, Plan, plan
from scheduler.domain.model import NodeTelemetry
from scheduler.lifetimes import LifetimePredictor
from scheduler.rebalancer.api import RebalancerApi
from scheduler.rebalancer.cluster import (
    REBALANCING_TAINT,
    LiveInputs,
    PodTracker,
    RebalancerWatch,
    node_views,
)
from scheduler.rebalancer.metrics import RebalancerMetrics
from scheduler.rebalancer.pdbs import budget_from_k8s

log = logging.getLogger(__name__)

ANNOTATION = "kubejoule.io/rebalance"
COMPONENT = "kubejoule-rebalancer"
MAX_ANNOTATED_PODS = 20  # annotations are size-limited


class Rebalancer:
    def __init__(
        self,
        api: RebalancerApi,
        config: RebalancerConfig,
        telemetry: Callable[[str], NodeTelemetry | None],
        telemetry_ready: Callable[[], bool],
        curves: Mapping[str, PowerCurve] | None = None,
        predictor: LifetimePredictor | None = None,
        metrics: RebalancerMetrics | None = None,
        max_staleness_seconds: float = 30.0,
        identity: str = "",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.config = config
        self.telemetry = telemetry
        self.telemetry_ready = telemetry_ready
        self.curves = dict(curves or {})
        self.predictor = predictor
        self.metrics = metrics or RebalancerMetrics()
        self.max_staleness_seconds = max_staleness_seconds
        self.identity = identity
        self.clock = clock
        self.wall = wall_clock
        self.cache = ClusterCache(None, clock=wall_clock, lifetimes=predictor)
        self.tracker = PodTracker(self.cache)
        self.watch = RebalancerWatch(api, self.cache, self.tracker)
        self.is_leader: Callable[[], bool] = lambda: True
        self._acted: dict[str, float] = {}  # node → when a move (or recommendation) was made
        self._tainted: dict[str, float] = {}  # node → since when it carries our taint
        self._last_clocks: tuple[float, float] | None = None

    def on_leadership(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)

    # -- one round --------------------------------------------------------------------------------

    def _doubt(self) -> str | None:
        mono, wall = self.clock(), self.wall()
        last, self._last_clocks = self._last_clocks, (mono, wall)
        if last is not None and abs((wall - last[1]) - (mono - last[0])) > self.config.max_clock_jump_seconds:
            return "clock_jump"
        if not self.watch.synced:
            return "not_synced"
        if not self.telemetry_ready():
            return "telemetry_not_ready"
        return None

    def _cooling(self, node: str) -> bool:
        acted = self._acted.get(node)
        return acted is not None and self.clock() - acted < self.config.node_cooldown_seconds

    def round(self) -> Plan | None:
        """One round (module docstring); None when it did nothing."""
        doubt = self._doubt()
        if doubt is not None:
            log.info("rebalancer round skipped: %s", doubt)
            self.metrics.skipped_round(doubt)
            return None
        try:
            budgets = [budget_from_k8s(p) for p in self.api.list_pdbs()]
        except (kube.ApiError, ValueError) as exc:
            log.warning("rebalancer round skipped: PodDisruptionBudgets unavailable: %s", exc)
            self.metrics.skipped_round("pdbs_unavailable")
            return None
        wall = self.wall()
        self._untaint_rested()
        states = self.cache.node_states(self.telemetry)
        inputs = LiveInputs(states, self.tracker.snapshot(), budgets, self.curves, self.predictor,
                            wall, self.max_staleness_seconds, self._cooling)
        result = plan(node_views(inputs), self.config)
        self.metrics.planned(result, self.config.mode, wall)
        log.info("rebalancer round: %d move(s); nodes skipped by reason %s", len(result.moves), result.reasons())
        for move in result.moves:
            if not self.is_leader():
                break
            self._acted[move.node] = self.clock()
            if self.config.active:
                self._carry_out(move)
            else:
                self._recommend(move, wall)
        return result

    # -- shadow -------------------------------------------------------------------------------------

    def _recommend(self, move: Move, wall: float) -> None:
        record = {
            "saving_joules": round(move.saving_joules),
            "cost_joules": round(move.cost_joules),
            "horizon_seconds": round(move.horizon_seconds),
            "watts_saved": round(move.watts_saved, 1),
            "score": round(move.score, 3),
            "pods": dict(move.placements[:MAX_ANNOTATED_PODS]),
            "at": rfc3339(wall),
        }
        if self.config.annotate_nodes:
            patch = {"metadata": {"annotations": {ANNOTATION: json.dumps(record, separators=(",", ":"))}}}
            self._call(lambda: self.api.patch_node(move.node, patch), "annotate", move.node)
        self._node_event(move.node, "RebalanceRecommended", f"would move {_summary(move)}")

    # -- active -------------------------------------------------------------------------------------

    def _carry_out(self, move: Move) -> None:
        if not self._set_taint(move.node, True):
            log.warning("not emptying %s: its taint could not be set", move.node)
            return
        self._tainted[move.node] = self.clock()
        self._node_event(move.node, "Rebalancing", f"moving {_summary(move)}")
        for key, destination in move.placements:
            if not self.is_leader():
                return
            namespace, _, name = key.partition("/")
            uid = self._uid(key)
            try:
                self.api.evict(namespace, name, uid)
            except kube.ApiError as exc:
                if exc.status in (404, 409):  # gone, or another pod by that name now
                    self.metrics.evictions.labels("gone").inc()
                    continue
                result = "refused" if exc.status == 429 else "error"
                self.metrics.evictions.labels(result).inc()
                log.info("eviction of %s %s (%s); leaving the rest of %s", key, result, exc, move.node)
                return
            self.metrics.evictions.labels("evicted").inc()
            log.info("evicted %s from %s (it fits %s)", key, move.node, destination)

    def _uid(self, key: str) -> str:
        for pod in self.tracker.snapshot():
            if pod.key == key and pod.info is not None:
                return pod.info.uid
        return ""

    def _untaint_rested(self) -> None:
        """Take our taint off nodes whose cool-down is over (the autoscaler did not remove them)."""
        now = self.clock()
        names = set(self.cache.node_names())
        for state in self.cache.node_states():
            if any(t.key == REBALANCING_TAINT for t in state.info.taints):
                self._tainted.setdefault(state.info.name, now)
        for name, since in list(self._tainted.items()):
            if name not in names or now - since >= self.config.node_cooldown_seconds and self._set_taint(name, False):
                del self._tainted[name]

    def _set_taint(self, name: str, on: bool) -> bool:
        """Add or remove our NoSchedule taint, with the node's resourceVersion as precondition."""
        try:
            node = self.api.get_node(name)
            if node is None:
                return False
            taints = [t for t in subobjects(subobject(node, "spec"), "taints")
                      if t.get("key") != REBALANCING_TAINT]
            if on:
                taints.append({"key": REBALANCING_TAINT, "value": "", "effect": "NoSchedule"})
            version = subobject(node, "metadata").get("resourceVersion")
            self.api.patch_node(name, {"metadata": {"resourceVersion": version},
                                       "spec": {"taints": taints}})
            return True
        except kube.ApiError as exc:
            log.warning("could not %s the taint of %s: %s", "set" if on else "remove", name, exc)
            return False

    # -- events -------------------------------------------------------------------------------------

    def _node_event(self, node: str, reason: str, message: str) -> None:
        wall = self.wall()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{node}.{time.time_ns():x}", "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node},
            "type": "Normal",
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity or COMPONENT,
            "firstTimestamp": rfc3339(wall),
            "lastTimestamp": rfc3339(wall),
            "count": 1,
        }
        self._call(lambda: self.api.create_event("default", event), "event", node)

    @staticmethod
    def _call(work: Callable[[], None], what: str, node: str) -> None:
        try:
            work()
        except kube.ApiError as exc:
            log.warning("rebalancer %s on %s failed: %s", what, node, exc)

    # -- running ------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Watch, and run a round every interval while leading, until `stop` is set."""
        threads = self.watch.start(stop)
        try:
            while not stop.wait(self.config.interval_seconds):
                if self.is_leader():
                    try:
                        self.round()
                    except Exception:  # one bad round must not end the rebalancer
                        log.exception("rebalancer round failed")
        finally:
            self.watch.close()
            for thread in threads:
                thread.join(5.0)


def _summary(move: Move) -> str:
    nodes = sorted({d for _, d in move.placements})
    return (
        f"{len(move.placements)} pod(s) to {', '.join(nodes)}: saves "
        f"{move.saving_joules / 1000:.0f} kJ over {move.horizon_seconds / 60:.0f} min "
        f"(disruption {move.cost_joules / 1000:.1f} kJ, score {move.score:.2f})"
    )
