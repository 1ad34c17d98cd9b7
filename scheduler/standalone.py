"""`kubejoule-scheduler run`: a standalone scheduler for pods that opt in with
`spec.schedulerName: kubejoule-scheduler`.

One pass per pod, as kube-scheduler does it:

1. take the pod off the queue (`SchedulingQueue`);
2. filter every node with kube-scheduler's default filters (`filters.py`), against the
   requests of bound *and assumed* pods (`ClusterCache`);
3. score the feasible nodes twice: with the energy scorer (the heuristic of `scorer.py`, or any
   `Scorer`) and with kube-scheduler's default scoring (`kube_scoring.py`) — steps 2–4 are
   `decide.py`, vectorized over the cache's node table;
4. choose: `active` mode takes the energy-best node (ties broken by the default score, then at
   random); `shadow` mode (the default) takes the node the default scoring picks and annotates
   the pod with the energy recommendation (`kubejoule.io/recommended-node`, `kubejoule.io/scores`);
5. assume the pod on that node and bind it through the Binding subresource (in a small pool of
   binder threads, so the next pod is decided while the API answers); emit a `Scheduled` Event;
   write the decision line (`collector.py`) and, later, its outcome line.

When nothing fits, the pod gets a `FailedScheduling` Event with kube-scheduler's summary ("0/12
nodes are available: 3 Insufficient cpu, …") and `PodScheduled=False`, reason `Unschedulable`,
and waits for a cluster change or a timeout. API errors and conflicts back off and retry. A pod
is never dropped. Only the leader (`leader.py`) takes pods off the queue; standbys keep their
caches warm so a takeover is immediate.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from scheduler import kube
from scheduler.background import BackgroundQueue
from scheduler.cluster_cache import ClusterCache
from scheduler.cluster_watch import ClusterWatch, KubeWatchApi, WatchApi
from scheduler.collector import CandidateRecord, CollectorConfig, DecisionCollector, OutcomeTracker
from scheduler.config import Config
from scheduler.decide import MODE_ACTIVE, MODE_SHADOW, Decision, FastDecider, decide
from scheduler.filters import failure_summary
from scheduler.kube_scoring import LEAST_ALLOCATED
from scheduler.leader import KubeLeaseStore, LeaderElectionConfig, LeaderElector
from scheduler.model import NodeState, NodeTelemetry, PodInfo, Scorer
from scheduler.scheduler_metrics import SchedulerMetrics
from scheduler.scheduling_queue import SchedulingQueue

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER_NAME = "kubejoule-scheduler"
MODES = (MODE_SHADOW, MODE_ACTIVE)
ANNOTATION_RECOMMENDED = "kubejoule.io/recommended-node"
ANNOTATION_SCORES = "kubejoule.io/scores"
ANNOTATED_SCORES = 10  # top-N energy scores in the annotation (annotations are size-limited)

GIL_SWITCH_INTERVAL_SECONDS = 0.0005

RESULT_SCHEDULED = "scheduled"
RESULT_UNSCHEDULABLE = "unschedulable"
RESULT_ERROR = "error"
RESULT_SKIPPED = "skipped"


@dataclass(frozen=True)
class StandaloneConfig:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    mode: str = MODE_SHADOW  # shadow | active
    fit_strategy: str = LEAST_ALLOCATED  # the default scoring's NodeResourcesFit strategy
    annotate: bool = True  # shadow mode: write the recommendation on the pod
    initial_backoff_seconds: float = 1.0  # kube-scheduler's podInitialBackoffSeconds
    max_backoff_seconds: float = 10.0  # kube-scheduler's podMaxBackoffSeconds
    unschedulable_retry_seconds: float = 60.0  # retry a parked pod at least this often
    bind_workers: int = 4  # concurrent binding calls (0: bind inline)
    api_timeout_seconds: float = 10.0
    watch_timeout_seconds: int = 300
    seed: int | None = None  # tie-breaking randomness (None: unpredictable)
    event_queue_size: int = 10000  # Events and status patches waiting to be sent
    reference_decisions: bool = False  # per-node Python decisions instead of vectorized ones

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")


class TelemetryView(Protocol):
    """What the scheduler reads of the TelemetryStore (`scheduler/telemetry.py`)."""

    def telemetry(self, node: str) -> NodeTelemetry | None: ...


class ClusterApi(WatchApi, Protocol):
    """The API calls the scheduler makes; `KubeClusterApi` is the real one."""

    def bind(self, pod: PodInfo, node: str) -> None: ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...

    def create_event(self, namespace: str, event: dict[str, Any]) -> None: ...


class KubeClusterApi(KubeWatchApi):
    """ClusterApi over the Kubernetes API (scheduler/kube.py)."""

    def bind(self, pod: PodInfo, node: str) -> None:
        kube.bind_pod(self.api, pod.namespace, pod.name, pod.uid, node, self.timeout_seconds)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return kube.get_pod(self.api, namespace, name, self.timeout_seconds)

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        kube.patch_pod(self.api, namespace, name, patch, self.timeout_seconds)

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        kube.patch_pod_status(self.api, namespace, name, patch, self.timeout_seconds)

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        kube.create_event(self.api, namespace, event, self.timeout_seconds)


# -- side effects that must not slow placement down ---------------------------------------------


def _side_effect_failed(exc: Exception) -> None:
    if isinstance(exc, kube.ApiError):
        log.debug("event/status write failed: %s", exc)
    else:
        log.error("event/status write failed", exc_info=exc)


def side_effects(size: int) -> BackgroundQueue[Callable[[], None]]:
    """Events and status patches, sent by one background thread. Bounded: when the API is too
    slow the oldest work is kept and new work is dropped (and counted), never the scheduler."""
    return BackgroundQueue("scheduler-events", size, lambda work: work(), _side_effect_failed)


def _rfc3339(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the scheduler -------------------------------------------------------------------------------


class StandaloneScheduler:
    def __init__(
        self,
        api: ClusterApi,
        scorer: Scorer,
        config: StandaloneConfig | None = None,
        telemetry: TelemetryView | None = None,
        collector: DecisionCollector | None = None,
        outcomes: OutcomeTracker | None = None,
        metrics: SchedulerMetrics | None = None,
        is_leader: Callable[[], bool] | None = None,
        features: Callable[[PodInfo, NodeState, float], Mapping[str, float | None]] | None = None,
        identity: str = "",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.scorer = scorer
        self.config = config or StandaloneConfig()
        self.telemetry = telemetry
        self.collector = collector
        self.outcomes = outcomes
        self.metrics = metrics or SchedulerMetrics()
        self.is_leader = is_leader or (lambda: True)
        self.features = features
        self.identity = identity
        self._clock = clock
        self._wall = wall_clock
        self._rng = random.Random(self.config.seed)
        self._decider = FastDecider(scorer, self.config.fit_strategy)
        self.cache = ClusterCache(self.config.scheduler_name, wall_clock)
        self.queue = SchedulingQueue(
            self.config.initial_backoff_seconds,
            self.config.max_backoff_seconds,
            self.config.unschedulable_retry_seconds,
            clock,
        )
        self.metrics.watch_queue(self.queue.lengths)
        self._unschedulable_messages: dict[str, str] = {}
        self._event_seq = itertools.count()
        self._side_effects: BackgroundQueue[Callable[[], None]] | None = None
        self._binders: ThreadPoolExecutor | None = None
        self._inflight: set[Future[str]] = set()
        self._inflight_lock = threading.Lock()
        self._seen_generation = -1
        self.synced = threading.Event()
        self.watch = ClusterWatch(
            api,
            self.cache,
            on_pod_event=self.on_pod_event,
            on_node_event=self.on_node_event,
            on_pods_listed=self._pods_listed,
        )

    # -- feeding the cache (watch threads call these; tests may too) --

    def on_pod_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self.cache.delete_pod(obj)
            self.queue.remove(key)
            self._unschedulable_messages.pop(key, None)
            return
        before = self.cache.pending(key)
        if self.cache.upsert_pod(obj) is None:
            if self.cache.placement(key) is not None or before is not None:
                self.queue.remove(key)  # bound (by us or another), deleted, or not ours
            self._unschedulable_messages.pop(key, None)
            return
        if before is None or before != self.cache.pending(key):
            self.queue.add(key)  # new, or changed in a way the filters could see

    def on_node_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        self.watch.apply_node(kind, obj)

    def _pods_listed(self, pending: list[str]) -> None:
        for key in pending:
            self.queue.add(key)

    def resync(self) -> None:
        """Full re-list of nodes and pods. The watch threads do this themselves (at start and
        after a 410 Gone, in order with the events they apply); call it only when no watch
        runs, as a listing older than events already applied would roll them back."""
        self.watch.relist_nodes()
        self.watch.relist_pods()

    def _check_cluster_changes(self) -> None:
        generation = self.cache.generation
        if generation != self._seen_generation:
            self._seen_generation = generation
            self.queue.cluster_changed()

    # -- one scheduling attempt --

    def decide(self, pod: PodInfo) -> Decision:
        """One decision against the cache (vectorized; `reference=True` in the config for the
        per-node reference implementation)."""
        view = self.telemetry.telemetry if self.telemetry is not None else None
        if self.config.reference_decisions:
            nodes = self.cache.node_states(view)
            return decide(
                pod,
                nodes,
                self.scorer,
                self.config.mode,
                self._rng,
                self._wall(),
                self.config.fit_strategy,
            )
        snapshot = getattr(self.telemetry, "snapshot", None)
        token = snapshot() if callable(snapshot) else None
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
            future = self._binders.submit(self._bind, pod, decision, started)
            with self._inflight_lock:
                self._inflight.add(future)
            future.add_done_callback(self._forget_inflight)
            return RESULT_SCHEDULED
        return self._bind(pod, decision, started)

    def _bind(self, pod: PodInfo, decision: Decision, started: float) -> str:
        assert decision.chosen is not None
        node = decision.chosen
        try:
            if self.config.mode == MODE_SHADOW and self.config.annotate:
                self._annotate(pod, decision)
            if not self.is_leader():  # lost the lease since the pod was taken: let go
                self.cache.forget(pod)
                self.queue.backoff(pod.key)
                return RESULT_SKIPPED
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
        self._unschedulable_messages.pop(pod.key, None)
        self._event(pod, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}")
        self._record(pod, decision)
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

    def _unschedulable(self, pod: PodInfo, decision: Decision) -> None:
        message = decision.summary or failure_summary(decision.total_nodes, {})
        self.metrics.attempts.labels(RESULT_UNSCHEDULABLE).inc()
        self.queue.unschedulable(pod.key)
        self._event(pod, "Warning", "FailedScheduling", message)
        if self._unschedulable_messages.get(pod.key) != message:
            self._unschedulable_messages[pod.key] = message
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": _rfc3339(self._wall()),
            }
            patch = {"status": {"conditions": [condition]}}
            self._side_effect(lambda: self.api.patch_pod_status(pod.namespace, pod.name, patch))

    def _annotate(self, pod: PodInfo, decision: Decision) -> None:
        patch = {
            "metadata": {
                "annotations": {
                    ANNOTATION_RECOMMENDED: decision.recommended or "",
                    ANNOTATION_SCORES: json.dumps(
                        decision.top_scores(ANNOTATED_SCORES), separators=(",", ":")
                    ),
                }
            }
        }
        try:
            self.api.patch_pod(pod.namespace, pod.name, patch)
        except kube.ApiError as exc:  # the recommendation is advisory: placement goes on
            if exc.not_found:
                raise
            log.warning("annotating %s failed: %s", pod.key, exc)

    def _event(self, pod: PodInfo, type_: str, reason: str, message: str) -> None:
        wall = self._wall()
        name = f"{pod.name}.{time.time_ns():x}{next(self._event_seq):x}"
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": pod.namespace,
                "name": pod.name,
                "uid": pod.uid,
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
            "source": {"component": self.config.scheduler_name},
            "reportingComponent": self.config.scheduler_name,
            "reportingInstance": self.identity or self.config.scheduler_name,
            "firstTimestamp": _rfc3339(wall),
            "lastTimestamp": _rfc3339(wall),
            "count": 1,
        }
        self._side_effect(lambda: self.api.create_event(pod.namespace, event))

    def _side_effect(self, work: Callable[[], None]) -> None:
        if self._side_effects is not None:
            self._side_effects.submit(work)
        else:
            try:
                work()
            except kube.ApiError as exc:
                log.debug("event/status write failed: %s", exc)

    def _record(self, pod: PodInfo, decision: Decision) -> None:
        if self.collector is None:
            return
        wall = self._wall()
        names = decision.names
        keep = [
            names.index(n)
            for n in {decision.chosen, decision.recommended, decision.default_choice}
            if n is not None
        ]
        indices = decision.ranked(self.collector.config.max_candidates)
        indices += [i for i in keep if i not in indices]
        candidates = []
        for i in indices:
            state = decision.states[i]
            t = state.telemetry
            delta = float(decision.delta_watts[i])
            candidates.append(
                CandidateRecord(
                    node=names[i],
                    score=float(decision.score[i]),
                    delta_watts=None if delta != delta else delta,
                    reason=decision.reason(i),
                    default_score=int(decision.default_total[i]),
                    telemetry_age_seconds=t.age_seconds(wall) if t is not None else None,
                    features=self.features(pod, state, wall) if self.features else None,
                )
            )
        decision_id = self.collector.record_decision(
            source="standalone",
            mode=self.config.mode,
            pod=pod,
            candidates=candidates,
            chosen=decision.chosen,
            recommended=decision.recommended,
            default_choice=decision.default_choice,
            scorer=getattr(self.scorer, "name", type(self.scorer).__name__),
            wall_time=wall,
            extra={"candidate_count": len(names)},
        )
        if self.outcomes is not None and decision.chosen is not None:
            before = decision.states[names.index(decision.chosen)].telemetry
            self.outcomes.track(decision_id, decision.chosen, wall, before)

    # -- running --

    def on_leadership(self, leading: bool) -> None:
        self.metrics.leader.set(1.0 if leading else 0.0)
        if leading:  # whatever the old leader left pending is ours now
            for key in self.cache.pending_keys():
                self.queue.add(key)

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        """Start the watch threads, the event sender and the binders (not the loop)."""
        self._side_effects = side_effects(self.config.event_queue_size)
        if self.config.bind_workers > 0:
            self._binders = ThreadPoolExecutor(
                self.config.bind_workers, thread_name_prefix="scheduler-bind"
            )
        return self.watch.start(stop)

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
        if self.collector is not None:
            self.collector.flush_if_due()

    def drain(self, timeout_seconds: float = 5.0) -> None:
        """Wait for in-flight bindings and queued events (tests, shutdown)."""
        # Every binding in flight, not a no-op on one worker: with several binder threads a
        # no-op can finish while another thread is still binding.
        with self._inflight_lock:
            pending = list(self._inflight)
        wait(pending, timeout=timeout_seconds)
        if self._side_effects is not None:
            self._side_effects.drain(timeout_seconds)

    def _forget_inflight(self, future: Future[str]) -> None:
        with self._inflight_lock:
            self._inflight.discard(future)

    def shutdown(self, threads: Iterable[threading.Thread] = ()) -> None:
        self.watch.close()
        if self._binders is not None:
            self._binders.shutdown(wait=True)
            self._binders = None
        if self._side_effects is not None:
            self._side_effects.stop(2.0)
            self._side_effects = None
        for thread in threads:
            thread.join(5.0)
        if self.collector is not None:
            self.collector.flush()


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


# -- the `kubejoule-scheduler run` process -------------------------------------------------------


@dataclass(frozen=True)
class RunOptions:
    """What `kubejoule-scheduler run` adds to the shared YAML configuration."""

    scheduler: StandaloneConfig = field(default_factory=StandaloneConfig)
    listen: str = "0.0.0.0:10260"  # /metrics, /healthz, /readyz
    collector_path: str | None = None  # JSONL decision log; None: no log
    collector_max_bytes: int = 64 * 1024 * 1024
    outcome_window_seconds: float = 60.0
    leader_elect: bool = True
    leader: LeaderElectionConfig | None = None  # None: defaults (kube-system/kubejoule-scheduler)


def run_process(config: Config, options: RunOptions, stop: threading.Event) -> int:
    """Wire the parts from the configuration and schedule until `stop` is set."""
    from scheduler.config import build_api_client, build_scorer, build_store, parse_listen
    from scheduler.features import node_features
    from scheduler.scheduler_metrics import serve

    api = build_api_client(config)
    scorer = build_scorer(config)
    store = build_store(config, api)
    metrics = SchedulerMetrics()
    collector = outcomes = None
    if options.collector_path:
        collector = DecisionCollector(
            CollectorConfig(
                options.collector_path,
                max_bytes=options.collector_max_bytes,
                outcome_window_seconds=options.outcome_window_seconds,
            )
        )
        outcomes = OutcomeTracker(collector, options.outcome_window_seconds)
    leader_config = options.leader or LeaderElectionConfig()
    elector: LeaderElector | None = None
    scheduler = StandaloneScheduler(
        KubeClusterApi(
            api, options.scheduler.api_timeout_seconds, options.scheduler.watch_timeout_seconds
        ),
        scorer,
        options.scheduler,
        telemetry=store,
        collector=collector,
        outcomes=outcomes,
        metrics=metrics,
        features=lambda pod, node, now: node_features(pod, node, now, scorer),
        identity=leader_config.identity,
    )
    if options.leader_elect:
        elector = LeaderElector(
            KubeLeaseStore(api, leader_config.namespace, leader_config.name),
            leader_config,
            on_change=scheduler.on_leadership,
        )
        scheduler.is_leader = elector.is_leader
    else:
        scheduler.on_leadership(True)
    host, port = parse_listen(options.listen)
    server = serve(metrics.registry, lambda: scheduler.synced.is_set() and store.ready, host, port)
    log.info(
        "scheduling pods of schedulerName %s in %s mode; metrics on %s:%d; leader election %s",
        options.scheduler.scheduler_name,
        options.scheduler.mode,
        host,
        port,
        f"on ({leader_config.namespace}/{leader_config.name} as {leader_config.identity})"
        if elector
        else "off",
    )
    store.start()
    # The scheduling loop shares the interpreter with the watch, binder and event threads; a
    # shorter GIL switch interval (default 5 ms) keeps it from waiting on them between pods.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECONDS)
    elector_thread = None
    if elector is not None:
        elector_thread = threading.Thread(
            target=elector.run, args=(stop,), name="leader-election", daemon=True
        )
        elector_thread.start()
    try:
        scheduler.run(stop)
    finally:
        stop.set()
        if elector_thread is not None:
            elector_thread.join(10.0)  # releases the lease on its way out
        store.stop()
        server.shutdown()
        if collector is not None:
            collector.close()
        sys.setswitchinterval(switch_interval)
    return 0
