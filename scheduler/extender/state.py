"""The node states the extender scores, prepared OFF the request path.

A `Prepared` snapshot — every node's NodeState and the scorer's batch of them — is built when
something the scores depend on changes, and published by swapping one reference:

* on the telemetry refresh thread, as a store listener: when `refresh_once()` returns, the new
  snapshot is published, so a request right after a refresh is scored on the new telemetry
  and pays no rebuild (a request during the rebuild is scored on the previous snapshot, as if
  it had come a moment earlier);
* on the preparer thread, woken by the cluster watch's listener (pods bound, nodes changed) and
  by Node objects seen in `Nodes.items` bodies, at most every PREPARE_INTERVAL_SECONDS.

Requests only read the published snapshot. They build one themselves only before the first
one exists, or when nothing runs in the background (the extender not started, as in tests)
and something changed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Protocol, runtime_checkable

import numpy as np

from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, Resources
from scheduler.extender.bounded import BoundedSpecs
from scheduler.extender.wire import RememberedNodes
from scheduler.framework.batch import CandidateBatch
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)


class ClusterView(Protocol):
    """Nodes with the pods bound (or assumed) on them: a `ClusterWatch` (pod and node watches
    feeding a ClusterCache; `kubejoule-scheduler extender` runs one when it can reach the API)
    or a ClusterCache. With one, the extender counts pods placed since each node's telemetry
    sample, and knows which nodes are empty. An empty list means "not known yet". A
    WatchedClusterView (ClusterWatch) wakes the preparer on every change and says when it has
    listed the cluster."""

    def node_states(
        self, telemetry: Callable[[str], NodeTelemetry | None] | None = None
    ) -> list[NodeState]: ...


@runtime_checkable
class WatchedClusterView(ClusterView, Protocol):
    """A cluster view fed by watches (ClusterWatch): it calls its listeners on every change and
    is `synced` once nodes and pods were both listed."""

    def add_listener(self, listener: Callable[[], None]) -> None: ...

    @property
    def synced(self) -> bool: ...


# The preparer's pace: changes (pods bound, Node specs) within this delay are folded into one
# rebuild. With a cluster view and no listener, the view is also polled at this pace.
PREPARE_INTERVAL_SECONDS = 0.2


# The last row of every prepared batch: a node without telemetry, spec or history, scored as
# the energy plugin scores any such node (a name the snapshot does not know maps to it).
_SENTINEL = NodeState(NodeInfo("", Resources()))


@dataclass(frozen=True)
class Prepared:
    """One consistent snapshot: the telemetry view, the states built from it, and their
    candidate batch with the energy plugin's columns computed (its last row the sentinel)."""

    view: Mapping[str, NodeSample]
    states: Mapping[str, NodeState]
    batch: CandidateBatch
    from_cluster: frozenset[str] = field(default_factory=frozenset)  # names the cluster knows
    cluster_synced: bool = True  # the cluster view had listed everything (or there is none)
    index: Mapping[str, int] = field(default_factory=dict)  # name → batch row

    @classmethod
    def build(
        cls,
        energy: EnergyPlugin,
        view: Mapping[str, NodeSample],
        states: Mapping[str, NodeState],
        from_cluster: frozenset[str] = frozenset(),
        cluster_synced: bool = True,
    ) -> Prepared:
        ordered = [states[name] for name in sorted(states)]
        batch = CandidateBatch.of([*ordered, _SENTINEL])
        energy.columns(batch)  # the pod-independent work, done here
        index = {state.info.name: row for row, state in enumerate(ordered)}
        return cls(view, states, batch, from_cluster, cluster_synced, index)

    @property
    def sentinel(self) -> int:
        """The sentinel's row (the number of nodes)."""
        return len(self.batch) - 1

    def rows(self, names: Sequence[str]) -> np.ndarray:
        """The batch row of each name; unknown names get the sentinel row."""
        found = list(map(self.index.get, names, repeat(self.sentinel, len(names))))
        return np.array(found, dtype=np.intp)


class NodeStates:
    """Builds and publishes `Prepared` snapshots (see the module docstring)."""

    def __init__(
        self, energy: EnergyPlugin, store: TelemetryStore, cluster: ClusterView | None
    ) -> None:
        self.energy = energy
        self.store = store
        self.cluster = cluster
        # Node objects seen in Nodes.items payloads: their allocatable CPU serves the NodeNames
        # form later, when telemetry carries no core count.
        # Bounded (bounded.py): requests may name any number of nodes.
        self._node_infos: BoundedSpecs[NodeInfo] = BoundedSpecs()
        self._unapplied: set[str] = set()  # names whose newest spec no snapshot has yet
        # The spec numbers the request process gave the specs it forwarded (refresher.py).
        self.spec_seq: dict[str, int] = {}
        # The NodeInfo of one Node of a Nodes.items body (its JSON; BadRequest naming it when
        # it is wrong), remembered by name and resourceVersion: `node_info(raw, position)`.
        self.node_info = RememberedNodes()
        self.on_prepared: list[Callable[[Prepared], None]] = []  # each new snapshot, when built
        self._current: Prepared | None = None
        self._build_lock = threading.Lock()  # one build at a time
        self._dirty = threading.Event()  # something changed since the last build
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.builds = 0
        self._cluster_listens = isinstance(cluster, WatchedClusterView)
        if isinstance(cluster, WatchedClusterView):
            cluster.add_listener(self._dirty.set)
        store.add_listener(self._observe)
        store.add_listener(self.on_refresh)  # after _observe: the fits are up to date

    def _observe(self, view: Mapping[str, NodeSample]) -> None:
        """Every sample teaches the energy plugin (its online fits, the curves exported)."""
        for sample in view.values():
            self.energy.observe(sample.telemetry)

    # -- building (background threads; the request path only when nothing runs there) --

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
            daemon_pod_count=sample.daemon_pod_count if sample is not None else 0,
        )

    def prepare(self, view: Mapping[str, NodeSample] | None = None) -> Prepared:
        """Build the snapshot of `view` (default: the store's) and publish it."""
        with self._build_lock:
            self._dirty.clear()
            applied = set(self._unapplied)
            if view is None:
                view = self.store.snapshot()
            previous = self._current
            states: dict[str, NodeState] = {}
            synced = self._cluster_synced()
            if self.cluster is not None:
                states = {s.info.name: s for s in self.cluster.node_states(self.store.telemetry)}
            from_cluster = frozenset(states)
            # Nodes the energy plugin remembers (an exported curve, a history) price at their
            # worst state from it even when no source has them any longer.
            for name in (*view, *self.energy.remembered_nodes()):
                if name not in states:
                    old = previous.states.get(name) if previous is not None else None
                    info = self._node_infos.get(name)
                    if (
                        old is not None and previous is not None
                        and previous.view.get(name) is view.get(name)
                        and (info is None or old.info is info)
                    ):
                        states[name] = old  # same sample, same spec: the scorer's work is kept
                    else:
                        states[name] = self._state(name, view, None)
            if (
                previous is not None
                and previous.view is view
                and previous.cluster_synced == synced
                and len(previous.states) == len(states)
                and all(previous.states.get(name) is state for name, state in states.items())
            ):
                return previous  # nothing changed (a cluster event that moved no state)
            prepared = Prepared.build(self.energy, view, states, from_cluster, synced)
            self._current = prepared
            self._unapplied -= applied
            self.builds += 1
            for publish in self.on_prepared:
                publish(prepared)
            return prepared

    @property
    def node_infos(self) -> Mapping[str, NodeInfo]:
        """The Node objects Nodes.items bodies carried, by name (the newest of each)."""
        return self._node_infos

    def remember_spec(self, info: NodeInfo, seq: int = 0) -> None:
        """A Node object seen in a Nodes.items body (`seq`: its number from the request
        process): the next snapshot is built with it."""
        self._forget(self._node_infos.put(info.name, info))
        self.spec_seq[info.name] = seq
        self._dirty.set()

    def forget_spec(self, name: str) -> None:
        """The request process no longer remembers NAME's Node object: neither does this."""
        self._node_infos.pop(name, None)
        self._forget([name])

    def _forget(self, names: list[str]) -> None:
        for name in names:
            self.spec_seq.pop(name, None)
            self._unapplied.discard(name)

    def _cluster_synced(self) -> bool:
        # Only a watched view lists the cluster before it knows it; any other knows it at once.
        return not isinstance(self.cluster, WatchedClusterView) or self.cluster.synced

    def on_refresh(self, view: Mapping[str, NodeSample]) -> None:
        """The store's listener: runs on the telemetry refresh thread."""
        self.prepare(view)

    def _run(self) -> None:
        while not self._stop.is_set():
            # Without a listener a cluster view can only be polled.
            woken = self._dirty.wait(None if self._cluster_listens or self.cluster is None
                                     else PREPARE_INTERVAL_SECONDS)
            if self._stop.is_set():
                return
            if woken or self.cluster is not None:
                try:
                    self.prepare()
                except Exception:  # keep serving the last snapshot; try again on the next change
                    log.exception("preparing node states failed")
            self._stop.wait(PREPARE_INTERVAL_SECONDS)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="extender-prepare", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    # -- reading (the request path) --

    def current(self) -> Prepared:
        """The published snapshot; built here only if there is none yet, or if something
        changed and no preparer thread runs."""
        prepared = self._current
        if (
            prepared is None
            or (self._thread is None and self._stale(prepared))
            # Once only: the cluster view has just listed everything (until then each node
            # looked empty); the first request after that must not miss its pods.
            or (not prepared.cluster_synced and self._cluster_synced())
        ):
            prepared = self.prepare()
        return prepared

    def _stale(self, prepared: Prepared) -> bool:
        return (
            self._dirty.is_set()
            or prepared.view is not self.store.snapshot()
            or self.cluster is not None
        )

    def known_nodes(self) -> int:
        """Nodes in the published snapshot (0 before the first)."""
        prepared = self._current
        return len(prepared.states) if prepared is not None else 0

    def has_spec(self, name: str) -> bool:
        """Whether a Node object for `name` was seen in a Nodes.items body."""
        return name in self._node_infos

    def for_names(self, names: Sequence[str], prepared: Prepared) -> list[NodeState]:
        """The states of `names` (a node the snapshot does not know gets an empty state)."""
        states = prepared.states
        view = prepared.view
        return [states.get(name) or self._state(name, view, None) for name in names]

    def spec_redo(self, names: Sequence[str], prepared: Prepared) -> list[tuple[int, NodeState]]:
        """(position, state) of names whose newest spec (from a Nodes.items body) the snapshot
        was not built with: their rows' states with that spec."""
        unapplied = self._unapplied
        if not unapplied:
            return []
        redo = []
        for position, name in enumerate(names):
            if name in unapplied and name not in prepared.from_cluster:
                known = prepared.states.get(name)
                info = self._node_infos.get(name)
                if known is not None and info is not None and known.info is not info:
                    redo.append((position, self._state(name, prepared.view, info)))
        return redo

    def item_redo(
        self, infos: Sequence[NodeInfo], prepared: Prepared, unknown: Sequence[int]
    ) -> list[tuple[int, NodeState]]:
        """(position, state) of the Nodes.items form's nodes the snapshot cannot score: those at
        `unknown` positions (not in it) and those whose spec is not the one it was built with,
        each with the spec sent. New specs are remembered for later snapshots (and the
        NodeNames form)."""
        redo: list[tuple[int, NodeState]] = []
        missing = set(unknown)
        changed = False
        for position, info in enumerate(infos):
            name = info.name
            known = prepared.states.get(name)
            if name in prepared.from_cluster and known is not None:
                continue  # the cluster's spec
            remembered = self._node_infos.get(name)
            if remembered is not info and remembered != info:
                self._forget(self._node_infos.put(name, info))
                self._unapplied.add(name)
                changed = True
            if known is not None and (known.info is info or known.info == info):
                continue
            if known is not None or position in missing:
                redo.append((position, self._state(name, prepared.view, info)))
        if changed:
            self._dirty.set()
        return redo
