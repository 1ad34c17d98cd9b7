"""kube-scheduler extender (v1 JSON) serving the energy scorer: `POST /filter`, `POST /prioritize`.

The wire format is kube-scheduler's `k8s.io/kube-scheduler/extender/v1`, whose Go structs have no
JSON tags, so every key is PascalCase:

* request `ExtenderArgs`: `{"Pod": v1.Pod, "Nodes": v1.NodeList | null, "NodeNames": [str] | null}`
  — `NodeNames` when the extender is configured `nodeCacheCapable: true`, else `Nodes.items`;
* `/prioritize` answers `HostPriorityList`: `[{"Host": str, "Score": int}]`, scores 0–10;
* `/filter` answers `ExtenderFilterResult`: `{"Nodes", "NodeNames", "FailedNodes",
  "FailedAndUnresolvableNodes", "Error"}` in the form it was asked.

Modes: `shadow` (default) answers every node the same neutral score and filters nothing, and
records what it would have chosen; `active` answers the energy scores and applies power caps.
Missing or stale telemetry never filters a node and never earns more than the neutral score.

Bad input (malformed JSON, wrong shape, bad quantities) is a 400 with a message; bodies larger
than `max_body_bytes` are a 413. Scoring reads the TelemetryStore's cached view: no I/O on the
request path.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cached_property
from json.encoder import encode_basestring_ascii
from typing import Any, Protocol

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources, ScoreResult
from scheduler.scorer import (
    NEUTRAL_SCORE,
    REASON_OK,
    REASONS,
    BatchScores,
    HeuristicScorer,
    NodeBatch,
    extended_watts,
)
from scheduler.telemetry import NodeSample, TelemetryStore

log = logging.getLogger(__name__)

MAX_EXTENDER_SCORE = 10  # kube-scheduler's extenderv1.MaxExtenderPriority
MODE_SHADOW = "shadow"
MODE_ACTIVE = "active"
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024

LATENCY_BUCKETS_SECONDS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def to_extender_score(score: float) -> int:
    """0–100 → kube-scheduler's 0–10 integers, halves rounded up (50, neutral, → 5)."""
    return max(0, min(MAX_EXTENDER_SCORE, math.floor(score * MAX_EXTENDER_SCORE / 100.0 + 0.5)))


# -- recording what the extender would have chosen -----------------------------------------------


class Decision:
    """One extender call as the decision collector needs it.

    `nodes` and `results` may be built lazily (large batches): the first access pays for them,
    so a recorder that only counts or samples decisions stays cheap on the request path.
    """

    def __init__(
        self,
        verb: str,
        mode: str,
        wall_time: float,
        pod: PodInfo,
        nodes: Sequence[NodeState] | Callable[[], Sequence[NodeState]],
        results: Sequence[ScoreResult] | Callable[[], Sequence[ScoreResult]],
        recommended: str | None,
        failed: Mapping[str, str] | None = None,
    ) -> None:
        self.verb = verb  # "prioritize" | "filter"
        self.mode = mode
        self.wall_time = wall_time
        self.pod = pod
        self.recommended = recommended  # the energy-best node (prioritize)
        self.failed: Mapping[str, str] = failed or {}  # filter: node → why it would fail
        self._nodes = nodes
        self._results = results

    @cached_property
    def nodes(self) -> tuple[NodeState, ...]:
        return tuple(self._nodes() if callable(self._nodes) else self._nodes)

    @cached_property
    def results(self) -> tuple[ScoreResult, ...]:
        """Energy scores (prioritize); empty for filter."""
        return tuple(self._results() if callable(self._results) else self._results)


class DecisionRecorder(Protocol):
    """Where decisions go. Called on the request path: must be cheap and must not raise (the
    decision collector's ExtenderRecorder only enqueues; a thread of its own does the work).
    A recorder with a `stats()` method (counts by name) gets them exported in /metrics."""

    def record(self, decision: Decision) -> None: ...


class MemoryRecorder:
    """Keeps the last `size` decisions in memory and logs each recommendation."""

    def __init__(self, size: int = 1000) -> None:
        self.decisions: deque[Decision] = deque(maxlen=size)

    def record(self, decision: Decision) -> None:
        self.decisions.append(decision)
        if decision.verb == "prioritize":
            log.info(
                "%s %s: energy recommends %s",
                decision.mode, decision.pod.key, decision.recommended,
            )
        elif decision.failed:
            log.info(
                "%s %s: power caps would exclude %s", decision.mode, decision.pod.key,
                sorted(decision.failed),
            )


def recommend(results: Sequence[ScoreResult]) -> str | None:
    """The best-scored node; ties go to the smaller ΔP, then the name (deterministic).
    None when no node had usable telemetry: there is nothing to recommend on."""
    if all(r.reason != REASON_OK for r in results):
        return None
    best: ScoreResult | None = None
    for r in results:
        if best is None:
            best = r
            continue
        key = (-r.score, r.delta_watts if r.delta_watts is not None else float("inf"), r.node)
        best_key = (
            -best.score,
            best.delta_watts if best.delta_watts is not None else float("inf"),
            best.node,
        )
        if key < best_key:
            best = r
    return best.node if best is not None else None


def recommend_batch(names: Sequence[str], scores: BatchScores) -> str | None:
    """recommend() over batch scores: the same node, from arrays."""
    ok = scores.reason == REASONS.index(REASON_OK)
    if not ok.any():
        return None
    best = scores.score[ok].max()
    tied = np.flatnonzero(ok & (scores.score == best))
    deltas = scores.delta_watts
    return min((float(deltas[i]), names[i]) for i in tied.tolist())[1]


class HostPriorityList:
    """`[{"Host": name, "Score": n}, …]`, encoded straight to JSON (thousands of entries: the
    generic encoder was the slowest part of a 5,000-node answer)."""

    def __init__(self, names: Sequence[str], scores: Sequence[int]) -> None:
        self.names = names
        self.scores = scores

    def to_list(self) -> list[dict[str, Any]]:
        return [{"Host": n, "Score": s} for n, s in zip(self.names, self.scores, strict=True)]

    def to_json(self) -> str:
        encode = encode_basestring_ascii
        items = [
            f'{{"Host":{encode(name)},"Score":{int(score)}}}'
            for name, score in zip(self.names, self.scores, strict=True)
        ]
        return "[" + ",".join(items) + "]"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HostPriorityList):
            return self.to_list() == other.to_list()
        return self.to_list() == other

    __hash__ = None  # type: ignore[assignment]


# -- request parsing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtenderArgs:
    pod: PodInfo
    node_names: list[str] | None  # the NodeNames form
    node_items: list[dict[str, Any]] | None  # the Nodes.items form (full v1.Node objects)
    node_infos: tuple[NodeInfo, ...] = ()  # node_items, parsed (same order)

    @property
    def names(self) -> list[str]:
        if self.node_names is not None:
            return self.node_names
        return [info.name for info in self.node_infos]


def parse_args(body: bytes) -> ExtenderArgs:
    """ExtenderArgs from a request body, or BadRequest saying what is wrong. Everything is
    parsed and type-checked here, so answering cannot fail on the request's shape."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise BadRequest("body is not valid JSON: nested too deeply") from exc
    if not isinstance(data, dict):
        raise BadRequest("body must be a JSON object with Pod and Nodes or NodeNames")
    pod = data.get("Pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise BadRequest("Pod must be a v1.Pod object with metadata")
    spec = pod.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise BadRequest("Pod.spec must be an object")
    try:
        pod_info = PodInfo.from_k8s(pod)
    except ValueError as exc:
        raise BadRequest(f"Pod.{exc}") from exc

    names = data.get("NodeNames")
    nodes = data.get("Nodes")
    if names is not None:
        # set(map(type, …)) runs at C speed: this list can hold thousands of names.
        if not isinstance(names, list) or set(map(type, names)) - {str} or "" in names:
            raise BadRequest("NodeNames must be a list of node names")
        return ExtenderArgs(pod_info, names, None)
    if nodes is None:
        raise BadRequest("one of Nodes or NodeNames is required")
    if not isinstance(nodes, dict):
        raise BadRequest("Nodes must be a v1.NodeList object")
    items = nodes.get("items") or []
    if not isinstance(items, list):
        raise BadRequest("Nodes.items must be a list")
    infos = []
    for i, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise BadRequest(f"Nodes.items[{i}] must be a v1.Node with metadata.name")
        try:
            infos.append(NodeInfo.from_k8s(item))
        except ValueError as exc:
            raise BadRequest(f"Nodes.items[{i}].{exc}") from exc
    return ExtenderArgs(pod_info, None, items, tuple(infos))


# -- metrics -------------------------------------------------------------------------------------


class _StoreCollector(Collector):
    """Telemetry age per node and refresh errors, read from the store at scrape time."""

    def __init__(self, store: TelemetryStore, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ages = GaugeMetricFamily(
            "kubejoule_scheduler_telemetry_age_seconds",
            "Age of the newest telemetry sample the scheduler holds for each node.",
            labels=["node"],
        )
        for node, age in sorted(self._store.ages(self._clock()).items()):
            ages.add_metric([node], age)
        yield ages
        errors = GaugeMetricFamily(
            "kubejoule_scheduler_telemetry_errors",
            "Telemetry refresh errors since start, by source and kind.",
            labels=["source", "kind"],
        )
        for (source, kind), count in sorted(self._store.errors.items()):
            errors.add_metric([source, kind], count)
        yield errors
        ready = GaugeMetricFamily(
            "kubejoule_scheduler_telemetry_ready", "1 once the first telemetry refresh is done."
        )
        ready.add_metric([], 1.0 if self._store.ready else 0.0)
        yield ready


class _ClusterCollector(Collector):
    """Whether the cluster view (pods and nodes from watches) has synced, at scrape time."""

    def __init__(self, synced: Callable[[], bool]) -> None:
        self._synced = synced

    def collect(self) -> Iterator[GaugeMetricFamily]:
        synced = GaugeMetricFamily(
            "kubejoule_extender_cluster_synced",
            "1 once the pod and node watches have listed the cluster (pods bound since each "
            "node's sample are counted from then on); absent without a cluster view.",
        )
        synced.add_metric([], 1.0 if self._synced() else 0.0)
        yield synced


class _RecorderCollector(Collector):
    """A background recorder's counts (the decision collector's ExtenderRecorder), at scrape
    time: decisions recorded, dropped because its queue was full, failed; its queue length."""

    def __init__(self, stats: Callable[[], Mapping[str, int]]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self._stats()
        decisions = CounterMetricFamily(
            "kubejoule_extender_recorded_decisions",
            "Decisions sent to the decision log, by result: recorded, dropped (the recorder's "
            "queue was full: the request never waits for it) or failed.",
            labels=["result"],
        )
        for result in ("recorded", "dropped", "failed"):
            decisions.add_metric([result], float(stats.get(result, 0)))
        yield decisions
        queued = GaugeMetricFamily(
            "kubejoule_extender_recorder_queue_length",
            "Decisions waiting for the recorder thread.",
        )
        queued.add_metric([], float(stats.get("queued", 0)))
        yield queued


class ExtenderMetrics:
    def __init__(self, store: TelemetryStore, clock: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "kubejoule_extender_requests",
            "Extender requests by verb and HTTP status code.",
            ["verb", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "kubejoule_extender_request_duration_seconds",
            "Time to answer an extender request (parsing, scoring, encoding).",
            ["verb"],
            buckets=LATENCY_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.fallbacks = Counter(
            "kubejoule_scheduler_fallbacks",
            "Nodes scored neutral (50) for want of usable telemetry, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.recommendations = Counter(
            "kubejoule_scheduler_recommendations",
            "Energy recommendations made, by mode.",
            ["mode"],
            registry=self.registry,
        )
        self.filtered = Counter(
            "kubejoule_extender_filtered_nodes",
            "Nodes a power cap excluded (active) or would have excluded (shadow), by mode.",
            ["mode"],
            registry=self.registry,
        )
        self.registry.register(_StoreCollector(store, clock))


class ClusterView(Protocol):
    """Nodes with the pods bound (or assumed) on them: a `ClusterWatch` (pod and node watches
    feeding a ClusterCache; `kubejoule-scheduler extender` runs one when it can reach the API)
    or a ClusterCache. With one, the extender counts pods placed since each node's telemetry
    sample, and knows which nodes are empty. An empty list means "not known yet"."""

    def node_states(
        self, telemetry: Callable[[str], NodeTelemetry | None] | None = None
    ) -> list[NodeState]: ...


# How long node states built from a ClusterView are reused (they are rebuilt sooner when the
# telemetry view changes). Short: pods bound since are then counted within this delay.
CLUSTER_STATES_TTL_SECONDS = 0.2


# -- the extender --------------------------------------------------------------------------------


class Extender:
    """Builds node states from the TelemetryStore and answers the extender verbs."""

    def __init__(
        self,
        scorer: HeuristicScorer,
        store: TelemetryStore,
        mode: str = MODE_SHADOW,
        power_caps_watts: Mapping[str, float] | None = None,
        default_power_cap_watts: float | None = None,
        recorder: DecisionRecorder | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        clock: Callable[[], float] = time.time,
        cluster: ClusterView | None = None,
    ) -> None:
        if mode not in (MODE_SHADOW, MODE_ACTIVE):
            raise ValueError(f"mode must be shadow or active, got {mode!r}")
        self.scorer = scorer
        self.store = store
        self.mode = mode
        self.power_caps_watts = dict(power_caps_watts or {})
        self.default_power_cap_watts = default_power_cap_watts
        self.recorder: DecisionRecorder = recorder if recorder is not None else MemoryRecorder()
        self.max_body_bytes = max_body_bytes
        self.clock = clock
        self.metrics = ExtenderMetrics(store, clock)
        stats = getattr(self.recorder, "stats", None)
        if callable(stats):
            self.metrics.registry.register(_RecorderCollector(stats))
        # Node objects seen in Nodes.items payloads: their allocatable CPU serves the NodeNames
        # form later, when telemetry carries no core count.
        self._node_infos: dict[str, NodeInfo] = {}
        # NodeStates rebuilt only when the store publishes a new view.
        self._states: dict[str, NodeState] = {}
        self._states_view: Mapping[str, NodeSample] | None = None
        self._states_built = 0.0
        self._batch: NodeBatch | None = None
        self.on_start: list[Callable[[], None]] = []  # e.g. start the cluster watch
        self.on_stop: list[Callable[[], None]] = []  # e.g. flush and close a decision collector
        self.cluster = cluster
        synced = getattr(cluster, "synced", None)
        if cluster is not None and synced is not None:
            self.metrics.registry.register(
                _ClusterCollector(lambda: bool(getattr(cluster, "synced", False)))
            )
        store.add_listener(self._observe)

    def _observe(self, view: Mapping[str, NodeSample]) -> None:
        for sample in view.values():
            self.scorer.observe(sample.telemetry)

    # -- node states --

    def _state(self, name: str, view: Mapping[str, NodeSample], info: NodeInfo | None) -> NodeState:
        sample = view.get(name)
        if info is None:
            info = self._node_infos.get(name) or NodeInfo(name, Resources())
        # An unknown pod count is not "empty": consolidation must not charge idle power for it.
        pod_count = sample.pod_count if sample is not None and sample.pod_count is not None else 1
        return NodeState(
            info=info,
            telemetry=sample.telemetry if sample is not None else None,
            pod_count=pod_count,
        )

    def _cluster_states(self) -> dict[str, NodeState]:
        assert self.cluster is not None
        return {s.info.name: s for s in self.cluster.node_states(self.store.telemetry)}

    def _refresh_states(self) -> Mapping[str, NodeSample]:
        view = self.store.snapshot()
        monotonic = time.monotonic()
        if view is not self._states_view or (
            self.cluster is not None
            and monotonic - self._states_built > CLUSTER_STATES_TTL_SECONDS
        ):
            self._states_view = view
            self._states_built = monotonic
            self._states = self._cluster_states() if self.cluster is not None else {}
            self._batch = None
        return view

    def batch(self) -> NodeBatch:
        """Every node with telemetry (or known to the cluster view), prepared for scoring."""
        view = self._refresh_states()
        if self._batch is None:
            names = sorted(set(view) | set(self._states))
            states = []
            for name in names:
                state = self._states.get(name)
                if state is None:
                    state = self._states[name] = self._state(name, view, None)
                states.append(state)
            self._batch = self.scorer.prepare_batch(states)
        return self._batch

    def node_states(self, args: ExtenderArgs) -> list[NodeState]:
        view = self._refresh_states()
        if args.node_items is not None:
            states = []
            for info in args.node_infos:
                if self._node_infos.get(info.name) != info:
                    self._node_infos[info.name] = info
                    self._batch = None
                    if self.cluster is None:
                        self._states.pop(info.name, None)
                known = self._states.get(info.name) if self.cluster is not None else None
                states.append(known if known is not None else self._state(info.name, view, info))
            return states
        cache = self._states
        out = []
        for name in args.names:
            state = cache.get(name)
            if state is None:
                state = cache[name] = self._state(name, view, None)
            out.append(state)
        return out

    # -- verbs --

    def prioritize(self, args: ExtenderArgs) -> list[dict[str, Any]] | HostPriorityList:
        if args.node_names is not None:
            return self._prioritize_names(args.pod, args.node_names)
        now = self.clock()
        nodes = self.node_states(args)
        results = self.scorer.score(args.pod, nodes, now)
        fallbacks = Tally(r.reason for r in results if r.reason != REASON_OK)
        for reason, count in fallbacks.items():
            self.metrics.fallbacks.labels(reason).inc(count)
        recommended = recommend(results)
        self.metrics.recommendations.labels(self.mode).inc()
        self._record(Decision("prioritize", self.mode, now, args.pod, nodes, results, recommended))
        if self.mode == MODE_SHADOW:
            neutral = to_extender_score(NEUTRAL_SCORE)
            return [{"Host": r.node, "Score": neutral} for r in results]
        return [{"Host": r.node, "Score": to_extender_score(r.score)} for r in results]

    def _prioritize_names(self, pod: PodInfo, names: list[str]) -> HostPriorityList:
        """The NodeNames form, scored with numpy over the prepared batch (same scores)."""
        now = self.clock()
        batch = self.batch()
        rows = batch.rows(names)
        scores = self.scorer.score_batch(pod, batch, now, rows)
        for code, count in enumerate(np.bincount(scores.reason, minlength=len(REASONS)).tolist()):
            if count and REASONS[code] != REASON_OK:
                self.metrics.fallbacks.labels(REASONS[code]).inc(count)
        recommended = recommend_batch(names, scores)
        self.metrics.recommendations.labels(self.mode).inc()

        def nodes() -> list[NodeState]:
            known = len(batch.names)
            return [
                batch.preps[row].state if row < known else NodeState(NodeInfo(name, Resources()))
                for name, row in zip(names, rows.tolist(), strict=True)
            ]

        self._record(
            Decision("prioritize", self.mode, now, pod, nodes, lambda: scores.results(names), recommended)
        )
        if self.mode == MODE_SHADOW:
            return HostPriorityList(names, [to_extender_score(NEUTRAL_SCORE)] * len(names))
        # to_extender_score() over the array: halves up, clamped to 0..10.
        extender_scores = np.clip(
            np.floor(scores.score * (MAX_EXTENDER_SCORE / 100.0) + 0.5), 0, MAX_EXTENDER_SCORE
        ).astype(np.int64)
        return HostPriorityList(names, extender_scores.tolist())

    def predicted_watts(self, pod: PodInfo, node: NodeState, now: float) -> float | None:
        """The node's power with the pod on it: the measured watts, plus what the pods placed
        since the sample add on the curve, plus ΔP; without measured watts, the curve at the new
        utilization. None when unknown (which never filters a node)."""
        telemetry = node.telemetry
        delta, reason = self.scorer.delta_watts(pod, node, now, with_idle=False)
        if delta is None or reason != REASON_OK or telemetry is None:
            return None
        found = self.scorer.curve_for(node.info.name, telemetry)
        now_u = self.scorer.utilization_with_assumed(node)
        # delta_watts() was OK: a curve, the sample's utilization and the cores are known.
        assert found is not None and now_u is not None and telemetry.utilization is not None
        curve = found[0]
        if telemetry.watts is None:
            return extended_watts(curve, now_u) + delta
        since = extended_watts(curve, now_u) - extended_watts(curve, max(0.0, telemetry.utilization))
        return telemetry.watts + max(0.0, since) + delta

    def filter(self, args: ExtenderArgs) -> dict[str, Any]:
        now = self.clock()
        nodes = self.node_states(args)
        failed: dict[str, str] = {}
        for node in nodes:
            cap = self.power_caps_watts.get(node.info.name, self.default_power_cap_watts)
            if cap is None:
                continue
            predicted = self.predicted_watts(args.pod, node, now)
            if predicted is not None and predicted > cap:
                failed[node.info.name] = (
                    f"kubejoule: the pod would take the node to {predicted:.0f} W, "
                    f"over its {cap:.0f} W power cap"
                )
        if failed:
            self.metrics.filtered.labels(self.mode).inc(len(failed))
        self._record(Decision("filter", self.mode, now, args.pod, tuple(nodes), (), None, failed))
        if self.mode == MODE_SHADOW:
            failed = {}
        result: dict[str, Any] = {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        if args.node_names is not None:
            result["NodeNames"] = [n for n in args.node_names if n not in failed]
        else:
            assert args.node_items is not None
            result["Nodes"] = {
                "apiVersion": "v1",
                "kind": "NodeList",
                "metadata": {},
                "items": [
                    item
                    for item, info in zip(args.node_items, args.node_infos, strict=True)
                    if info.name not in failed
                ],
            }
        return result

    def _record(self, decision: Decision) -> None:
        try:
            self.recorder.record(decision)
        except Exception:  # recording must never fail a scheduling request
            log.exception("decision recorder failed")

    @property
    def ready(self) -> bool:
        return self.store.ready

    def start(self) -> None:
        self.store.start()
        for start in self.on_start:
            start()

    def stop(self) -> None:
        self.store.stop()
        for close in self.on_stop:
            try:
                close()
            except Exception:
                log.exception("shutdown hook failed")


# -- HTTP ----------------------------------------------------------------------------------------


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(f"request body of {declared} bytes is over the {limit}-byte limit", 413)
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(f"request body is over the {limit}-byte limit", 413)
        chunks.append(chunk)
    return b"".join(chunks)


def _json_response(payload: Any, status: int = 200) -> Response:
    if isinstance(payload, HostPriorityList):
        body = payload.to_json()
    else:
        body = json.dumps(payload, separators=(",", ":"))
    return Response(body, status, media_type="application/json")


def create_app(extender: Extender, manage_store: bool = True) -> FastAPI:
    """The extender's HTTP app; with `manage_store` the store's refresh thread follows the app."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        if manage_store:
            extender.start()
        try:
            yield
        finally:
            if manage_store:
                extender.stop()

    app = FastAPI(title="kubejoule scheduler extender", lifespan=lifespan, docs_url=None, redoc_url=None)
    metrics = extender.metrics

    async def handle(verb: str, request: Request, answer: Callable[[ExtenderArgs], Any]) -> Response:
        started = time.perf_counter()
        try:
            body = await read_body(request, extender.max_body_bytes)
            response = _json_response(answer(parse_args(body)))
        except BadRequest as exc:
            response = _json_response({"Error": str(exc)}, exc.status)
        except Exception as exc:  # report, never crash the scheduler's call with a bare 500 page
            log.exception("%s failed", verb)
            response = _json_response({"Error": f"internal error: {exc!r}"}, 500)
        metrics.requests.labels(verb, str(response.status_code)).inc()
        metrics.latency.labels(verb).observe(time.perf_counter() - started)
        return response

    @app.post("/prioritize")
    async def prioritize(request: Request) -> Response:
        return await handle("prioritize", request, extender.prioritize)

    @app.post("/filter")
    async def filter_(request: Request) -> Response:
        return await handle("filter", request, extender.filter)

    @app.get("/healthz")
    async def healthz() -> Response:
        return PlainTextResponse("ok\n")

    @app.get("/readyz")
    async def readyz() -> Response:
        if extender.ready:
            return PlainTextResponse("ready\n")
        return PlainTextResponse("telemetry not loaded yet\n", status_code=503)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.registry), media_type="text/plain; version=0.0.4")

    @app.exception_handler(405)
    async def wrong_method(request: Request, exc: Exception) -> Response:
        return JSONResponse({"Error": f"{request.method} is not allowed on {request.url.path}"}, 405)

    return app
