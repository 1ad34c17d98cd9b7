"""The cluster cache's node table: every node as one row — its NodeState and integer columns
for vectorized filtering and scoring — and how a node's state is made from its placed pods."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources


@dataclass
class Placed:
    """A pod placed on a node (bound, or assumed by us) and when."""

    info: PodInfo
    node: str
    placed_at: float
    assumed: bool


def scoring_requests(info: PodInfo) -> Resources:
    """What a pod adds to its node's non-zero requested (kube-scheduler's NonZeroRequested)."""
    return info.nonzero_requests if info.nonzero_requests is not None else info.requests


class NodeTable:
    """Every node as one row: its NodeState (reused while nothing about the node changes, so
    scorers can cache per-state work) and integer columns for vectorized filtering and scoring.
    Columns: allocatable and requested cpu (millicores), memory and ephemeral storage (bytes),
    pods; kube-scheduler's non-zero requested cpu and memory."""

    def __init__(self, infos: Iterable[NodeInfo], layout_version: int) -> None:
        self.layout_version = layout_version  # changes when nodes come, go or change spec
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
