"""The extender: answers the verbs from the node states and the scorer, records decisions.

Modes: `shadow` (default) answers every node the same neutral score and filters nothing, and
records what it would have chosen; `active` answers the energy scores and applies power caps.
Missing or stale telemetry never filters a node and never scores above a measured node of its
kind (the energy plugin prices it at its worst state, scheduler/plugins/energy.py).
Scoring reads the TelemetryStore's cached view: no I/O on the request path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from scheduler.extender.caps import over_caps
from scheduler.extender.decisions import (
    DecisionRecorder,
    ExtenderCall,
    MemoryRecorder,
    recommend_batch,
)
from scheduler.extender.metrics import ExtenderMetrics, _ClusterCollector, _RecorderCollector
from scheduler.extender.state import ClusterView, NodeStates, Prepared
from scheduler.extender.wire import ExtenderArgs, HostPriorityList, body_limit_for
from scheduler.framework.batch import CandidateBatch
from scheduler.framework.decision import MODE_ACTIVE, MODE_SHADOW
from scheduler.framework.interface import extender_priority
from scheduler.model import NEUTRAL_SCORE, REASON_OK, REASONS, NodeState
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore

__all__ = ["MODE_ACTIVE", "MODE_SHADOW", "Extender"]

log = logging.getLogger(__name__)


class Extender:
    """Builds node states from the TelemetryStore and answers the extender verbs with the
    energy Score plugin (`energy`)."""

    def __init__(
        self,
        energy: EnergyPlugin,
        store: TelemetryStore,
        mode: str = MODE_SHADOW,
        power_caps_watts: Mapping[str, float] | None = None,
        default_power_cap_watts: float | None = None,
        recorder: DecisionRecorder | None = None,
        max_body_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
        cluster: ClusterView | None = None,
    ) -> None:
        if mode not in (MODE_SHADOW, MODE_ACTIVE):
            raise ValueError(f"mode must be shadow or active, got {mode!r}")
        self.energy = energy
        self.store = store
        self.mode = mode
        self.power_caps_watts = dict(power_caps_watts or {})
        self.default_power_cap_watts = default_power_cap_watts
        self.recorder: DecisionRecorder = recorder if recorder is not None else MemoryRecorder()
        self.max_body_bytes = max_body_bytes  # None: body_limit() follows the cluster's size
        self.clock = clock
        self.metrics = ExtenderMetrics(store, clock)
        stats = getattr(self.recorder, "stats", None)
        if callable(stats):
            self.metrics.registry.register(_RecorderCollector(stats))
        self.cluster = cluster
        self.states = NodeStates(energy, store, cluster)
        self.on_start: list[Callable[[], None]] = []  # e.g. start the cluster watch
        self.on_stop: list[Callable[[], None]] = []  # e.g. flush and close a decision collector
        synced = getattr(cluster, "synced", None)
        if cluster is not None and synced is not None:
            self.metrics.registry.register(
                _ClusterCollector(lambda: bool(getattr(cluster, "synced", False)))
            )
        store.add_listener(self._observe)
        store.add_listener(self.states.on_refresh)  # after _observe: the fits are up to date

    def _observe(self, view: Mapping[str, NodeSample]) -> None:
        for sample in view.values():
            self.energy.observe(sample.telemetry)

    def node_states(self, args: ExtenderArgs, prepared: Prepared | None = None) -> list[NodeState]:
        prepared = prepared or self.states.current()
        if args.node_items is not None:
            return self.states.for_items(args.node_infos, prepared)[0]
        return self.states.for_names(args.names, prepared)

    # -- verbs --

    def prioritize(self, args: ExtenderArgs) -> HostPriorityList:
        """Both forms are scored with numpy over the prepared batch; a node the batch does not
        know, or (Nodes.items form) whose spec the batch was not built with, is scored on its
        own state (the same kernel, a small batch)."""
        now = self.clock()
        pod = args.pod
        prepared = self.states.current()
        names = args.names
        rows = prepared.rows(names)
        scores = self.energy.evaluate(pod, prepared.batch.at(now), rows=rows)
        unknown = rows == prepared.sentinel
        item_states: list[NodeState] | None = None
        if args.node_items is not None:
            item_states, odd = self.states.for_items(args.node_infos, prepared)
            redo = sorted(set(odd) | set(np.flatnonzero(unknown).tolist()))
            redo_states = [item_states[i] for i in redo]
        else:
            # A name the snapshot does not know scores as the batch's sentinel (no telemetry,
            # no spec) unless its spec or something of its own is known.
            redo = [i for i in np.flatnonzero(unknown).tolist()
                    if self.states.has_spec(names[i]) or self.energy.knows(names[i])]
            redo_states = self.states.for_names([names[i] for i in redo], prepared)
        if redo:
            alone = self.energy.evaluate(pod, CandidateBatch.of(redo_states, now))
            scores.score[redo] = alone.score
            scores.delta_watts[redo] = alone.delta_watts
            scores.reason[redo] = alone.reason
        for code, count in enumerate(np.bincount(scores.reason, minlength=len(REASONS)).tolist()):
            if count and REASONS[code] != REASON_OK:
                self.metrics.fallbacks.labels(REASONS[code]).inc(count)
        recommended = recommend_batch(names, scores)
        self.metrics.recommendations.labels(self.mode).inc()

        def nodes() -> list[NodeState]:
            if item_states is not None:
                return item_states
            states = prepared.batch.states
            found = [states[row] for row in rows.tolist()]
            for position, state in zip(redo, redo_states, strict=True):
                found[position] = state
            return found

        self._record(ExtenderCall("prioritize", self.mode, now, pod, names, nodes, scores, recommended))
        if self.mode == MODE_SHADOW:
            return HostPriorityList(names, extender_priority(np.full(len(names), NEUTRAL_SCORE)))
        return HostPriorityList(names, extender_priority(scores.score))

    def filter(self, args: ExtenderArgs) -> dict[str, Any]:
        now = self.clock()
        nodes = self.node_states(args)
        failed = over_caps(
            self.energy, args.pod, nodes, now, self.power_caps_watts, self.default_power_cap_watts
        )
        if failed:
            self.metrics.filtered.labels(self.mode).inc(len(failed))
        self._record(
            ExtenderCall("filter", self.mode, now, args.pod, args.names, tuple(nodes), None, None, failed)
        )
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

    def _record(self, decision: ExtenderCall) -> None:
        try:
            self.recorder.record(decision)
        except Exception:  # recording must never fail a scheduling request
            log.exception("decision recorder failed")

    def body_limit(self) -> int:
        """The largest request body accepted: `max_body_bytes` if set, else enough for a
        `Nodes.items` body of every node known (telemetry or cluster view)."""
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        return body_limit_for(self.states.known_nodes())

    @property
    def ready(self) -> bool:
        return self.store.ready

    def start(self) -> None:
        self.store.start()
        self.states.start()
        for start in self.on_start:
            start()

    def stop(self) -> None:
        self.states.stop()
        self.store.stop()
        for close in self.on_stop:
            try:
                close()
            except Exception:
                log.exception("shutdown hook failed")
