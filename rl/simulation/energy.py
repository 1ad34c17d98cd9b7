"""The simulator's energy ledgers: each node's joules (settled whenever its power changes) and
the cluster's (its summed power × the time between events), with the cluster's power timeline.

Power is piecewise constant between events, so both ledgers are exact: `P × Δt` per interval.
A boot of zero seconds adds its joules to both at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from rl.simulation.node import SimNode


class EnergyLedger:
    def __init__(self, record_timeline: bool = True) -> None:
        self.record_timeline = record_timeline
        self.energy_joules = 0.0
        self.cluster_watts = 0.0
        self.timeline: list[tuple[float, float]] = []

    def advance(self, seconds: float) -> None:
        """The cluster's energy over `seconds` at its current power."""
        self.energy_joules += self.cluster_watts * seconds

    def settle(self, node: SimNode, now: float) -> None:
        """The node's energy up to `now` at its current power."""
        node.energy_joules += node.power_watts * (now - node.last_energy_s)
        node.last_energy_s = now

    def set_power(self, node: SimNode, watts: float, now: float, nodes: Sequence[SimNode]) -> None:
        self.settle(node, now)
        node.power_watts = watts
        # Summed afresh rather than updated by differences, so no round-off accumulates.
        self.cluster_watts = sum(n.power_watts for n in nodes)
        if self.record_timeline:
            if self.timeline and self.timeline[-1][0] == now:
                self.timeline[-1] = (now, self.cluster_watts)
            else:
                self.timeline.append((now, self.cluster_watts))

    def add(self, node: SimNode, joules: float, now: float) -> None:
        """Joules spent at once (an instant boot), on the node and the cluster."""
        self.settle(node, now)
        node.energy_joules += joules
        self.energy_joules += joules
