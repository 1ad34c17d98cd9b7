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
  (`scheduler.filters.filter_nodes`: pods, cpu and memory requests vs allocatable). A pod that
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
* Telemetry (rl/simulation/sampling.py): policies see each node's utilization and watts as the scheduler's
  telemetry store holds them — the agents' latest sample as of the store's last refresh — plus
  the CPU requested by pods placed since that sample (`cpu_since_sample_cores`). `telemetry=None`
  is the perfect, instantaneous ablation.

The run ends when the last pod finishes; energy is integrated from 0 to that time.
`Simulation.next_decision()` / `place()` expose the decisions one by one (the gymnasium env uses
them); `Simulation.run(policy)` drives them with a policy.
"""

from __future__ import annotations

import copy
import heapq
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from rl.simulation.sampling import TelemetryModel, TelemetryRecorder
from rl.simulation.scenario import DaemonSetSpec, NodeSpec, PodSpec
from rl.simulation.simrecords import (  # noqa: F401  (re-exported: the simulator's value types)
    PodOutcome,
    PowerOffModel,
    SimResult,
    boot_joules_for,
)
from rl.simulation.workloads import DELETED, PodLedger, WorkloadModel
from scheduler.features_v2 import NodeWorkload
from scheduler.filters import filter_nodes
from scheduler.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources

if TYPE_CHECKING:
    from rl.simulation.autoscaler import Autoscaler, AutoscalerModel

ON = "on"
OFF = "off"
BOOTING = "booting"

# Events at the same instant: finishing pods free room before anything else looks at it, a node
# due to power off at the instant a pod arrives stays on for it, and the autoscaler's scan sees
# the pods that arrived at its instant as Pending once the scheduler has tried them.
_COMPLETE = 0
_BOOT_DONE = 1
_ARRIVAL = 2
_POWER_OFF = 3
_SCAN = 4
_PERIODIC = 5  # a controller that acts on the cluster every interval (`Simulation.every`)

# A pod whose remaining run time is below this is finished (float round-off of rate × time).
_DONE_EPSILON_SECONDS = 1e-9


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


def _nonzero_extra(info: PodInfo) -> Resources:
    """What kube-scheduler's scoring adds to a pod's requests (`PodInfo.nonzero_requests`)."""
    if info.nonzero_requests is None:
        return Resources()
    return info.nonzero_requests - info.requests


@dataclass
class _Node:
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
    last_energy_s: float = 0.0
    last_progress_s: float = 0.0
    version: int = 0  # bumps on every change; stale completion/power-off events are skipped
    boots: int = 0
    deleting: bool = False  # cluster-autoscaler drains it (ToBeDeleted taint: no new pods)
    tainted: bool = False  # a NoSchedule taint of another controller (the energy rebalancer's)
    empty_since_s: float = 0.0  # when its last non-DaemonSet pod left (or it became ready)
    ready_since_s: float = 0.0  # when it last became ready (feature schema v2)

    @property
    def cores(self) -> float:
        return self.spec.cpu_cores

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


@dataclass(frozen=True)
class PlacementRequest:
    """A pod waiting to be placed, and the feasible nodes (as the scheduler would see them)
    among `candidates`, every node the scheduler sees."""

    pod: PodSpec
    info: PodInfo
    feasible: tuple[NodeState, ...]
    now: float
    candidates: tuple[NodeState, ...] = ()


class Simulation:
    """One run of a trace on a cluster. Single use."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        pods: Sequence[PodSpec],
        power_off: PowerOffModel | None = None,
        record_timeline: bool = True,
        autoscaler: AutoscalerModel | None = None,
        daemonsets: Sequence[DaemonSetSpec] = (),
        telemetry: TelemetryModel | None = None,
        rng: random.Random | None = None,
        missing_telemetry: frozenset[str] = frozenset(),
        workloads: WorkloadModel | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a simulation needs at least one node")
        if power_off is not None and autoscaler is not None:
            raise ValueError("power_off (visible off nodes) and autoscaler exclude each other")
        self.specs = list(nodes)
        self.pods = list(pods)
        self.power_off = power_off
        self.autoscaler_model = autoscaler
        self.daemonsets = tuple(daemonsets)
        daemon_infos = [d.pod_info() for d in self.daemonsets]
        self._daemon_requests = sum((i.requests for i in daemon_infos), Resources())
        # kube-scheduler's scoring counts 100 m / 200 MiB for a container without a CPU or
        # memory request (NonZeroRequested): what that adds to the requests, where it does.
        self._daemon_nonzero_extra = sum((_nonzero_extra(i) for i in daemon_infos), Resources())
        self._daemon_usage = sum(d.cpu_usage for d in self.daemonsets)
        self.record_timeline = record_timeline
        self.rng = rng or random.Random(0)
        self.now = 0.0
        self.energy_joules = 0.0
        self.cluster_watts = 0.0
        self.timeline: list[tuple[float, float]] = []
        self._nodes = [_Node(s, s.node_info(), s.curve.as_points()) for s in self.specs]
        self._by_name = {n.spec.name: n for n in self._nodes}
        self._position = {n.spec.name: i for i, n in enumerate(self._nodes)}
        if len(self._by_name) != len(self._nodes):
            raise ValueError("node names must be unique")
        self._infos = [p.pod_info() for p in self.pods]
        self._nonzero_extra = {
            i: extra
            for i, info in enumerate(self._infos)
            if (extra := _nonzero_extra(info)) != Resources()
        }
        self._events: list[tuple[float, int, int, int, int]] = []  # (t, kind, seq, target, version)
        self._seq = 0
        self._to_schedule: deque[int] = deque()
        self._waiting: list[int] = []
        self._waited: set[int] = set()
        self._start: dict[int, float] = {}
        self._first_start: dict[int, float] = {}
        self._arrived = 0
        # ∫ (pods arrived and not started) dt: pending time, waiting for room or for a boot.
        self.pending_pod_seconds = 0.0
        self._outcomes: list[PodOutcome] = []
        self._done = 0
        self._pending_decision: PlacementRequest | None = None
        self._finished = False
        self._boots = 0
        self.scale_ups = 0
        self.scale_downs = 0
        self.ledger = PodLedger(self.pods, workloads or WorkloadModel())
        self.recorder = TelemetryRecorder(
            len(self._nodes),
            telemetry,
            frozenset(self._position[name] for name in missing_telemetry if name in self._position),
        )
        for i, pod in enumerate(self.pods):
            self._push(pod.submit_s, _ARRIVAL, i, 0)
        self._periodic: list[tuple[float, Callable[[Simulation], None]]] = []
        self._periodic_queued = 0  # _PERIODIC events in the heap
        self._autoscaler: Autoscaler | None = None
        if autoscaler is not None:
            from rl.simulation.autoscaler import Autoscaler

            self._autoscaler = Autoscaler(self, autoscaler)
            self._push(0.0, _SCAN, 0, 0)
        for node in self._nodes:
            if autoscaler is None or node.spec.initially_on:
                self._make_ready(node)
            else:
                node.state = OFF
                self._set_power(node, node.spec.standby_watts)
            self._arm_power_off(node)

    # -- events ----------------------------------------------------------------------------------

    def _push(self, t: float, kind: int, target: int, version: int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, kind, self._seq, target, version))

    def _advance(self, t: float) -> None:
        if t < self.now:
            raise AssertionError(f"time went backwards: {t} < {self.now}")
        self.energy_joules += self.cluster_watts * (t - self.now)
        self.pending_pod_seconds += (self._arrived - len(self._start)) * (t - self.now)
        self.now = t

    # -- per-node bookkeeping --------------------------------------------------------------------

    def _settle_energy(self, node: _Node) -> None:
        node.energy_joules += node.power_watts * (self.now - node.last_energy_s)
        node.last_energy_s = self.now

    def _set_power(self, node: _Node, watts: float) -> None:
        self._settle_energy(node)
        node.power_watts = watts
        # Summed afresh rather than updated by differences, so no round-off accumulates.
        self.cluster_watts = sum(n.power_watts for n in self._nodes)
        self.recorder.record(self._index(node), self.now, node.state == ON, node.utilization, watts)
        if self.record_timeline:
            if self.timeline and self.timeline[-1][0] == self.now:
                self.timeline[-1] = (self.now, self.cluster_watts)
            else:
                self.timeline.append((self.now, self.cluster_watts))

    def _progress(self, node: _Node) -> None:
        """Advance the remaining work of the node's running pods to now."""
        elapsed = self.now - node.last_progress_s
        if elapsed > 0 and node.running:
            done = node.rate * elapsed
            for index in node.running:
                node.running[index] -= done
        node.last_progress_s = self.now

    def _reschedule_completion(self, node: _Node) -> None:
        node.version += 1
        if node.running:
            soonest = min(node.running.values())
            self._push(
                self.now + max(0.0, soonest) / node.rate, _COMPLETE, self._index(node), node.version
            )

    def _index(self, node: _Node) -> int:
        return self._position[node.spec.name]

    def _update_power(self, node: _Node) -> None:
        if node.state == ON:
            self._set_power(node, node.spec.curve.watts(node.utilization))

    def _arm_power_off(self, node: _Node) -> None:
        if (
            self.power_off is not None
            and node.state == ON
            and node.empty
            and not node.spec.always_on
        ):
            self._push(
                self.now + self.power_off.after_seconds, _POWER_OFF, self._index(node), node.version
            )

    def _start_pod(self, node: _Node, index: int) -> None:
        pod = self.pods[index]
        node.running[index] = self.ledger.started(index, self.now)
        node.usage_cores += pod.cpu_usage
        self._start[index] = self.now
        self._first_start.setdefault(index, self.now)

    def _make_ready(self, node: _Node) -> None:
        """The node is on and ready: its DaemonSet pods start."""
        node.state = ON
        node.last_progress_s = self.now
        node.daemon_pods = len(self.daemonsets)
        node.requested = node.requested + self._daemon_requests
        node.usage_cores += self._daemon_usage
        node.empty_since_s = self.now
        node.ready_since_s = self.now
        self._update_power(node)

    # -- event handlers --------------------------------------------------------------------------

    def _on_complete(self, node: _Node) -> None:
        if not node.running:
            return
        self._progress(node)
        # The event was due for the pod with the least work left: it (and any pod within
        # round-off of it) is done, so every completion event makes progress.
        soonest = min(node.running.values())
        cutoff = soonest + _DONE_EPSILON_SECONDS * node.rate
        finished = [i for i, left in node.running.items() if left <= cutoff]
        for index in finished:
            del node.running[index]
            del node.placed_at[index]
            pod = self.pods[index]
            node.usage_cores -= pod.cpu_usage
            node.requested = node.requested - self._infos[index].requests
            self.ledger.finished(index)
            self._outcomes.append(
                PodOutcome(
                    index=index,
                    node=node.spec.name,
                    submit_s=pod.submit_s,
                    start_s=self._start[index],
                    finish_s=self.now,
                    duration_s=pod.duration_s,
                    waited=index in self._waited,
                    first_start_s=self._first_start[index],
                )
            )
            self._done += 1
        self._after_removal(node)
        self._arm_power_off(node)
        if finished:
            self._retry_waiting()

    def _after_removal(self, node: _Node) -> None:
        if not node.running:
            # No float residue on a node left with its DaemonSet pods only.
            node.usage_cores = self._daemon_usage if node.daemon_pods else 0.0
            node.empty_since_s = self.now
        self._reschedule_completion(node)
        self._update_power(node)

    def _retry_waiting(self) -> None:
        """Room was freed or a node became ready: every waiting pod gets another try, oldest
        first."""
        if self._waiting:
            self._to_schedule.extend(self._waiting)
            self._waiting = []

    def _on_boot_done(self, node: _Node) -> None:
        self._make_ready(node)
        for index in node.pending:
            self._start_pod(node, index)
        node.pending = []
        node.pending_cpu_cores = 0.0
        self._reschedule_completion(node)
        self._update_power(node)
        self._arm_power_off(node)
        self._retry_waiting()

    def _on_power_off(self, node: _Node, version: int) -> None:
        if version != node.version or node.state != ON or not node.empty:
            return
        self.power_down(node)

    # -- what the autoscaler does (rl/simulation/autoscaler.py) ---------------------------------------------

    @property
    def nodes(self) -> Sequence[_Node]:
        return self._nodes

    @property
    def autoscaler(self) -> Autoscaler | None:
        return self._autoscaler

    @property
    def waiting(self) -> Sequence[int]:
        """Pending pods (found no feasible node), oldest first."""
        return tuple(self._waiting)

    def pod_info(self, index: int) -> PodInfo:
        return self._infos[index]

    @property
    def daemon_requests(self) -> Resources:
        return self._daemon_requests

    def boot(self, node: _Node, boot_seconds: float, boot_joules: float | None) -> None:
        """Power a node on: `boot_seconds` at boot_joules / boot_seconds watts, then ready."""
        node.state = BOOTING
        node.boots += 1
        self._boots += 1
        node.version += 1  # cancels a power-off armed for this node
        joules = boot_joules_for(node.spec, boot_seconds, boot_joules)
        if boot_seconds <= 0:
            self._settle_energy(node)
            node.energy_joules += joules
            self.energy_joules += joules
            self._on_boot_done(node)
            return
        self._set_power(node, joules / boot_seconds)
        self._push(self.now + boot_seconds, _BOOT_DONE, self._index(node), node.version)

    def power_down(self, node: _Node) -> None:
        """Power a node off; its DaemonSet pods stop with it."""
        node.state = OFF
        node.deleting = False
        node.tainted = False
        node.version += 1
        if node.daemon_pods:
            node.requested = node.requested - self._daemon_requests
        node.daemon_pods = 0
        node.usage_cores = 0.0
        self._set_power(node, node.spec.standby_watts)

    def evict(self, node: _Node, index: int) -> str:
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

    def remove_node(self, node: _Node) -> None:
        """Delete a node the autoscaler emptied: pods still on it (the trace's DaemonSet pods)
        go with it, and it powers off."""
        for index in sorted(node.running):
            self.evict(node, index)
        self.power_down(node)

    def pdb_room(self, workload: str | None) -> int | None:
        """The workload's PDB's disruptions allowed now (None without a PDB)."""
        return self.ledger.pdb_room(workload, self.now)

    def request_eviction(self, node: _Node, index: int) -> bool:
        """The eviction API (policy/v1): it refuses a pod whose PodDisruptionBudget allows no
        disruption now; otherwise the pod is evicted (`evict`). Whether it was."""
        room = self.pdb_room(self.pods[index].workload)
        if room is not None and room < 1:
            return False
        self.evict(node, index)
        return True

    def taint(self, node: _Node, on: bool) -> None:
        """Put on (or take off) a NoSchedule taint: no new pod goes to the node; its pods stay,
        and cluster-autoscaler may still remove it (the rebalancer's taint on a node it empties).
        Powering off takes it off."""
        node.tainted = on and node.state == ON

    def every(self, interval_s: float, act: Callable[[Simulation], None]) -> None:
        """Run `act(self)` every `interval_s` from `interval_s` on, while anything else still
        happens (a controller such as a descheduler or the rebalancer)."""
        if not interval_s > 0:
            raise ValueError("a periodic controller's interval must be > 0")
        self._periodic.append((interval_s, act))
        self._push_periodic(len(self._periodic) - 1)

    def _push_periodic(self, which: int) -> None:
        self._periodic_queued += 1
        self._push(self.now + self._periodic[which][0], _PERIODIC, which, 0)

    def _only_periodic_left(self) -> bool:
        """No event is due but periodic controllers' (and so nothing would change)."""
        return len(self._events) == self._periodic_queued

    # -- decisions ------------------------------------------------------------------------------

    def node_state(self, node: _Node) -> NodeState:
        telemetry, since = self.recorder.view(
            self._index(node), node.spec.name, node.cores, node.points, self.now,
            node.placed_at, self._infos, node.pending_cpu_cores,
        )
        return NodeState(
            info=node.info,
            requested=node.requested,
            telemetry=telemetry,
            cpu_since_sample_cores=since,
            pod_count=len(node.running) + len(node.pending) + node.daemon_pods,
            daemon_pod_count=node.daemon_pods,
            pods_since_sample=self._pods_since_sample(node, telemetry),
            nonzero_requested=self._nonzero_requested(node),
        )

    def _nonzero_requested(self, node: _Node) -> Resources:
        """kube-scheduler's NonZeroRequested of the node (its scoring's view of the requests)."""
        total = node.requested
        if node.daemon_pods:
            total = total + self._daemon_nonzero_extra
        if self._nonzero_extra:
            for index in node.placed_at:
                extra = self._nonzero_extra.get(index)
                if extra is not None:
                    total = total + extra
        return total

    def _pods_since_sample(
        self, node: _Node, telemetry: NodeTelemetry | None
    ) -> tuple[PodInfo, ...]:
        """The pods behind `cpu_since_sample_cores` (TargetLoadPacking predicts each): those
        placed after the sample, or with fresh samples (the ablation) those waiting for a boot."""
        if telemetry is None:
            return ()
        if self.recorder.model is None:
            return tuple(self._infos[i] for i in node.pending)
        cutoff = telemetry.sample_time
        return tuple(self._infos[i] for i, t in node.placed_at.items() if t > cutoff)

    def node_states(self) -> list[NodeState]:
        return [self.node_state(n) for n in self._nodes]

    def candidate_states(self) -> list[NodeState]:
        """The nodes the scheduler sees: under autoscaler semantics only powered-on, ready
        ones not being drained; in the visible-power-off ablation and when always on, every
        node; never a tainted one (`taint`)."""
        if self._autoscaler is None:
            return [self.node_state(n) for n in self._nodes if not n.tainted]
        return [
            self.node_state(n)
            for n in self._nodes
            if n.state == ON and not n.deleting and not n.tainted
        ]

    def workloads(self) -> dict[str, NodeWorkload]:
        """Per node, its pods' placement times and owners, when it became ready (None while off
        or booting) and whether it sits empty in the power-off window (feature schema v2)."""
        powers_off = self.power_off is not None or self._autoscaler is not None
        out = {}
        for node in self._nodes:
            indices = list(node.running) + node.pending
            on = node.state == ON
            out[node.spec.name] = NodeWorkload(
                pod_start_times=tuple(node.placed_at[i] for i in indices),
                job_pods=sum(1 for i in indices if self.pods[i].owner_kind == "Job"),
                ready_since=node.ready_since_s if on else None,
                in_scale_down_window=(
                    on and powers_off and node.empty and not node.spec.always_on
                ),
            )
        return out

    def node_watts(self, name: str) -> float:
        """The node's power now (exact, as RAPL would measure it; the decision log's outcomes)."""
        return self._by_name[name].power_watts

    def power_state(self, name: str) -> str:
        return self._by_name[name].state

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
            if kind == _ARRIVAL:
                self._arrived += 1
                self.ledger.arrived(target)
                self._to_schedule.append(target)
                continue
            if kind == _PERIODIC:
                self._periodic_queued -= 1
                self._periodic[target][1](self)
                if self._to_schedule or not self._only_periodic_left():
                    self._push_periodic(target)
                continue
            if kind == _SCAN:
                assert self._autoscaler is not None
                if self._autoscaler.scan(idle=self._only_periodic_left()):
                    self._push(self.now + self._autoscaler.model.scan_interval_s, _SCAN, 0, 0)
                continue
            node = self._nodes[target]
            if kind == _COMPLETE:
                if version == node.version:
                    self._on_complete(node)
            elif kind == _BOOT_DONE:
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

    def run(self, policy: Policy, rng: random.Random) -> SimResult:
        policy.reset(self.specs, rng)
        while (decision := self.next_decision()) is not None:
            self.place(
                policy.choose(decision.info, decision.feasible, decision.now, decision.candidates)
            )
        return self.result()

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def completed(self) -> Sequence[PodOutcome]:
        """Pods finished so far, in finishing order (read-only view)."""
        return tuple(self._outcomes)

    def completed_since(self, start: int) -> list[PodOutcome]:
        """Pods finished after the first `start` of them, in finishing order."""
        return self._outcomes[start:]

    @property
    def completed_count(self) -> int:
        return len(self._outcomes)

    def result(self) -> SimResult:
        for node in self._nodes:
            self._settle_energy(node)
        return SimResult(
            energy_joules=self.energy_joules,
            end_s=self.now,
            node_energy_joules={n.spec.name: n.energy_joules for n in self._nodes},
            outcomes=sorted(self._outcomes, key=lambda o: o.index),
            unschedulable=len(self._waited),
            never_scheduled=len(self.pods) - self._done,
            boots=self._boots,
            timeline=list(self.timeline),
            scale_ups=self.scale_ups,
            scale_downs=self.scale_downs,
            evictions=self.ledger.evictions,
            restarted_pods=self.ledger.restarted_pods,
            deleted_pods=self.ledger.deleted_pods,
            lost_cpu_seconds=self.ledger.lost_cpu_seconds,
            disrupted_workloads=self.ledger.disrupted_workloads,
        )
