"""Feature schema v3 in the simulator: the nodes' workloads with what v3 adds (the predicted end
of their pods, the autoscaler's marks) and a lifetime predictor that learns, as a cluster's
scheduler does, from the pods that finish.

`sim_lifetimes(sim)` holds one `scheduler.lifetimes.LifetimePredictor` (`SimLifetimes(sim, source)`
any `LifetimeSource`); `update()` teaches it
every pod that finished since the last call (placement to finish; a pod evicted and replaced
counts from its last placement: what the cluster cache would see), never the trace's
durations. `workloads()` is `Simulation.workloads()` with, per node:

* `pods_end_at`: the latest predicted end (`placed_at + predicted remaining at its age`) of its
  non-DaemonSet pods (now when it holds none), predicted when the node's pods last changed —
  as the `learned` plugin reads a node's workload from the cluster cache again only when the
  node changes — and never before now;
* the autoscaler's marks, under autoscaler semantics: `deletion_candidate` when the simulated
  cluster-autoscaler holds the node unneeded (cluster-autoscaler soft-taints those nodes),
  `unneeded_since` the time it first did, `last_scale_up` the time of its last scale-up
  (None before the first; the values `scheduler.learning.features_v3` turns into columns).

Used by the `learned:PATH` policy, the DQN's episodes and the simulated decision log alike.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Generic, Protocol, TypeVar

from rl.simulation.autoscaler.scan import Autoscaler
from rl.simulation.engine.simulator import Simulation
from scheduler.domain.model import NodeWorkload, PodInfo
from scheduler.lifetimes import LifetimePredictor


class LifetimeSource(Protocol):
    """What a run asks of its lifetimes: scheduler.lifetimes' LifetimePredictor, or the truth
    (rl/policies/hindsight.py's HindsightPredictor)."""

    @property
    def version(self) -> int: ...  # bumped by every lifetime learned

    def predict_remaining(self, pod: PodInfo, age_s: float) -> float: ...

    def observe_end(self, pod: PodInfo, lifetime_s: float, disrupted: bool = False) -> bool: ...


P = TypeVar("P", bound=LifetimeSource)


class SimLifetimes(Generic[P]):
    def __init__(self, sim: Simulation, predictor: P) -> None:
        self.sim = sim
        # a fixed clock: the predictor's log throttle must not make runs differ
        self.predictor = predictor
        self._learned = 0
        self._ends: dict[str, tuple[tuple[int, ...], float]] = {}  # node → its pods, their end

    def update(self) -> P:
        """Learn every pod finished since the last call; returns the predictor."""
        if self.sim.completed_count == self._learned:
            return self.predictor
        finished = self.sim.completed
        for outcome in finished[self._learned :]:
            self.predictor.observe_end(
                self.sim.pod_info(outcome.index), outcome.finish_s - outcome.start_s
            )
        self._learned = len(finished)
        return self.predictor

    def remaining(self, pod: PodInfo, age_s: float) -> float:
        return self.predictor.predict_remaining(pod, age_s)

    def workloads(self) -> dict[str, NodeWorkload]:
        """`Simulation.workloads()` with the v3 fields (module docstring)."""
        sim = self.sim
        predictor = self.update()
        now = sim.now
        base = sim.view.workloads()
        scaler = sim.autoscaler if isinstance(sim.autoscaler, Autoscaler) else None
        unneeded = scaler.scale_down.unneeded_since if scaler is not None else None
        last_up = scaler.scale_down.last_scale_up_s if scaler is not None else -math.inf
        out = {}
        ends = self._ends
        for node in sim.nodes:
            name = node.spec.name
            pods = (*node.running, *node.pending)  # the pods v2's workload counts
            known = ends.get(name)
            if known is None or known[0] != pods:
                end = now
                for index in pods:
                    placed = node.placed_at[index]
                    info = sim.pod_info(index)
                    end = max(end, placed + predictor.predict_remaining(info, now - placed))
                known = ends[name] = (pods, end)
            out[name] = replace(
                base[name],
                pods_end_at=max(known[1], now),
                autoscaler_known=unneeded is not None,
                deletion_candidate=unneeded is not None and name in unneeded,
                unneeded_since=unneeded.get(name) if unneeded is not None else None,
                last_scale_up=last_up if math.isfinite(last_up) else None,
            )
        return out


def sim_lifetimes(sim: Simulation) -> SimLifetimes[LifetimePredictor]:
    """The run's lifetimes learnt into a fresh LifetimePredictor (a fixed clock: the predictor's
    log throttle must not make runs differ)."""
    return SimLifetimes(sim, LifetimePredictor(clock=lambda: 0.0))
