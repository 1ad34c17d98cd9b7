"""What the autoscaler and the controllers beside the scheduler do to a simulation: boot and
power down nodes, evict pods (through the eviction API and its PodDisruptionBudgets), remove
nodes, taint them — with what they read of it (`nodes`, `waiting`, …); acting every interval is
the engine's (`Simulation.every`).

`ClusterActions` is a part of `Simulation` (rl/simulation/engine/simulator.py), over the run's
state and its node lifecycle: these are the only ways code outside the engine changes a run.
It is the autoscaler's `ClusterAPI` (rl/simulation/engine/node.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from rl.simulation.engine.events import BOOT_DONE
from rl.simulation.engine.lifecycle import NodeLifecycle
from rl.simulation.engine.node import BOOTING, ON, SimNode
from rl.simulation.engine.simrecords import boot_joules_for
from rl.simulation.engine.state import SimulationState
from rl.simulation.engine.workloads import DELETED, PodLedger
from rl.simulation.traces.scenario import DaemonSetSpec, PodSpec
from scheduler.domain.model import PodInfo, Resources


class ClusterActions:
    """The simulation's public node API (a part of `Simulation`)."""

    def __init__(self, state: SimulationState, lifecycle: NodeLifecycle) -> None:
        self.state = state
        self.lifecycle = lifecycle

    # -- what they read --------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self.state.now

    @property
    def rng(self) -> random.Random:
        return self.state.rng

    @property
    def pods(self) -> Sequence[PodSpec]:
        return self.state.pods

    @property
    def daemonsets(self) -> Sequence[DaemonSetSpec]:
        return self.state.daemonsets

    @property
    def ledger(self) -> PodLedger:
        return self.state.ledger

    @property
    def nodes(self) -> Sequence[SimNode]:
        return self.state.nodes

    @property
    def waiting(self) -> Sequence[int]:
        """Pending pods (found no feasible node), oldest first."""
        return tuple(self.state.waiting)

    def pod_info(self, index: int) -> PodInfo:
        return self.state.infos[index]

    @property
    def daemon_requests(self) -> Resources:
        return self.state.daemon_requests

    # -- the autoscaler's counts -----------------------------------------------------------------

    @property
    def scale_ups(self) -> int:
        """Scale-up decisions so far (the autoscaler counts its own)."""
        return self.state.scale_ups

    @scale_ups.setter
    def scale_ups(self, count: int) -> None:
        self.state.scale_ups = count

    @property
    def scale_downs(self) -> int:
        """Nodes the autoscaler removed (it counts them)."""
        return self.state.scale_downs

    @scale_downs.setter
    def scale_downs(self, count: int) -> None:
        self.state.scale_downs = count

    # -- what they do ----------------------------------------------------------------------------

    def boot(self, node: SimNode, boot_seconds: float, boot_joules: float | None) -> None:
        """Power a node on: `boot_seconds` at boot_joules / boot_seconds watts, then ready."""
        s = self.state
        node.state = BOOTING
        node.boots += 1
        s.boots += 1
        node.version += 1  # cancels a power-off armed for this node
        joules = boot_joules_for(node.spec, boot_seconds, boot_joules)
        if boot_seconds <= 0:
            s.energy.add(node, joules, s.now)
            self.lifecycle.on_boot_done(node)
            return
        self.lifecycle.set_power(node, joules / boot_seconds)
        s.push(s.now + boot_seconds, BOOT_DONE, s.index(node), node.version)

    def evict(self, node: SimNode, index: int) -> str:
        """Evict one pod (the eviction API's decision is the caller's): its fate by its owner
        (rl/simulation/engine/workloads.py); a replacement goes back to the scheduling queue,
        Pending from now."""
        s = self.state
        self.lifecycle.progress(node)
        left = node.running.pop(index)
        del node.placed_at[index]
        node.usage_cores -= s.pods[index].cpu_usage
        node.requested = node.requested - s.infos[index].requests
        fate = s.ledger.evicted(index, left)
        if fate == DELETED:
            s.done += 1
        else:
            del s.start[index]  # pending again until it restarts (pending_pod_seconds)
            s.created[index] = s.now  # a new pod
            s.marked_unschedulable.discard(index)
            s.to_schedule.append(index)
        self.lifecycle.after_removal(node)
        return fate

    def remove_node(self, node: SimNode) -> None:
        """Delete a node the autoscaler emptied: pods still on it (the trace's DaemonSet pods)
        go with it, and it powers off."""
        for index in sorted(node.running):
            self.evict(node, index)
        self.lifecycle.power_down(node)

    def created_s(self, index: int) -> float:
        """When the pod (or its latest replacement, Pending from its eviction) was created."""
        return self.state.created_s(index)

    def pdb_room(self, workload: str | None) -> int | None:
        """The workload's PDB's disruptions allowed now (None without a PDB)."""
        return self.state.ledger.pdb_room(workload, self.state.now)

    def request_eviction(self, node: SimNode, index: int) -> bool:
        """The eviction API (policy/v1): it refuses a pod whose PodDisruptionBudget allows no
        disruption now; otherwise the pod is evicted (`evict`). Whether it was."""
        room = self.pdb_room(self.state.pods[index].workload)
        if room is not None and room < 1:
            return False
        self.evict(node, index)
        return True

    def taint(self, node: SimNode, on: bool) -> None:
        """Put on (or take off) a NoSchedule taint: no new pod goes to the node; its pods stay,
        and cluster-autoscaler may still remove it (the rebalancer's taint on a node it empties).
        Powering off takes it off."""
        node.tainted = on and node.state == ON

    def soft_taint(self, node: SimNode, on: bool) -> None:
        """Put on (or take off) cluster-autoscaler's DeletionCandidate taint (PreferNoSchedule,
        rl/simulation/engine/node.py `DELETION_CANDIDATE`): the scheduler's TaintToleration
        scores the node below every node without it; nothing is filtered. Powering off takes it
        off."""
        node.deletion_candidate = on and node.state == ON
