"""A simulated node and the public node API of the simulator.

The simulation (rl/simulation/engine/simulator.py) owns its `SimNode`s and changes them; the
autoscaler, scale-down, controllers and policies read them (`Simulation.nodes`) and act on
them only through the simulation's actions (`Simulation.actions`,
rl/simulation/engine/actions.py: `boot`, `evict`, `request_eviction`, `remove_node`, `taint`, `soft_taint`).
`ClusterAPI` is that API as the autoscaler (rl/simulation/autoscaler/scan.py, scaledown.py)
uses it, and `ScaleLoop` what the engine drives of the autoscaler: each side works against a
protocol, never against the other's classes, so the autoscaler sits above the engine that
clocks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from rl.simulation.traces.scenario import NodeSpec
from scheduler.cluster.node_workload import SCALE_DOWN_CANDIDATE_TAINT
from scheduler.domain.model import NodeInfo, PodInfo, Resources, Taint

if TYPE_CHECKING:
    import random

    from rl.simulation.engine.workloads import PodLedger
    from rl.simulation.traces.scenario import DaemonSetSpec, PodSpec

# cluster-autoscaler's soft taint on the nodes it finds unneeded (utils/taints/taints.go
# `MarkDeletionCandidate`: DeletionCandidateOfClusterAutoscaler, PreferNoSchedule).
DELETION_CANDIDATE = Taint(SCALE_DOWN_CANDIDATE_TAINT, effect="PreferNoSchedule")

# A node's power state.
ON = "on"
OFF = "off"
BOOTING = "booting"


def nonzero_extra(info: PodInfo) -> Resources:
    """What kube-scheduler's scoring adds to a pod's requests (`PodInfo.nonzero_requests`)."""
    if info.nonzero_requests is None:
        return Resources()
    return info.nonzero_requests - info.requests


@dataclass
class SimNode:
    """One node of a run as it stands: its power state, its pods (by trace index), what they
    request and use, its power and energy so far."""

    spec: NodeSpec
    info: NodeInfo
    points: tuple[float, ...]
    state: str = ON
    running: dict[int, float] = field(default_factory=dict)  # pod index → remaining seconds
    placed_at: dict[int, float] = field(default_factory=dict)  # pod index → placement time
    pending: list[int] = field(default_factory=list)  # placed, waiting for the boot (ablation)
    requested: Resources = field(default_factory=Resources)
    pending_cpu_cores: float = 0.0
    usage_cores: float = 0.0  # workload and DaemonSet pods
    daemon_pods: int = 0
    power_watts: float = 0.0
    energy_joules: float = 0.0
    # Its watts and joules by where they go (rl/simulation/engine/energy.py, ENERGY_PARTS), and the
    # time it was on or booting.
    split_watts: tuple[float, ...] = ()
    split_joules: list[float] = field(default_factory=list)  # filled on its first settle
    powered: bool = False
    powered_seconds: float = 0.0
    last_energy_s: float = 0.0
    last_progress_s: float = 0.0
    version: int = 0  # bumps on every change; stale completion/power-off events are skipped
    boots: int = 0
    deleting: bool = False  # cluster-autoscaler drains it (ToBeDeleted taint: no new pods)
    tainted: bool = False  # a NoSchedule taint of another controller (the energy rebalancer's)
    deletion_candidate: bool = False  # cluster-autoscaler's soft taint (DELETION_CANDIDATE)
    _candidate_info: NodeInfo | None = field(default=None, repr=False)
    empty_since_s: float = 0.0  # when its last non-DaemonSet pod left (or it became ready)
    ready_since_s: float = 0.0  # when it last became ready (feature schema v2)

    @property
    def cores(self) -> float:
        return self.spec.cpu_cores

    @property
    def scheduling_info(self) -> NodeInfo:
        """The node as the scheduler sees it: its info, with cluster-autoscaler's soft taint
        while it has it (one object per node and taint state, as the scheduler's cache keeps
        a node's spec until it changes)."""
        if not self.deletion_candidate:
            return self.info
        if self._candidate_info is None:
            self._candidate_info = replace(self.info, taints=(*self.info.taints, DELETION_CANDIDATE))
        return self._candidate_info

    @property
    def rate(self) -> float:
        """Speed of each running pod relative to running alone."""
        if self.usage_cores <= self.cores or self.usage_cores <= 0:
            return 1.0
        return self.cores / self.usage_cores

    @property
    def utilization(self) -> float:
        if self.state != ON or self.cores <= 0:
            return 0.0
        return min(1.0, self.usage_cores / self.cores)

    @property
    def empty(self) -> bool:
        """No pods other than DaemonSet pods, none on the way."""
        return not self.running and not self.pending


class ClusterAPI(Protocol):
    """What cluster-autoscaler reads of a run and does to it (`ClusterActions` implements it,
    rl/simulation/engine/actions.py)."""

    scale_ups: int  # scale-up decisions so far (the autoscaler counts its own)
    scale_downs: int  # nodes the autoscaler removed

    @property
    def now(self) -> float: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def pods(self) -> Sequence[PodSpec]: ...

    @property
    def daemonsets(self) -> Sequence[DaemonSetSpec]: ...

    @property
    def ledger(self) -> PodLedger: ...

    @property
    def nodes(self) -> Sequence[SimNode]: ...

    @property
    def waiting(self) -> Sequence[int]: ...

    @property
    def daemon_requests(self) -> Resources: ...

    def pod_info(self, index: int) -> PodInfo: ...

    def created_s(self, index: int) -> float: ...

    def boot(self, node: SimNode, boot_seconds: float, boot_joules: float | None) -> None: ...

    def pdb_room(self, workload: str | None) -> int | None: ...

    def request_eviction(self, node: SimNode, index: int) -> bool: ...

    def remove_node(self, node: SimNode) -> None: ...

    def soft_taint(self, node: SimNode, on: bool) -> None: ...


class ScaleLoop(Protocol):
    """What the engine drives of an autoscaler (rl/simulation/autoscaler/scan.py: `Autoscaler`):
    a loop at 0, then each when the last one says (`scan` returns the seconds to the next: 0 at
    once, None no more) or, if it `wakes_on_unschedulable`, as soon as a pod turns unschedulable."""

    @property
    def wakes_on_unschedulable(self) -> bool: ...

    def scan(self, idle: bool) -> float | None: ...
