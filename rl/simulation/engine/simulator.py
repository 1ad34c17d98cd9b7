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
* Evictions (cluster-autoscaler draining a node, rl/simulation/autoscaler/scaledown.py): what happens to an evicted pod
  depends on its owner (rl/simulation/engine/workloads.py, `PodLedger`): replaced with its remaining lifetime,
  restarted from scratch, or deleted; a replacement is Pending from the eviction and starts
  with `WorkloadModel.pod_startup_s`. A node being drained takes no new pods.
* Three power regimes:
  - always on (neither `autoscaler` nor `power_off`): every node is on from 0 to the end;
  - `autoscaler` (rl/simulation/autoscaler/scan.py): cluster-autoscaler's semantics. Only powered-on, ready
    nodes are candidates; the autoscaler loops when its trigger says (every `scan_interval_s`,
    at once after a productive loop, and when a pod first finds no node: trigger.py), boots
    nodes of the group its expander picks for the Pending pods and powers off unneeded nodes;
  - `power_off` (the `--power-off-visible` ablation, the old model): powered-off nodes stay
    feasible candidates, placing a pod on one boots it, and a node empty for `after_seconds`
    powers off. No real scheduler sees a powered-off node; this is kept to measure what that
    assumption was worth.
* Telemetry (rl/simulation/engine/telemetry.py): policies see each node's utilization and watts as the scheduler's
  telemetry store holds them — the agents' latest sample as of the store's last refresh — plus
  the CPU requested by pods placed since that sample (`cpu_since_sample_cores`). `telemetry=None`
  is the perfect, instantaneous ablation.

The run ends when the last pod finishes; energy is integrated from 0 to that time.

This module is the event engine (the heap of events, the loop and its clock, placing a pod, the
periodic controllers, forking a run, the result). A `Simulation` holds one state object and
its parts, each over that state (each module imports only those before it): the run's state
and event queue (`state`: `state.py`, event kinds in `events.py`), a node's life (`lifecycle`:
`lifecycle.py`: pods start, progress and finish, boots, power), what the autoscaler and
controllers do (`actions`: `actions.py`: boot, evict, remove, taint — the `ClusterAPI` of
`node.py`) and the scheduler's view (`view`: `view.py`: `NodeState`s, candidates);
beside them a node (`node.py`: `SimNode`), the value types (`simrecords.py`:
`PlacementRequest`, outcomes, the result) and the energy ledgers (`energy.py`). The autoscaler
(rl/simulation/autoscaler/) is given as a factory over the actions and driven through
`ScaleLoop`; the engine never imports it. What a policy is (`Policy`, and `AttachingPolicy`, one
that reads the run itself) is here.
`Simulation.next_decision()` / `place()` expose the decisions one by one (the run loop of
rl/evaluation/benchmark.py and the gymnasium env drive them).
"""

from __future__ import annotations

import copy
import heapq
import random
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from rl.simulation.engine.actions import ClusterActions
from rl.simulation.engine.energy import total_split
from rl.simulation.engine.events import ARRIVAL, BOOT_DONE, COMPLETE, PERIODIC, SCAN
from rl.simulation.engine.lifecycle import NodeLifecycle
from rl.simulation.engine.node import BOOTING, OFF, ON, ClusterAPI, ScaleLoop, SimNode
from rl.simulation.engine.simrecords import (
    PlacementRequest,
    PodOutcome,
    PowerOffModel,
    SimResult,
    boot_joules_for,
)
from rl.simulation.engine.state import SimulationState
from rl.simulation.engine.telemetry import TelemetryModel
from rl.simulation.engine.view import SchedulerView
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec
from scheduler.domain.filters import filter_nodes
from scheduler.domain.model import NodeState, PodInfo

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


class Policy(Protocol):
    """Chooses a node for a pod among the feasible ones (all of which fit its requests).
    `candidates`: every node the scheduler sees, the feasible ones among them (a scheduler that
    samples, as kube-scheduler's percentageOfNodesToScore, needs them); empty when unknown."""

    name: str

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None: ...

    def choose(
        self,
        pod: PodInfo,
        feasible: Sequence[NodeState],
        now: float,
        candidates: Sequence[NodeState] = (),
    ) -> str: ...


@runtime_checkable
class AttachingPolicy(Policy, Protocol):
    """A policy that reads more of the run than its requests (a learned policy: the nodes'
    workloads; a policy with controllers: starts them): `attach(sim)` before the first pod."""

    def attach(self, sim: Simulation) -> None: ...


# What starts a run's autoscaler over its actions (rl/simulation/autoscaler/scan.py: `autoscaling`).
AutoscalerFactory = Callable[[ClusterAPI], ScaleLoop]


class Simulation:
    """One run of a trace on a cluster. Single use. Its state (`SimulationState`,
    rl/simulation/engine/state.py) holds the nodes, pods and how the cluster behaves;
    `autoscaler` starts cluster-autoscaler over the run's actions (None: the nodes are always
    on, or the `power_off` ablation)."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        pods: Sequence[PodSpec],
        power_off: PowerOffModel | None = None,
        record_timeline: bool = True,
        autoscaler: AutoscalerFactory | None = None,
        daemonsets: Sequence[DaemonSetSpec] = (),
        telemetry: TelemetryModel | None = None,
        rng: random.Random | None = None,
        missing_telemetry: frozenset[str] = frozenset(),
        workloads: WorkloadModel | None = None,
    ) -> None:
        self.state = SimulationState(
            nodes, pods, power_off, record_timeline, autoscaler is not None, daemonsets,
            telemetry, rng, missing_telemetry, workloads,
        )
        self.lifecycle = NodeLifecycle(self.state)
        self.actions = ClusterActions(self.state, self.lifecycle)
        self.view = SchedulerView(self.state)
        self._periodic: list[tuple[float, Callable[[Simulation], None]]] = []
        self._periodic_queued = 0  # PERIODIC events in the heap
        self._pending_decision: PlacementRequest | None = None
        self._finished = False
        self.autoscaler: ScaleLoop | None = None
        s = self.state
        for i, pod in enumerate(s.pods):
            s.push(pod.submit_s, ARRIVAL, i, 0)
        if autoscaler is not None:
            self.autoscaler = autoscaler(self.actions)
            s.push_scan(0.0)
        for node in s.nodes:
            if autoscaler is None or node.spec.initially_on:
                self.lifecycle.make_ready(node)
            else:
                node.state = OFF
                self.lifecycle.set_power(node, node.spec.standby_watts)
            self.lifecycle.arm_power_off(node)

    # -- what every caller reads of the run -----------------------------------------------------

    @property
    def now(self) -> float:
        return self.state.now

    @property
    def pods(self) -> Sequence[PodSpec]:
        return self.state.pods

    @property
    def nodes(self) -> Sequence[SimNode]:
        return self.state.nodes

    def pod_info(self, index: int) -> PodInfo:
        return self.state.infos[index]

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
        self.state.push(self.state.now + self._periodic[which][0], PERIODIC, which, 0)

    def _only_periodic_left(self) -> bool:
        """No event is due but periodic controllers' (and so nothing would change)."""
        return len(self.state.events) == self._periodic_queued + self.state.stale_scans

    def _wake_autoscaler(self) -> None:
        """A pod turned unschedulable: the autoscaler's next loop now, if that starts one
        (rl/simulation/autoscaler/trigger.py) and none is due now already."""
        s, autoscaler = self.state, self.autoscaler
        if autoscaler is None or not autoscaler.wakes_on_unschedulable:
            return
        if s.scan_due is None or s.scan_due > s.now:
            s.push_scan(s.now)

    # -- placing --------------------------------------------------------------------------------

    def next_decision(self, until: float | None = None) -> PlacementRequest | None:
        """Run events until a pod needs placing; None when the run is over — or, with `until`,
        when the next event comes after it: the run then stands at exactly `until` (its energy
        and pending time counted to that instant) and can be continued."""
        if self._pending_decision is not None:
            return self._pending_decision
        s, lifecycle = self.state, self.lifecycle
        while not self._finished:
            candidates: list[NodeState] | None = None  # nothing changes while pods fail to fit
            turned_unschedulable = False
            while s.to_schedule:
                index = s.to_schedule.popleft()
                info = s.infos[index]
                if candidates is None:
                    candidates = self.view.candidate_states()
                feasible = filter_nodes(info, candidates).feasible
                if feasible:
                    self._pending_decision = PlacementRequest(
                        s.pods[index], info, tuple(feasible), s.now, tuple(candidates)
                    )
                    return self._pending_decision
                s.waited.add(index)
                s.waiting.append(index)
                if index not in s.marked_unschedulable:
                    s.marked_unschedulable.add(index)
                    turned_unschedulable = True
            if turned_unschedulable:
                self._wake_autoscaler()
            s.drop_stale_scans()
            if s.done == len(s.pods) or not s.events:
                self._finished = True
                break
            if until is not None and s.events[0][0] > until:
                s.advance(max(until, s.now))
                return None
            t, kind, _, target, version = heapq.heappop(s.events)
            s.advance(t)
            if kind == ARRIVAL:
                s.arrived += 1
                s.ledger.arrived(target)
                s.to_schedule.append(target)
                continue
            if kind == PERIODIC:
                self._periodic_queued -= 1
                self._periodic[target][1](self)
                if s.to_schedule or not self._only_periodic_left():
                    self._push_periodic(target)
                continue
            if kind == SCAN:  # the current loop: drop_stale_scans took any other
                assert self.autoscaler is not None
                s.scan_due = None
                next_s = self.autoscaler.scan(idle=self._only_periodic_left())
                if next_s is not None:
                    s.push_scan(s.now + next_s)
                continue
            node = s.nodes[target]
            if kind == COMPLETE:
                if version == node.version:
                    lifecycle.on_complete(node)
            elif kind == BOOT_DONE:
                lifecycle.on_boot_done(node)
            else:
                lifecycle.on_power_off(node, version)
        return None

    def place(self, node_name: str) -> None:
        """Place the pod of the pending decision on `node_name` (one of its feasible nodes)."""
        decision = self._pending_decision
        if decision is None:
            raise RuntimeError("no pod is waiting to be placed")
        if node_name not in {f.info.name for f in decision.feasible}:
            raise ValueError(f"node {node_name!r} is not feasible for {decision.info.key}")
        self._pending_decision = None
        s, lifecycle = self.state, self.lifecycle
        node = s.by_name[node_name]
        index = decision.pod.index
        node.requested = node.requested + decision.info.requests
        node.placed_at[index] = s.now
        if node.state == ON:
            lifecycle.progress(node)
            lifecycle.start_pod(node, index)
            lifecycle.reschedule_completion(node)
            lifecycle.update_power(node)
            return
        node.pending.append(index)
        node.pending_cpu_cores += decision.info.requests.cpu_millicores / 1000.0
        node.version += 1  # cancels a power-off armed for this node
        if node.state == OFF:
            assert s.power_off is not None
            self.actions.boot(node, s.power_off.boot_seconds, s.power_off.boot_joules)

    def fork(self) -> Simulation:
        """An independent copy of the run as it stands (what-if rollouts: rl/learning/dqn/credit.py).
        The trace, the node specs and the pods' and nodes' descriptions are immutable and
        shared; everything that moves (nodes, events, the autoscaler, telemetry, the ledger and
        the random streams) is copied, so the copy and the original never touch each other."""
        s = self.state
        shared: list[object] = [*s.specs, *s.pods, *s.infos, *s.daemonsets]
        shared += [n.info for n in s.nodes] + [n.points for n in s.nodes]
        shared += s.events  # (time, kind, seq, target, version): immutable
        memo: dict[int, object] = {id(x): x for x in shared}
        return copy.deepcopy(self, memo)

    # -- running --------------------------------------------------------------------------------

    @property
    def energy_joules(self) -> float:
        """The cluster's energy from 0 to now."""
        return self.state.energy.energy_joules

    @property
    def cluster_watts(self) -> float:
        return self.state.energy.cluster_watts

    @property
    def timeline(self) -> list[tuple[float, float]]:
        """(time, cluster watts) at every change of power (when recorded)."""
        return self.state.energy.timeline

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def completed(self) -> Sequence[PodOutcome]:
        """Pods finished so far, in finishing order (read-only view)."""
        return tuple(self.state.outcomes)

    @property
    def completed_count(self) -> int:
        return len(self.state.outcomes)

    def result(self) -> SimResult:
        s = self.state
        for node in s.nodes:
            s.energy.settle(node, s.now)
        return SimResult(
            energy_joules=s.energy.energy_joules,
            end_s=s.now,
            node_energy_joules={n.spec.name: n.energy_joules for n in s.nodes},
            outcomes=sorted(s.outcomes, key=lambda o: o.index),
            unschedulable=len(s.waited),
            never_scheduled=len(s.pods) - s.done,
            boots=s.boots,
            timeline=list(s.energy.timeline),
            energy_lumps=list(s.energy.lumps),
            scale_ups=s.scale_ups,
            scale_downs=s.scale_downs,
            evictions=s.ledger.evictions,
            restarted_pods=s.ledger.restarted_pods,
            deleted_pods=s.ledger.deleted_pods,
            lost_cpu_seconds=s.ledger.lost_cpu_seconds,
            disrupted_workloads=s.ledger.disrupted_workloads,
            energy_split_joules=total_split(s.nodes),
            node_seconds=sum(n.powered_seconds for n in s.nodes),
        )
