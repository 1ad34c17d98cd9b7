"""The energy plugin's v3 outlook in the simulator (scheduler/plugins/energy/levers.py): each node's
predicted time until its pods have all ended, whether cluster-autoscaler's unneeded timer runs
for it, and each pod's predicted lifetime.

Predictions come from a lifetime predictor (scheduler/lifetimes) that learns, before each
answer, the lifetime of every pod that finished in this simulation since the last one (from its
last placement to its end: rl/policies/sim_features.py's SimLifetimes, as the decision features learn) —
never from the trace's durations, which the simulator knows and the scheduler does not. A node's pods are the pods
placed on it (running, or waiting for its boot), each at its age since its placement. Whether the
node is unneeded is the simulated cluster-autoscaler's own timer (`ScaleDown.unneeded_since`):
what a live scheduler sees as the `DeletionCandidateOfClusterAutoscaler` taint CA puts on the
nodes it finds unneeded.

`source` may be any object with `predict_remaining(pod, age_s)`, `observe_end(pod,
lifetime_s)` and `version` (changed by every lifetime learned): the hindsight reference gives
one that knows each pod's true end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rl.policies.sim_features import LifetimeSource, SimLifetimes
from rl.simulation.autoscaler.scan import Autoscaler
from scheduler.domain.model import PodInfo
from scheduler.lifetimes import LifetimePredictor
from scheduler.plugins.energy.levers import NodeEnds

if TYPE_CHECKING:
    from rl.simulation.engine.node import SimNode
    from rl.simulation.engine.simulator import Simulation


class SimulationOutlook:
    """The `Outlook` of one simulation (module docstring)."""

    def __init__(self, sim: Simulation, source: LifetimeSource | None = None) -> None:
        self.sim = sim
        # SimLifetimes teaches the source every pod that finished since it last asked.
        self._lifetimes: SimLifetimes[LifetimeSource] = SimLifetimes(
            sim, source if source is not None else LifetimePredictor(clock=lambda: 0.0))
        self.source = self._lifetimes.predictor
        self._nodes = {n.spec.name: n for n in sim.nodes}
        self._ends = NodeEnds(self.source.predict_remaining)

    def _learn(self) -> None:
        self._lifetimes.update()

    def pod_lifetime(self, pod: PodInfo) -> float | None:
        self._learn()
        return self.source.predict_remaining(pod, 0.0)

    def nodes(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        self._learn()
        found = [self._nodes.get(name) for name in names]
        known = [n for n in found if n is not None]
        ends = self._ends.empty_in(
            [n.spec.name for n in known], [n.version for n in known],
            self.source.version, self.sim.now,
            lambda name: self._pods(self._nodes[name]),
        )
        out = np.full(len(names), np.nan)
        out[[i for i, n in enumerate(found) if n is not None]] = ends
        unneeded = np.fromiter((self._unneeded(name) for name in names), dtype=bool, count=len(names))
        return out, unneeded

    def _pods(self, node: SimNode) -> list[tuple[PodInfo, float]]:
        sim = self.sim
        return [(sim.pod_info(i), node.placed_at.get(i, sim.now)) for i in (*node.running, *node.pending)]

    def _unneeded(self, name: str) -> bool:
        autoscaler = self.sim.autoscaler
        return isinstance(autoscaler, Autoscaler) and name in autoscaler.scale_down.unneeded_since
