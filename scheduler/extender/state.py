"""The node states the extender scores: built from the TelemetryStore's view (and the cluster
view when there is one), cached until the view changes, and prepared as a scoring batch."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from scheduler.model import NodeInfo, NodeState, NodeTelemetry, Resources
from scheduler.scorer import HeuristicScorer, NodeBatch
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore


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


class NodeStates:
    """NodeStates by name, rebuilt only when the store publishes a new view (or, with a cluster
    view, after CLUSTER_STATES_TTL_SECONDS), and the prepared batch of all of them."""

    def __init__(
        self, scorer: HeuristicScorer, store: TelemetryStore, cluster: ClusterView | None
    ) -> None:
        self.scorer = scorer
        self.store = store
        self.cluster = cluster
        # Node objects seen in Nodes.items payloads: their allocatable CPU serves the NodeNames
        # form later, when telemetry carries no core count.
        self._node_infos: dict[str, NodeInfo] = {}
        self._states: dict[str, NodeState] = {}
        self._states_view: Mapping[str, NodeSample] | None = None
        self._states_built = 0.0
        self._batch: NodeBatch | None = None

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

    def _cluster_states(self) -> dict[str, NodeState]:
        assert self.cluster is not None
        return {s.info.name: s for s in self.cluster.node_states(self.store.telemetry)}

    def _refresh(self) -> Mapping[str, NodeSample]:
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
        view = self._refresh()
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

    def for_names(self, names: Sequence[str]) -> list[NodeState]:
        """The states of the NodeNames form (a node without telemetry gets an empty state)."""
        view = self._refresh()
        cache = self._states
        out = []
        for name in names:
            state = cache.get(name)
            if state is None:
                state = cache[name] = self._state(name, view, None)
            out.append(state)
        return out

    def for_items(self, infos: Sequence[NodeInfo]) -> list[NodeState]:
        """The states of the Nodes.items form: the Node objects' capacity, remembered for the
        NodeNames form (a changed Node invalidates the prepared batch)."""
        view = self._refresh()
        states = []
        for info in infos:
            if self._node_infos.get(info.name) != info:
                self._node_infos[info.name] = info
                self._batch = None
                if self.cluster is None:
                    self._states.pop(info.name, None)
            known = self._states.get(info.name) if self.cluster is not None else None
            states.append(known if known is not None else self._state(info.name, view, info))
        return states
