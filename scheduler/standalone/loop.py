"""The standalone scheduler's loop: the queue, one decision per pod, assume, bind (see the
package's docstring for the whole pass)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

from common.jsonvalue import subobject
from scheduler.cluster import kube
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.watch import ClusterWatch
from scheduler.decisionlog.logfile import DecisionLog
from scheduler.decisionlog.outcomes import OutcomeTracker
from scheduler.decisions.placement import MODE_SHADOW, Decision, ProfileDecider
from scheduler.domain.filters import failure_summary
from scheduler.domain.model import NodeTelemetry, PodInfo
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.scheduling_profile import SchedulingProfile
from scheduler.lifetimes import LifetimePredictor
from scheduler.plugins.defaults import kubejoule_profile
from scheduler.service.metrics import SchedulerMetrics
from scheduler.standalone.binding import BinderPool, ClusterApi, recommendation_message
from scheduler.standalone.events import PodEvents
from scheduler.standalone.queue import SchedulingQueue
from scheduler.standalone.records import Features, recorded_before_binding
from scheduler.standalone.settings import (
    EVENT_RECOMMENDATION,
    RESULT_ERROR,
    RESULT_SCHEDULED,
    RESULT_SKIPPED,
    RESULT_UNSCHEDULABLE,
    StandaloneConfig,
)
from scheduler.standalone.staging import Stager
from scheduler.telemetry.samples import NodeSample

log = logging.getLogger(__name__)


class TelemetryView(Protocol):
    """What the scheduler reads of the TelemetryStore (`scheduler/telemetry/store.py`)."""

    def telemetry(self, node: str) -> NodeTelemetry | None: ...


@runtime_checkable
class SnapshotTelemetry(TelemetryView, Protocol):
    """A view that also hands its whole current view, the same object until it changes (the
    token the cache's table is kept by)."""

    def snapshot(self) -> Mapping[str, NodeSample | NodeTelemetry]: ...


@runtime_checkable
class RefreshingTelemetry(SnapshotTelemetry, Protocol):
    """A snapshot view that calls its listeners after each refresh (the TelemetryStore): new
    node states are then staged off the decision path (`staging.py`)."""

    def add_listener(self, listener: Callable[..., None]) -> None: ...


class StandaloneScheduler:
    def __init__(
        self,
        api: ClusterApi,
        scoring: SchedulingProfile | ScorePlugin,
        config: StandaloneConfig | None = None,
        telemetry: TelemetryView | None = None,
        decision_log: DecisionLog | None = None,
        outcomes: OutcomeTracker | None = None,
        metrics: SchedulerMetrics | None = None,
        is_leader: Callable[[], bool] | None = None,
        features: Features | None = None,
        identity: str = "",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        # A bare Score plugin (the energy plugin) is the standalone default profile around it.
        self.profile = scoring if isinstance(scoring, SchedulingProfile) else kubejoule_profile(scoring)
        self.config = config or StandaloneConfig()
        self.telemetry = telemetry
        self.decision_log = decision_log
        self.outcomes = outcomes
        self.metrics = metrics or SchedulerMetrics()
        self.is_leader = is_leader or (lambda: True)
        self.features = features
        self.identity = identity
        self._clock = clock
        self._wall = wall_clock
        self._rng = random.Random(self.config.seed)
        self._decider = ProfileDecider(
            self.profile, percentage_of_nodes_to_score=self.config.percentage_of_nodes_to_score
        )
        # its lifetime predictor learns from the pods that end (feature schema v3's lifetimes)
        self.cache = ClusterCache(
            self.config.scheduler_name, wall_clock, lifetimes=LifetimePredictor()
        )
        self.queue = SchedulingQueue(
            self.config.initial_backoff_seconds,
            self.config.max_backoff_seconds,
            self.config.unschedulable_retry_seconds,
            clock,
        )
        self.metrics.watch_queue(self.queue.lengths)
        self.events = PodEvents(api, self.config.scheduler_name, identity, wall_clock)
        self._binders: BinderPool | None = None
        self._seen_generation = -1
        self._changes_lock = threading.Lock()
        self.synced = threading.Event()
        self.watch = ClusterWatch(
            api,
            self.cache,
            on_pod_event=self.on_pod_event,
            on_node_event=self.on_node_event,
            on_pods_listed=self._pods_listed,
        )
        # New node states after each telemetry refresh, staged off the decision path (a store
        # that tells when it refreshed and gives its view whole: the TelemetryStore).
        self._refreshing = telemetry if isinstance(telemetry, RefreshingTelemetry) else None
        self.stager: Stager | None = None
        if self._refreshing is not None:
            self.stager = Stager(self.cache, self._decider, self._refreshing.snapshot, wall_clock)

    # -- feeding the cache (watch threads call these; tests may too) --

    def on_pod_event(self, kind: str, obj: Mapping[str, object]) -> None:
        self._apply_pod_event(kind, obj)
        # A pod that ended or left frees room: the parked pods move at once, from the watch's
        # thread, as kube-scheduler's event handlers move them (eventhandlers.go
        # deletePodFromCache: MoveAllToActiveOrBackoffQueue), not at the loop's next poll.
        self._check_cluster_changes()

    def _apply_pod_event(self, kind: str, obj: Mapping[str, object]) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self.cache.delete_pod(obj)
            self.queue.remove(key)
            self.events.forget(key)
            return
        before = self.cache.pending(key)
        if self.cache.upsert_pod(obj) is None:
            if self.cache.placement(key) is not None or before is not None:
                self.queue.remove(key)  # bound (by us or another), deleted, or not ours
            self.events.forget(key)
            return
        if before is None or before != self.cache.pending(key):
            self._enqueue(key)  # new, or changed in a way the filters could see

    def on_node_event(self, kind: str, obj: Mapping[str, object]) -> None:
        self.watch.apply_node(kind, obj)
        self._check_cluster_changes()

    def _pods_listed(self, pending: list[str]) -> None:
        for key in pending:
            self._enqueue(key)

    def _enqueue(self, key: str) -> None:
        """Queue a pending pod at its priority (the queue tries the highest first)."""
        pod = self.cache.pending(key)
        self.queue.add(key, pod.priority if pod is not None else 0)

    def resync(self) -> None:
        """Full re-list of nodes and pods. The watch threads do this themselves (at start and
        after a 410 Gone, in order with the events they apply); call it only when no watch
        runs, as a listing older than events already applied would roll them back."""
        self.watch.relist_nodes()
        self.watch.relist_pods()

    def _check_cluster_changes(self) -> None:
        """Tell the queue when the cache changed in a way that could make a parked pod fit
        (the watch threads call it after each event, the loop before each attempt)."""
        with self._changes_lock:
            generation = self.cache.generation
            if generation == self._seen_generation:
                return
            self._seen_generation = generation
        self.queue.cluster_changed()

    # -- one scheduling attempt --

    def decide(self, pod: PodInfo) -> Decision:
        """One decision against the cache, through the profile (`scheduler/decisions/placement.py`), with
        the telemetry view last staged (`staging.py`), else the store's current one."""
        staged = self.stager.current if self.stager is not None else None
        view: Callable[[str], NodeTelemetry | None] | None
        if staged is not None:
            token, view = staged
        else:
            view = self.telemetry.telemetry if self.telemetry is not None else None
            token = self.telemetry.snapshot() if isinstance(self.telemetry, SnapshotTelemetry) else None
        table = self.cache.table(view, token)
        return self._decider.decide(pod, table, self.config.mode, self._rng, self._wall())

    def schedule_one(self, key: str) -> str:
        """Try one pod taken off the queue. Returns the attempt's result (binding may still
        be in flight when binder threads are used)."""
        started = self._clock()
        pod = self.cache.pending(key)
        if pod is None:  # bound or deleted meanwhile
            self.queue.remove(key)
            return RESULT_SKIPPED
        self._check_cluster_changes()
        decision = self.decide(pod)
        if decision.chosen is None:
            self._unschedulable(pod, decision)
            return RESULT_UNSCHEDULABLE
        self.cache.assume(pod, decision.chosen, self._wall())
        if self._binders is not None:
            self._binders.submit(self._bind, pod, decision, started)
            return RESULT_SCHEDULED
        return self._bind(pod, decision, started)

    def _bind(self, pod: PodInfo, decision: Decision, started: float) -> str:
        assert decision.chosen is not None
        node = decision.chosen
        try:
            if self.config.mode == MODE_SHADOW and self.config.annotate:
                self.events.event(pod, "Normal", EVENT_RECOMMENDATION, recommendation_message(decision))
            if not self.is_leader():  # lost the lease since the pod was taken: let go
                self.cache.forget(pod)
                self.queue.backoff(pod.key)
                return RESULT_SKIPPED
            if not self.cache.has_node(node):
                return self._node_gone(pod, node)
            # The decision line reaches the kernel before the binding: a bound pod always
            # has its line, whatever kills the process (records.recorded_before_binding).
            with recorded_before_binding(
                self.decision_log,
                self.outcomes,
                self.features,
                self.profile.name,
                self.config.mode,
                pod,
                decision,
                self._wall(),
            ):
                self.api.bind(pod, node)
        except kube.ApiError as exc:
            return self._binding_failed(pod, exc)
        except Exception:
            log.exception("binding %s failed", pod.key)
            self.cache.forget(pod)
            self.queue.backoff(pod.key)
            self.metrics.attempts.labels(RESULT_ERROR).inc()
            self.metrics.binding_errors.labels("api").inc()
            return RESULT_ERROR
        self.queue.remove(pod.key)
        self.metrics.e2e_seconds.observe(self._clock() - started)
        self.metrics.attempts.labels(RESULT_SCHEDULED).inc()
        self.metrics.agreements.labels(
            "true" if decision.recommended == decision.default_choice else "false"
        ).inc()
        self.events.forget(pod.key)
        self.events.event(pod, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}")
        return RESULT_SCHEDULED

    def _binding_failed(self, pod: PodInfo, exc: kube.ApiError) -> str:
        kind = "conflict" if exc.conflict else "not_found" if exc.not_found else "api"
        self.metrics.binding_errors.labels(kind).inc()
        self.metrics.attempts.labels(RESULT_ERROR).inc()
        self.cache.forget(pod)
        if exc.conflict or exc.not_found:
            # Bound by someone else, or deleted: ask the API rather than retrying blindly.
            try:
                fresh = self.api.get_pod(pod.namespace, pod.name)
            except kube.ApiError:
                fresh = None if exc.not_found else {}
            if fresh is None:
                self.cache.delete_pod({"metadata": {"namespace": pod.namespace, "name": pod.name}})
                self.queue.remove(pod.key)
                return RESULT_ERROR
            if fresh:
                self.on_pod_event("MODIFIED", fresh)
                if self.cache.pending(pod.key) is None:
                    self.queue.remove(pod.key)
                    return RESULT_ERROR
        log.info("binding %s failed (%s); backing off", pod.key, exc)
        self.queue.backoff(pod.key)
        return RESULT_ERROR

    def _node_gone(self, pod: PodInfo, node: str) -> str:
        """The chosen node was deleted since the decision. The API server would still accept the
        binding (it does not check that the node exists) and leave the pod on no node until the
        pod garbage collector deletes it: decide again instead."""
        log.info("node %s of %s was deleted before its binding; deciding again", node, pod.key)
        self.metrics.binding_errors.labels("node_gone").inc()
        self.metrics.attempts.labels(RESULT_ERROR).inc()
        self.cache.forget(pod)
        self.queue.backoff(pod.key)
        return RESULT_ERROR

    def _unschedulable(self, pod: PodInfo, decision: Decision) -> None:
        message = decision.summary or failure_summary(decision.total_nodes, {})
        self.metrics.attempts.labels(RESULT_UNSCHEDULABLE).inc()
        self.queue.unschedulable(pod.key)
        self.events.unschedulable(pod, message)

    # -- running --

    def on_leadership(self, leading: bool) -> None:
        self.metrics.leader.set(1.0 if leading else 0.0)
        if leading:  # whatever the old leader left pending is ours now
            for key in self.cache.pending_keys():
                self._enqueue(key)

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        """Start the watch threads, the event sender, the binders and the stager (not the
        loop)."""
        self.events.start(self.config.event_queue_size)
        if self.config.bind_workers > 0:
            self._binders = BinderPool(self.config.bind_workers)
        threads = self.watch.start(stop)
        if self.stager is not None and self._refreshing is not None:
            self._refreshing.add_listener(self.stager.on_refresh)
            self.stager.on_refresh()  # the view already there
            threads.append(self.stager.start(stop))
        return threads

    def run(self, stop: threading.Event, poll_seconds: float = 0.2) -> None:
        """Schedule until `stop` is set. Watches, binds and sends events in helper threads."""
        threads = self.start(stop)
        try:
            while not stop.is_set() and not self.watch.synced:
                stop.wait(0.05)
            self.synced.set()
            while not stop.is_set():
                self._housekeeping()
                if not self.is_leader():
                    stop.wait(poll_seconds)
                    continue
                key = self.queue.pop(poll_seconds)
                if key is not None:
                    try:
                        self.schedule_one(key)
                    except Exception:  # one bad pod must not stop the scheduler
                        log.exception("scheduling %s failed", key)
                        self.queue.backoff(key)
        finally:
            self.shutdown(threads)

    def _housekeeping(self) -> None:
        self._check_cluster_changes()
        if self.outcomes is not None and self.telemetry is not None:
            self.outcomes.poll(self._wall(), self.telemetry.telemetry)
        if self.decision_log is not None:
            self.decision_log.flush_if_due()

    def drain(self, timeout_seconds: float = 5.0) -> None:
        """Wait for in-flight bindings and queued events (tests, shutdown)."""
        if self._binders is not None:
            self._binders.drain(timeout_seconds)
        self.events.drain(timeout_seconds)

    def shutdown(self, threads: Iterable[threading.Thread] = ()) -> None:
        self.watch.close()
        if self._binders is not None:
            self._binders.shutdown()
            self._binders = None
        self.events.stop()
        for thread in threads:
            thread.join(5.0)
        if self.decision_log is not None:
            self.decision_log.flush()


def _key(obj: Mapping[str, object]) -> str:
    meta = subobject(obj, "metadata")
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
