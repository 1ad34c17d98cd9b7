"""A scheduling profile as a simulator policy: `ProfilePolicy` decides as the standalone scheduler
decides (its `ProfileDecider`, scheduler/decisions/placement.py, in active mode) over the nodes the
scheduler sees, kept as the scheduler's cluster cache keeps them (`CandidateTable`). Every named
profile policy of the catalog (rl/policies/catalog.py) and the hindsight reference are one."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rl.policies.scheduling_profiles import energy_plugins
from rl.simulation.traces.scenario import NodeSpec
from scheduler.cluster.node_table import NodeTable
from scheduler.decisions.placement import MODE_ACTIVE, Decision, ProfileDecider
from scheduler.domain.model import NodeState, PodInfo
from scheduler.framework import SchedulingProfile

if TYPE_CHECKING:
    from rl.simulation.engine.simulator import Simulation


class CandidateTable:
    """The nodes the scheduler sees, as the standalone scheduler's cluster cache holds them: a
    NodeTable whose rows are rewritten only where a node's state changed (and rebuilt when the
    set of nodes changes: under the autoscaler, a node powered on or off), so ProfileDecider
    patches its batch row by row as it does over the cache."""

    def __init__(self) -> None:
        self.table: NodeTable | None = None
        self._layout = 0

    def update(self, states: Sequence[NodeState]) -> NodeTable:
        table = self.table
        if table is None or len(table) != len(states) or any(
            name != s.info.name for name, s in zip(table.names, states, strict=True)
        ):
            self._layout += 1
            table = self.table = NodeTable([s.info for s in states], self._layout)
            for row, state in enumerate(states):
                table.set_row(row, state)
            return table
        for row, state in enumerate(states):
            if state != table.states[row]:
                table.set_row(row, state)
        return table


class ProfilePolicy:
    """A scheduling profile deciding as the standalone scheduler decides: its ProfileDecider
    (`scheduler/decisions/placement.py`) in active mode over the nodes the scheduler sees — the same
    filters, kube-scheduler's nodes to score (percentageOfNodesToScore) when `percentage_of_nodes_to_score`
    is set (0: adaptive), the batch reused and patched from pod to pod, kube-scheduler's default
    profile scored beside it for comparison, ties at random from the run's seeded RNG."""

    def __init__(
        self,
        profile: SchedulingProfile,
        name: str | None = None,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        if not profile.filters:
            raise ValueError(f"profile {profile.name!r} has no filters: it would bind anywhere")
        self.profile = profile
        self.name = name or profile.name
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._rng = random.Random(0)
        self.reset((), self._rng)

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self._rng = rng
        self.decider = ProfileDecider(
            self.profile, percentage_of_nodes_to_score=self.percentage_of_nodes_to_score
        )
        self._candidates = CandidateTable()

    def attach(self, sim: Simulation) -> None:
        """Energy plugins with v3 levers that read the cluster's outlook (pods' predicted
        lifetimes, cluster-autoscaler's unneeded nodes) get the simulation's (rl/policies/outlook_sim.py),
        learned from the pods that end in this run."""
        from rl.policies.outlook_sim import SimulationOutlook

        outlook = None
        for plugin in energy_plugins(self.profile):
            if plugin.levers.needs_outlook:
                outlook = outlook or SimulationOutlook(sim)
                plugin.outlook = outlook

    def decide(self, pod: PodInfo, nodes: Sequence[NodeState], now: float) -> Decision:
        """The standalone scheduler's decision over `nodes` (every node it sees)."""
        table = self._candidates.update(nodes)
        return self.decider.decide(pod, table, MODE_ACTIVE, self._rng, now)

    def choose(
        self,
        pod: PodInfo,
        feasible: Sequence[NodeState],
        now: float,
        candidates: Sequence[NodeState] = (),
    ) -> str:
        chosen = self.decide(pod, candidates or feasible, now).chosen
        if chosen is None or all(s.info.name != chosen for s in feasible):
            raise RuntimeError(f"{self.name} chose {chosen!r} for {pod.key}, not a feasible node")
        return chosen
