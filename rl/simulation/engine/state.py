"""A simulation's state: its nodes and pods, the event queue, the scheduling queues, the
ledgers (energy, pods, telemetry) — the one object the engine's parts read and change.

`Simulation` (rl/simulation/engine/simulator.py) builds one `SimulationState` and hands it to
each of its parts: the node lifecycle (`lifecycle.py`), the actions (`actions.py`) and the
scheduler's view (`view.py`). The state only holds the run and queues events; what happens to
it is the parts'.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Sequence

from rl.simulation.engine.energy import EnergyLedger
from rl.simulation.engine.events import SCAN
from rl.simulation.engine.node import SimNode, nonzero_extra
from rl.simulation.engine.simrecords import PodOutcome, PowerOffModel
from rl.simulation.engine.telemetry import TelemetryModel, TelemetryRecorder
from rl.simulation.engine.workloads import PodLedger, WorkloadModel
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec
from scheduler.domain.model import Resources


class SimulationState:
    """A run's state (module docstring); `autoscaling`: cluster-autoscaler's semantics (False:
    the nodes are always on, or the `power_off` ablation)."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        pods: Sequence[PodSpec],
        power_off: PowerOffModel | None,
        record_timeline: bool,
        autoscaling: bool,
        daemonsets: Sequence[DaemonSetSpec],
        telemetry: TelemetryModel | None,
        rng: random.Random | None,
        missing_telemetry: frozenset[str],
        workloads: WorkloadModel | None,
    ) -> None:
        if not nodes:
            raise ValueError("a simulation needs at least one node")
        if power_off is not None and autoscaling:
            raise ValueError("power_off (visible off nodes) and autoscaler exclude each other")
        self.specs = list(nodes)
        self.pods = list(pods)
        self.power_off = power_off
        self.autoscaling = autoscaling
        self.daemonsets = tuple(daemonsets)
        daemon_infos = [d.pod_info() for d in self.daemonsets]
        self.daemon_requests = sum((i.requests for i in daemon_infos), Resources())
        # kube-scheduler's scoring counts 100 m / 200 MiB for a container without a CPU or
        # memory request (NonZeroRequested): what that adds to the requests, where it does.
        self.daemon_nonzero_extra = sum((nonzero_extra(i) for i in daemon_infos), Resources())
        self.daemon_usage = sum(d.cpu_usage for d in self.daemonsets)
        self.rng = rng or random.Random(0)
        self.now = 0.0
        self.energy = EnergyLedger(record_timeline)
        self.nodes = [SimNode(s, s.node_info(), s.curve.as_points()) for s in self.specs]
        self.by_name = {n.spec.name: n for n in self.nodes}
        self.position = {n.spec.name: i for i, n in enumerate(self.nodes)}
        if len(self.by_name) != len(self.nodes):
            raise ValueError("node names must be unique")
        self.infos = [p.pod_info() for p in self.pods]
        self.nonzero_extra = {
            i: extra
            for i, info in enumerate(self.infos)
            if (extra := nonzero_extra(info)) != Resources()
        }
        self.events: list[tuple[float, int, int, int, int]] = []  # (t, kind, seq, target, version)
        self.seq = 0
        self.to_schedule: deque[int] = deque()
        self.waiting: list[int] = []  # found no feasible node, oldest first
        self.waited: set[int] = set()  # ever waited (counted once as unschedulable)
        # Pods the scheduler found no node for since they (or their replacements) were created:
        # the first failure is the "unschedulable pod" that starts an autoscaler loop.
        self.marked_unschedulable: set[int] = set()
        self.created: dict[int, float] = {}  # a replacement's creation (else the pod's arrival)
        # The autoscaler's next loop (a SCAN event of version `scan_version`, due `scan_due`);
        # loops moved earlier leave stale SCAN events behind, dropped unrun (`drop_stale_scans`).
        self.scan_version = 0
        self.scan_due: float | None = None
        self.stale_scans = 0
        self.start: dict[int, float] = {}  # pod index → its current start
        self.first_start: dict[int, float] = {}
        self.arrived = 0
        # ∫ (pods arrived and not started) dt: pending time, waiting for room or for a boot.
        self.pending_pod_seconds = 0.0
        self.outcomes: list[PodOutcome] = []
        self.done = 0  # pods finished or deleted
        self.boots = 0
        self.scale_ups = 0
        self.scale_downs = 0
        self.ledger = PodLedger(self.pods, workloads or WorkloadModel())
        self.recorder = TelemetryRecorder(
            len(self.nodes),
            telemetry,
            frozenset(self.position[name] for name in missing_telemetry if name in self.position),
        )

    def index(self, node: SimNode) -> int:
        return self.position[node.spec.name]

    # -- events ----------------------------------------------------------------------------------

    def push(self, t: float, kind: int, target: int, version: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, target, version))

    def push_scan(self, t: float) -> None:
        """The autoscaler's next loop at `t` (a loop already due later goes stale)."""
        if self.scan_due is not None:
            self.stale_scans += 1
        self.scan_version += 1
        self.scan_due = t
        self.push(t, SCAN, 0, self.scan_version)

    def drop_stale_scans(self) -> None:
        """Pop the stale SCAN events at the head of the queue, so that they never move the clock."""
        events = self.events
        while events and events[0][1] == SCAN and events[0][4] != self.scan_version:
            heapq.heappop(events)
            self.stale_scans -= 1

    def created_s(self, index: int) -> float:
        """When the pod (or its latest replacement) was created."""
        return self.created.get(index, self.pods[index].submit_s)

    def advance(self, t: float) -> None:
        if t < self.now:
            raise AssertionError(f"time went backwards: {t} < {self.now}")
        self.energy.advance(t - self.now)
        self.pending_pod_seconds += (self.arrived - len(self.start)) * (t - self.now)
        self.now = t
