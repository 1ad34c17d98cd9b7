"""A simulation's state: its nodes and pods, the event queue, the scheduling queues, the
ledgers (energy, pods, telemetry) — what every part of `Simulation` reads and changes.

`SimulationState` is the base of `Simulation` (rl/simulation/simulator.py) and its parts
(`lifecycle.py`, `view.py`, `actions.py`); it only holds the state and queues events. Its
constructor is `Simulation`'s (one parameter list): it builds the state, then calls `_begin()`,
where the engine queues the run's first events.
"""

from __future__ import annotations

import heapq
import random
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence

from rl.simulation.autoscaler_model import AutoscalerModel
from rl.simulation.energy import EnergyLedger
from rl.simulation.node import SimNode, nonzero_extra
from rl.simulation.scenario import DaemonSetSpec, NodeSpec, PodSpec
from rl.simulation.simrecords import PlacementRequest, PodOutcome, PowerOffModel
from rl.simulation.telemetry import TelemetryModel, TelemetryRecorder
from rl.simulation.workloads import PodLedger, WorkloadModel
from scheduler.domain.model import Resources


class SimulationState(ABC):
    """A run's state (module docstring); `autoscaler`: cluster-autoscaler's semantics (None: the
    nodes are always on, or the `power_off` ablation)."""

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
        self._daemon_nonzero_extra = sum((nonzero_extra(i) for i in daemon_infos), Resources())
        self._daemon_usage = sum(d.cpu_usage for d in self.daemonsets)
        self.rng = rng or random.Random(0)
        self.now = 0.0
        self.energy = EnergyLedger(record_timeline)
        self._nodes = [SimNode(s, s.node_info(), s.curve.as_points()) for s in self.specs]
        self._by_name = {n.spec.name: n for n in self._nodes}
        self._position = {n.spec.name: i for i, n in enumerate(self._nodes)}
        if len(self._by_name) != len(self._nodes):
            raise ValueError("node names must be unique")
        self._infos = [p.pod_info() for p in self.pods]
        self._nonzero_extra = {
            i: extra
            for i, info in enumerate(self._infos)
            if (extra := nonzero_extra(info)) != Resources()
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
        self._begin()

    @abstractmethod
    def _begin(self) -> None:
        """Queue the run's first events (the engine, `Simulation`, does)."""

    def _index(self, node: SimNode) -> int:
        return self._position[node.spec.name]

    # -- events ----------------------------------------------------------------------------------

    def _push(self, t: float, kind: int, target: int, version: int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, kind, self._seq, target, version))

    def _advance(self, t: float) -> None:
        if t < self.now:
            raise AssertionError(f"time went backwards: {t} < {self.now}")
        self.energy.advance(t - self.now)
        self.pending_pod_seconds += (self._arrived - len(self._start)) * (t - self.now)
        self.now = t
