"""What the autoscaler and the controllers beside the scheduler do to a simulation: boot and
power down nodes, evict pods (through the eviction API and its PodDisruptionBudgets), remove
nodes, taint them — with what they read of it (`nodes`, `waiting`, …); acting every interval is
the engine's (`Simulation.every`).

`ClusterActions` is a part of `Simulation` (rl/simulation/simulator.py): these are the only ways
code outside the simulator changes a run. They implement the autoscaler's `ClusterAPI`
(rl/simulation/node.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from rl.simulation.events import BOOT_DONE
from rl.simulation.lifecycle import NodeLifecycle
from rl.simulation.node import BOOTING, ON, SimNode
from rl.simulation.simrecords import boot_joules_for
from rl.simulation.workloads import DELETED
from scheduler.domain.model import PodInfo, Resources


class ClusterActions(NodeLifecycle):
    """The simulation's public node API (a part of `Simulation`)."""

    @property
    def nodes(self) -> Sequence[SimNode]:
        return self._nodes

    @property
    def waiting(self) -> Sequence[int]:
        """Pending pods (found no feasible node), oldest first."""
        return tuple(self._waiting)

    def pod_info(self, index: int) -> PodInfo:
        return self._infos[index]

    @property
    def daemon_requests(self) -> Resources:
        return self._daemon_requests

    def boot(self, node: SimNode, boot_seconds: float, boot_joules: float | None) -> None:
        """Power a node on: `boot_seconds` at boot_joules / boot_seconds watts, then ready."""
        node.state = BOOTING
        node.boots += 1
        self._boots += 1
        node.version += 1  # cancels a power-off armed for this node
        joules = boot_joules_for(node.spec, boot_seconds, boot_joules)
        if boot_seconds <= 0:
            self.energy.add(node, joules, self.now)
            self._on_boot_done(node)
            return
        self._set_power(node, joules / boot_seconds)
        self._push(self.now + boot_seconds, BOOT_DONE, self._index(node), node.version)

    def evict(self, node: SimNode, index: int) -> str:
        """Evict one pod (the eviction API's decision is the caller's): its fate by its owner
        (rl/simulation/workloads.py); a replacement goes back to the scheduling queue, Pending from now."""
        self._progress(node)
        left = node.running.pop(index)
        del node.placed_at[index]
        node.usage_cores -= self.pods[index].cpu_usage
        node.requested = node.requested - self._infos[index].requests
        fate = self.ledger.evicted(index, left)
        if fate == DELETED:
            self._done += 1
        else:
            del self._start[index]  # pending again until it restarts (pending_pod_seconds)
            self._to_schedule.append(index)
        self._after_removal(node)
        return fate

    def remove_node(self, node: SimNode) -> None:
        """Delete a node the autoscaler emptied: pods still on it (the trace's DaemonSet pods)
        go with it, and it powers off."""
        for index in sorted(node.running):
            self.evict(node, index)
        self.power_down(node)

    def pdb_room(self, workload: str | None) -> int | None:
        """The workload's PDB's disruptions allowed now (None without a PDB)."""
        return self.ledger.pdb_room(workload, self.now)

    def request_eviction(self, node: SimNode, index: int) -> bool:
        """The eviction API (policy/v1): it refuses a pod whose PodDisruptionBudget allows no
        disruption now; otherwise the pod is evicted (`evict`). Whether it was."""
        room = self.pdb_room(self.pods[index].workload)
        if room is not None and room < 1:
            return False
        self.evict(node, index)
        return True

    def taint(self, node: SimNode, on: bool) -> None:
        """Put on (or take off) a NoSchedule taint: no new pod goes to the node; its pods stay,
        and cluster-autoscaler may still remove it (the rebalancer's taint on a node it empties).
        Powering off takes it off."""
        node.tainted = on and node.state == ON
