"""The cluster cache's node table: every node as one row — its NodeState and integer columns
for vectorized filtering and scoring — and how a node's state is made from its placed pods
(`NodePods`: the pods on each node and their sums; `placed_time`: when a pod was placed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from common.jsonvalue import subobject, subobjects
from common.kubetime import parse_timestamp
from scheduler.domain.model import (
    NodeInfo,
    NodeState,
    NodeTelemetry,
    PodInfo,
    Resources,
    is_node_daemon_pod,
)


@dataclass
class Placed:
    """A pod placed on a node (bound, or assumed by us) and when."""

    info: PodInfo
    node: str
    placed_at: float
    assumed: bool


def placed_time(pod: Mapping[str, object]) -> float:
    """When a pod we did not place ourselves was placed: its PodScheduled condition's
    transition time, else its creation time, else 0 (long ago)."""
    for condition in subobjects(subobject(pod, "status"), "conditions"):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            t = parse_timestamp(condition.get("lastTransitionTime"))
            if t is not None:
                return t
    return parse_timestamp(subobject(pod, "metadata").get("creationTimestamp")) or 0.0


def scoring_requests(info: PodInfo) -> Resources:
    """What a pod adds to its node's non-zero requested (kube-scheduler's NonZeroRequested)."""
    return info.nonzero_requests if info.nonzero_requests is not None else info.requests


class NodeTable:
    """Every node as one row: its NodeState (reused while nothing about the node changes, so
    scorers can cache per-state work) and integer columns for vectorized filtering and scoring.
    Columns: allocatable and requested cpu (millicores), memory and ephemeral storage (bytes),
    pods; kube-scheduler's non-zero requested cpu and memory."""

    def __init__(self, infos: Iterable[NodeInfo], layout_version: int) -> None:
        self.layout_version = layout_version  # changes when nodes come or go
        self.infos = list(infos)
        self.names = [info.name for info in self.infos]
        self.index = {name: i for i, name in enumerate(self.names)}
        count = len(self.infos)
        self.states: list[NodeState] = [NodeState(info=info) for info in self.infos]
        alloc = [info.allocatable for info in self.infos]
        self.alloc_cpu = np.array([a.cpu_millicores for a in alloc], dtype=np.int64)
        self.alloc_mem = np.array([a.memory_bytes for a in alloc], dtype=np.int64)
        self.alloc_pods = np.array([a.pods for a in alloc], dtype=np.int64)
        self.alloc_eph = np.array([a.ephemeral_storage_bytes for a in alloc], dtype=np.int64)
        self.req_cpu = np.zeros(count, dtype=np.int64)
        self.req_mem = np.zeros(count, dtype=np.int64)
        self.req_eph = np.zeros(count, dtype=np.int64)
        self.pod_count = np.zeros(count, dtype=np.int64)
        self.nz_cpu = np.zeros(count, dtype=np.int64)
        self.nz_mem = np.zeros(count, dtype=np.int64)
        # Bumped per row on every change, so each reader can tell which rows it has not seen.
        self.row_version = np.zeros(count, dtype=np.int64)
        self._version = 0

    def __len__(self) -> int:
        return len(self.names)

    def set_row(self, row: int, state: NodeState) -> None:
        """Rewrite a row; a new NodeInfo of the same node (updated in place) renews its
        allocatable columns too."""
        info = state.info
        if info is not self.infos[row]:
            self.infos[row] = info
            alloc = info.allocatable
            self.alloc_cpu[row] = alloc.cpu_millicores
            self.alloc_mem[row] = alloc.memory_bytes
            self.alloc_pods[row] = alloc.pods
            self.alloc_eph[row] = alloc.ephemeral_storage_bytes
        self._version += 1
        self.row_version[row] = self._version
        self.states[row] = state
        requested = state.requested
        nonzero = state.nonzero_requested or requested
        self.req_cpu[row] = requested.cpu_millicores
        self.req_mem[row] = requested.memory_bytes
        self.req_eph[row] = requested.ephemeral_storage_bytes
        self.pod_count[row] = max(state.pod_count, requested.pods)
        self.nz_cpu[row] = nonzero.cpu_millicores
        self.nz_mem[row] = nonzero.memory_bytes


@dataclass(frozen=True)
class Staged:
    """A table built for one telemetry view (`token`) from the cache as it was at `change`."""

    table: NodeTable
    token: object
    layout: int
    change: int


def node_state(
    info: NodeInfo,
    t: NodeTelemetry | None,
    pods: Sequence[Placed],
    requested: Resources | None,
    nonzero: Resources | None,
    daemons: int,
) -> NodeState:
    """One node's state from its placed pods: their requests, and the CPU of those placed
    after the telemetry sample."""
    since = 0.0
    since_pods: tuple[PodInfo, ...] = ()
    if t is not None and pods:
        since_pods = tuple(p.info for p in pods if p.placed_at > t.sample_time)
        since = sum(p.requests.cpu_millicores for p in since_pods) / 1000.0
    empty = Resources()
    return NodeState(
        info=info,
        requested=requested or empty,
        telemetry=t,
        cpu_since_sample_cores=since,
        pods_since_sample=since_pods,
        pod_count=len(pods),
        nonzero_requested=nonzero or empty,
        daemon_pod_count=daemons,
    )


class NodePods:
    """The pods placed on each node (bound or assumed) and their per-node sums — requested,
    kube-scheduler's non-zero requested, DaemonSet and mirror pods — with a count of changes:
    what a node's row is made of (`node_state()`), and the nodes whose spec changed in place
    (`renewed`: their rows are rewritten as if their pods had changed). Not thread-safe: the cluster cache holds
    its lock."""

    def __init__(self) -> None:
        self.by_node: dict[str, dict[str, Placed]] = {}  # node → pod key → its placement
        self.requested: dict[str, Resources] = {}
        self.nonzero: dict[str, Resources] = {}
        self.daemons: dict[str, int] = {}  # per node: its DaemonSet and mirror pods placed
        self.changes = 0  # pod placements and removals so far
        self.changed_at: dict[str, int] = {}  # node → `changes` at its last placement/removal/renewal
        self.dirty: set[str] = set()  # nodes whose pods or spec changed since the last table()

    def add(self, key: str, placed: Placed) -> None:
        node, info = placed.node, placed.info
        self.by_node.setdefault(node, {})[key] = placed
        self.requested[node] = self.requested.get(node, Resources()) + info.requests
        self.nonzero[node] = self.nonzero.get(node, Resources()) + scoring_requests(info)
        if is_node_daemon_pod(info):
            self.daemons[node] = self.daemons.get(node, 0) + 1
        self._changed(node)

    def remove(self, key: str, placed: Placed) -> None:
        node = placed.node
        pods = self.by_node.get(node)
        if pods is not None:
            pods.pop(key, None)
            if not pods:
                del self.by_node[node]
        self.requested[node] = self.requested[node] - placed.info.requests
        self.nonzero[node] = self.nonzero[node] - scoring_requests(placed.info)
        if is_node_daemon_pod(placed.info):
            self.daemons[node] -= 1
        self._changed(node)

    def renewed(self, node: str) -> None:
        """The node's spec changed (updated in place): its row is rewritten, as after a pod."""
        self._changed(node)

    def _changed(self, node: str) -> None:
        self.dirty.add(node)
        self.changes += 1
        self.changed_at[node] = self.changes

    def state(self, info: NodeInfo, t: NodeTelemetry | None) -> NodeState:
        """Node `info`'s state with telemetry `t`, from the pods placed on it."""
        name = info.name
        pods = self.by_node.get(name)
        return node_state(
            info, t, tuple(pods.values()) if pods else (), self.requested.get(name),
            self.nonzero.get(name), self.daemons.get(name, 0),
        )

    def inputs(
        self,
    ) -> dict[str, tuple[tuple[Placed, ...], Resources | None, Resources | None, int]]:
        """node_state()'s inputs of every node with pods placed (a copy, to build rows from
        outside the lock)."""
        return {
            name: (tuple(pods.values()), self.requested.get(name), self.nonzero.get(name),
                   self.daemons.get(name, 0))
            for name, pods in self.by_node.items()
        }
