"""The extender: answers the verbs from the node states and its scheduling profile, records
decisions.

The extender scores a scheduling profile (scheduler/framework/scheduling_profile.py), as the
standalone scheduler does: `served_profile` (scheduler/plugins/defaults.py), the energy plugin
alone at weight 1, is what `kubejoule-scheduler extender` serves. The profile's energy plugin is
evaluated once per request, over the prepared batch (its ΔP and reasons go to the decision log
and the metrics); its entry's scores enter the profile's weighted total as given scores, the
way the standalone scheduler's decision passes them (scheduler/decisions/placement.py), and
the total, on kube-scheduler's 0–10 scale, is the answer. The profile has no filters:
kube-scheduler filters; the extender's `/filter` applies only power caps.

Modes: `shadow` (default) answers every node the same neutral score and filters nothing, and
records what it would have chosen; `active` answers the energy scores and applies power caps.
Missing or stale telemetry never filters a node and never scores above a measured node of its
kind (the energy plugin prices it at its worst state, scheduler/plugins/energy/plugin.py).
Scoring reads a prepared snapshot: no I/O and no per-node work on the request path. The
snapshot is built in this process (`NodeStates`, from the TelemetryStore: tests, embedding) or
by the refresher process and read from shared memory (`RemoteStates`: what
`kubejoule-scheduler extender` runs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

import numpy as np

from scheduler.decisions.placement import energy_of, entry_scores
from scheduler.domain.model import NEUTRAL_SCORE, REASON_OK, REASONS, NodeState, PodInfo
from scheduler.extender.body import body_limit_for
from scheduler.extender.calls import (
    CallRecorder,
    CountingRecorder,
    ExtenderCall,
    MemoryRecorder,
    recommend_batch,
)
from scheduler.extender.caps import over_caps
from scheduler.extender.metrics import ExtenderMetrics, _ClusterCollector, _RecorderCollector
from scheduler.extender.remote import RemoteStates
from scheduler.extender.state import ClusterView, NodeStates, Prepared, WatchedClusterView
from scheduler.extender.wire import ExtenderArgs, HostPriorityList
from scheduler.framework.batch import CandidateBatch
from scheduler.framework.decision import MODE_ACTIVE, MODE_SHADOW
from scheduler.framework.interface import extender_priority
from scheduler.framework.scheduling_profile import SchedulingProfile
from scheduler.learning.features import feature_values
from scheduler.plugins.energy import EnergyScores
from scheduler.telemetry.store import TelemetryStore

__all__ = ["MODE_ACTIVE", "MODE_SHADOW", "Extender"]

log = logging.getLogger(__name__)


class Extender:
    """Answers the extender verbs with a scheduling profile (`profile`; its energy plugin is the
    one the node states are prepared with) over prepared node states: built here from `store` (a
    TelemetryStore), or `states` (a RemoteStates, which is then also the telemetry view the
    metrics read: pass it as `store`)."""

    def __init__(
        self,
        profile: SchedulingProfile,
        store: TelemetryStore | RemoteStates,
        mode: str = MODE_SHADOW,
        power_caps_watts: Mapping[str, float] | None = None,
        default_power_cap_watts: float | None = None,
        recorder: CallRecorder | None = None,
        max_body_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
        cluster: ClusterView | None = None,
        states: RemoteStates | None = None,
    ) -> None:
        if mode not in (MODE_SHADOW, MODE_ACTIVE):
            raise ValueError(f"mode must be shadow or active, got {mode!r}")
        found = energy_of(profile)
        if found is None:
            raise ValueError(f"the extender's profile {profile.name!r} has no energy plugin to serve")
        if profile.filters:
            raise ValueError(f"the extender's profile {profile.name!r} has filters: kube-scheduler filters")
        self.profile = profile
        self.energy_entry, self.energy = found
        self.store = store
        self.mode = mode
        self.power_caps_watts = dict(power_caps_watts or {})
        self.default_power_cap_watts = default_power_cap_watts
        self.recorder: CallRecorder = recorder if recorder is not None else MemoryRecorder()
        self.max_body_bytes = max_body_bytes  # None: body_limit() follows the cluster's size
        self.clock = clock
        self.metrics = ExtenderMetrics(store, clock)
        if isinstance(self.recorder, CountingRecorder):
            self.metrics.registry.register(_RecorderCollector(self.recorder.stats))
        self.cluster = cluster
        self.states: NodeStates | RemoteStates
        self._local = states is None
        if states is None:
            assert isinstance(store, TelemetryStore), "an in-process extender needs a TelemetryStore"
            self.states = NodeStates(self.energy, store, cluster)  # listens to the store
        else:
            self.states = states
        self.on_start: list[Callable[[], None]] = []  # e.g. start the cluster watch
        self.on_stop: list[Callable[[], None]] = []  # e.g. flush and close a decision log
        if isinstance(cluster, WatchedClusterView):
            watched = cluster
            self.metrics.registry.register(_ClusterCollector(lambda: watched.synced))
        elif states is not None:  # the refresher's cluster watch, if it runs one
            self.metrics.registry.register(_ClusterCollector(states.cluster_synced, states.has_cluster))

    # -- the request's nodes --

    def _redo(self, args: ExtenderArgs, prepared: Prepared, rows: np.ndarray) -> list[tuple[int, NodeState]]:
        """(position, state) of the request's nodes that the prepared batch cannot score: a
        name it does not know (scored as its sentinel row unless a spec or something of the
        node's own is known), or (Nodes.items form) a Node whose spec the batch was not built
        with. Scored on their own states (the same kernel)."""
        unknown = np.flatnonzero(rows == prepared.sentinel).tolist()
        if args.node_names is None:  # the Nodes.items form
            return self.states.item_redo(args.node_infos, prepared, unknown)
        names = args.names
        wanted = [i for i in unknown if self.states.has_spec(names[i]) or self.energy.knows(names[i])]
        states = self.states.for_names([names[i] for i in wanted], prepared)
        # Nodes whose spec came in a Nodes.items body after the snapshot was built: scored
        # with it now (the next snapshot has it).
        return [*zip(wanted, states, strict=True), *self.states.spec_redo(names, prepared)]

    def candidates(self, args: ExtenderArgs, now: float) -> tuple[CandidateBatch, np.ndarray | None]:
        """The request's nodes as (batch, rows): the prepared batch and the rows of the names,
        when it scores them all; else (rows None) a batch of the request's nodes in order, the
        prepared rows with the redone ones patched."""
        prepared = self.states.current()
        rows = prepared.rows(args.names)
        redo = self._redo(args, prepared, rows)
        batch = prepared.batch.at(now)
        if not redo:
            return batch, rows
        # A copy (the prepared batch is shared by every request), its derived columns sliced
        # before the patch so that the patch reaches them.
        sub = batch.take(rows, copy=True)
        self.energy.columns(sub)
        feature_values(sub, self.energy)
        sub.update([position for position, _ in redo], [state for _, state in redo])
        return sub, None

    def _evaluate(self, pod: PodInfo, batch: CandidateBatch, rows: np.ndarray | None) -> EnergyScores:
        """The energy plugin's evaluation of `rows` of the batch (all of it: None). A request
        for most of the nodes is evaluated over the whole batch and its rows picked from the
        results: cheaper than gathering every column first (each row's values are the same
        either way)."""
        if rows is None or len(rows) * 2 < len(batch):
            return self.energy.evaluate(pod, batch, rows=rows)
        whole = self.energy.evaluate(pod, batch)
        return EnergyScores(whole.score[rows], whole.delta_watts[rows], whole.reason[rows])

    # -- verbs --

    def prioritize(self, args: ExtenderArgs) -> HostPriorityList:
        """Both forms are scored with numpy over the prepared batch (module docstring)."""
        now = self.clock()
        pod = args.pod
        names = args.names
        batch, rows = self.candidates(args, now)
        scores = self._evaluate(pod, batch, rows)
        for code, count in enumerate(np.bincount(scores.reason, minlength=len(REASONS)).tolist()):
            if count and REASONS[code] != REASON_OK:
                self.metrics.fallbacks.labels(REASONS[code]).inc(count)
        recommended = recommend_batch(names, scores)
        self.metrics.recommendations.labels(self.mode).inc()

        def nodes() -> CandidateBatch:
            return batch if rows is None else batch.take(rows)

        self._record(ExtenderCall("prioritize", self.mode, now, pod, names, nodes, scores, recommended))
        if self.mode == MODE_SHADOW:
            return HostPriorityList(names, extender_priority(np.full(len(names), NEUTRAL_SCORE)))
        return HostPriorityList(names, extender_priority(self._total(pod, scores, batch, nodes)))

    def _total(
        self, pod: PodInfo, scores: EnergyScores, batch: CandidateBatch, nodes: Callable[[], CandidateBatch]
    ) -> np.ndarray:
        """The profile's weighted total over the request's nodes, the energy entry's scores given
        (module docstring). The request's batch is gathered only for plugins besides the energy
        plugin's entry: with the energy plugin alone, no column is copied on the request path."""
        entry = self.energy_entry
        given = {entry.name: entry_scores(entry, scores.score)}
        others = any(plugin.name not in given for plugin, _ in self.profile.scores)
        return self.profile.score(pod, nodes() if others else batch, given).total

    def filter(self, args: ExtenderArgs) -> dict[str, object]:
        now = self.clock()
        batch, rows = self.candidates(args, now)

        def nodes() -> CandidateBatch:
            return batch if rows is None else batch.take(rows)

        failed: dict[str, str] = {}
        if self.power_caps_watts or self.default_power_cap_watts is not None:
            failed = over_caps(
                self.energy, args.pod, nodes(), self.power_caps_watts, self.default_power_cap_watts
            )
        if failed:
            self.metrics.filtered.labels(self.mode).inc(len(failed))
        self._record(
            ExtenderCall("filter", self.mode, now, args.pod, args.names, nodes, None, None, failed)
        )
        if self.mode == MODE_SHADOW:
            failed = {}
        result: dict[str, object] = {
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
        if self._local:
            self.store.start()
        self.states.start()
        for start in self.on_start:
            start()

    def stop(self) -> None:
        self.states.stop()
        if self._local:
            self.store.stop()
        for close in self.on_stop:
            try:
                close()
            except Exception:
                log.exception("shutdown hook failed")
