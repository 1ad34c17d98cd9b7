"""A discrete-event cluster simulator with exact energy accounting.

Model (every number in joules, watts, seconds, cores):

* A node's power is `P(u)` from its curve, `u = min(1, Σ cpu_usage of its running pods and its
  DaemonSet pods / cores)`. `u` only changes at events, so energy between two events is exactly
  `P(u) × Δt`. A powered-off node draws its group's `standby_watts`; a booting one
  `boot_joules / boot_seconds`.
* Contention: when `Σ usage > cores`, every running pod on that node progresses at
  `cores / Σ usage` of its own speed; its remaining work stretches and its finish time moves.
  A pod's slowdown is `(finish − submit) / duration − 1`: CPU contention, waiting for room and
  waiting for a boot all count.
* Placement: each pod is placed on arrival by a policy through the scheduler's own filter
  (`scheduler.domain.filters.filter_nodes`: pods, cpu and memory requests vs allocatable). A pod that
  fits nowhere waits (Pending) and is retried, in arrival order, whenever a pod finishes or a
  node becomes ready; it is counted once as unschedulable.
* DaemonSet pods (`daemonsets`) run on every powered-on node: their requests, pod slots and CPU
  usage count on the node, and they never make it non-empty.
* Evictions (cluster-autoscaler draining a node, rl/simulation/scaledown.py): what happens to an evicted pod
  depends on its owner (rl/simulation/workloads.py, `PodLedger`): replaced with its remaining lifetime,
  restarted from scratch, or deleted; a replacement is Pending from the eviction and starts
  with `WorkloadModel.pod_startup_s`. A node being drained takes no new pods.
* Three power regimes:
  - always on (neither `autoscaler` nor `power_off`): every node is on from 0 to the end;
  - `autoscaler` (rl/simulation/autoscaler.py): cluster-autoscaler's semantics. Only powered-on, ready
    nodes are candidates; the autoscaler scans every `scan_interval_s`, boots nodes of the group
    its expander picks for the Pending pods and powers off unneeded nodes;
  - `power_off` (the `--power-off-visible` ablation, the old model): powered-off nodes stay
    feasible candidates, placing a pod on one boots it, and a node empty for `after_seconds`
    powers off. No real scheduler sees a powered-off node; this is kept to measure what that
    assumption was worth.
* Telemetry (rl/simulation/telemetry.py): policies see each node's utilization and watts as the scheduler's
  telemetry store holds them — the agents' latest sample as of the store's last refresh — plus
  the CPU requested by pods placed since that sample (`cpu_since_sample_cores`). `telemetry=None`
  is the perfect, instantaneous ablation.

The run ends when the last pod finishes; energy is integrated from 0 to that time.

This module is the event engine (the heap of events, the loop, placing a pod, the periodic
controllers, forking a run, the result); its parts, each importing only those before it: the
run's state and event queue (`state.py`, event kinds in `events.py`), a node (`node.py`:
`SimNode`, and `ClusterAPI`, the public node API the autoscaler works against), the value types
(`simrecords.py`: `PlacementRequest`, outcomes, the result), a node's life (`lifecycle.py`: pods
start, progress and finish, boots, power), the energy ledgers (`energy.py`), the scheduler's
view (`view.py`: `NodeState`s, candidates, `Policy`) and what the autoscaler and controllers do
(`actions.py`: boot, power down, evict, remove, taint). The engine sits on top: it builds the
autoscaler (`autoscaler.py`) and drives its scans.
`Simulation.next_decision()` / `place()` expose the decisions one by one (the run loop of
rl/evaluation/benchmark.py and the gymnasium env drive them).
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Sequence

from rl.simulation.actions import ClusterActions
from rl.simulation.autoscaler import Autoscaler
from rl.simulation.energy import total_split
from rl.simulation.events import ARRIVAL, BOOT_DONE, COMPLETE, PERIODIC, SCAN
from rl.simulation.node import BOOTING, OFF, ON, SimNode
from rl.simulation.simrecords import (
    PlacementRequest,
    PodOutcome,
    PowerOffModel,
    SimResult,
    boot_joules_for,
)
from rl.simulation.view import Policy, SchedulerView
from scheduler.domain.filters import filter_nodes
from scheduler.domain.model import NodeState

# The names the simulator's users import from here (defined in its parts).
__all__ = [
    "BOOTING",
    "OFF",
    "ON",
    "PlacementRequest",
    "PodOutcome",
    "Policy",
    "PowerOffModel",
    "SimNode",
    "SimResult",
    "Simulation",
    "boot_joules_for",
]


class Simulation(ClusterActions, SchedulerView):
    """One run of a trace on a cluster. Single use. Its parameters are `SimulationState`'s
    (rl/simulation/state.py): nodes, pods, and how the cluster behaves."""

    def _begin(self) -> None:
        self._periodic: list[tuple[float, Callable[[Simulation], None]]] = []
        self._periodic_queued = 0  # PERIODIC events in the heap
        self._autoscaler: Autoscaler | None = None
        for i, pod in enumerate(self.pods):
            self._push(pod.submit_s, ARRIVAL, i, 0)
        autoscaler = self.autoscaler_model
        if autoscaler is not None:
            self._autoscaler = Autoscaler(self, autoscaler)
            self._push(0.0, SCAN, 0, 0)
        for node in self._nodes:
            if autoscaler is None or node.spec.initially_on:
                self._make_ready(node)
            else:
                node.state = OFF
                self._set_power(node, node.spec.standby_watts)
            self._arm_power_off(node)

    @property
    def autoscaler(self) -> Autoscaler | None:
        return self._autoscaler

    # -- controllers ----------------------------------------------------------------------------

    def every(self, interval_s: float, act: Callable[[Simulation], None]) -> None:
        """Run `act(self)` every `interval_s` from `interval_s` on, while anything else still
        happens (a controller such as a descheduler or the rebalancer)."""
        if not interval_s > 0:
            raise ValueError("a periodic controller's interval must be > 0")
        self._periodic.append((interval_s, act))
        self._push_periodic(len(self._periodic) - 1)

    def _push_periodic(self, which: int) -> None:
        self._periodic_queued += 1
        self._push(self.now + self._periodic[which][0], PERIODIC, which, 0)

    def _only_periodic_left(self) -> bool:
        """No event is due but periodic controllers' (and so nothing would change)."""
        return len(self._events) == self._periodic_queued

    # -- placing --------------------------------------------------------------------------------

    def next_decision(self, until: float | None = None) -> PlacementRequest | None:
        """Run events until a pod needs placing; None when the run is over — or, with `until`,
        when the next event comes after it: the run then stands at exactly `until` (its energy
        and pending time counted to that instant) and can be continued."""
        if self._pending_decision is not None:
            return self._pending_decision
        while not self._finished:
            candidates: list[NodeState] | None = None  # nothing changes while pods fail to fit
            while self._to_schedule:
                index = self._to_schedule.popleft()
                info = self._infos[index]
                if candidates is None:
                    candidates = self.candidate_states()
                feasible = filter_nodes(info, candidates).feasible
                if feasible:
                    self._pending_decision = PlacementRequest(
                        self.pods[index], info, tuple(feasible), self.now, tuple(candidates)
                    )
                    return self._pending_decision
                self._waited.add(index)
                self._waiting.append(index)
            if self._done == len(self.pods) or not self._events:
                self._finished = True
                break
            if until is not None and self._events[0][0] > until:
                self._advance(max(until, self.now))
                return None
            t, kind, _, target, version = heapq.heappop(self._events)
            self._advance(t)
            if kind == ARRIVAL:
                self._arrived += 1
                self.ledger.arrived(target)
                self._to_schedule.append(target)
                continue
            if kind == PERIODIC:
                self._periodic_queued -= 1
                self._periodic[target][1](self)
                if self._to_schedule or not self._only_periodic_left():
                    self._push_periodic(target)
                continue
            if kind == SCAN:
                assert self._autoscaler is not None
                if self._autoscaler.scan(idle=self._only_periodic_left()):
                    self._push(self.now + self._autoscaler.model.scan_interval_s, SCAN, 0, 0)
                continue
            node = self._nodes[target]
            if kind == COMPLETE:
                if version == node.version:
                    self._on_complete(node)
            elif kind == BOOT_DONE:
                self._on_boot_done(node)
            else:
                self._on_power_off(node, version)
        return None

    def place(self, node_name: str) -> None:
        """Place the pod of the pending decision on `node_name` (one of its feasible nodes)."""
        decision = self._pending_decision
        if decision is None:
            raise RuntimeError("no pod is waiting to be placed")
        if node_name not in {s.info.name for s in decision.feasible}:
            raise ValueError(f"node {node_name!r} is not feasible for {decision.info.key}")
        self._pending_decision = None
        node = self._by_name[node_name]
        index = decision.pod.index
        node.requested = node.requested + decision.info.requests
        node.placed_at[index] = self.now
        if node.state == ON:
            self._progress(node)
            self._start_pod(node, index)
            self._reschedule_completion(node)
            self._update_power(node)
            return
        node.pending.append(index)
        node.pending_cpu_cores += decision.info.requests.cpu_millicores / 1000.0
        node.version += 1  # cancels a power-off armed for this node
        if node.state == OFF:
            assert self.power_off is not None
            self.boot(node, self.power_off.boot_seconds, self.power_off.boot_joules)

    def fork(self) -> Simulation:
        """An independent copy of the run as it stands (what-if rollouts: rl/learning/dqn/credit.py).
        The trace, the node specs and the pods' and nodes' descriptions are immutable and
        shared; everything that moves (nodes, events, the autoscaler, telemetry, the ledger and
        the random streams) is copied, so the copy and the original never touch each other."""
        shared: list[object] = [*self.specs, *self.pods, *self._infos, *self.daemonsets]
        shared += [n.info for n in self._nodes] + [n.points for n in self._nodes]
        shared += self._events  # (time, kind, seq, target, version): immutable
        memo: dict[int, object] = {id(x): x for x in shared}
        return copy.deepcopy(self, memo)

    # -- running --------------------------------------------------------------------------------

    @property
    def energy_joules(self) -> float:
        """The cluster's energy from 0 to now."""
        return self.energy.energy_joules

    @property
    def cluster_watts(self) -> float:
        return self.energy.cluster_watts

    @property
    def timeline(self) -> list[tuple[float, float]]:
        """(time, cluster watts) at every change of power (when recorded)."""
        return self.energy.timeline

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def completed(self) -> Sequence[PodOutcome]:
        """Pods finished so far, in finishing order (read-only view)."""
        return tuple(self._outcomes)

    @property
    def completed_count(self) -> int:
        return len(self._outcomes)

    def result(self) -> SimResult:
        for node in self._nodes:
            self.energy.settle(node, self.now)
        return SimResult(
            energy_joules=self.energy.energy_joules,
            end_s=self.now,
            node_energy_joules={n.spec.name: n.energy_joules for n in self._nodes},
            outcomes=sorted(self._outcomes, key=lambda o: o.index),
            unschedulable=len(self._waited),
            never_scheduled=len(self.pods) - self._done,
            boots=self._boots,
            timeline=list(self.energy.timeline),
            energy_lumps=list(self.energy.lumps),
            scale_ups=self.scale_ups,
            scale_downs=self.scale_downs,
            evictions=self.ledger.evictions,
            restarted_pods=self.ledger.restarted_pods,
            deleted_pods=self.ledger.deleted_pods,
            lost_cpu_seconds=self.ledger.lost_cpu_seconds,
            disrupted_workloads=self.ledger.disrupted_workloads,
            energy_split_joules=total_split(self._nodes),
            node_seconds=sum(n.powered_seconds for n in self._nodes),
        )
