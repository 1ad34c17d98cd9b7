"""The simulator's energy ledgers: each node's joules (settled whenever its power changes) and
the cluster's (its summed power × the time between events), with the cluster's power timeline,
and where each node's joules went.

Power is piecewise constant between events, so both ledgers are exact: `P × Δt` per interval.
A boot of zero seconds adds its joules to both at once.

Where the energy goes (`ENERGY_PARTS`, each node's watts split whenever they are set, so the
parts of every interval add up to its `P × Δt`):

* `work`: a ready node's watts above its DaemonSet pods' level, `P(u) − P(d / C)`: the dynamic
  power of the workload pods it runs;
* `idle_with_pods`: `P(0)` of a ready node that runs at least one workload pod;
* `idle_empty`: `P(0)` of a ready node without workload pods — an empty node, the autoscaler's
  wait before it removes it, a node kept on by its group's minimum;
* `daemonsets`: `P(d / C) − P(0)` of every ready node (d: its DaemonSet pods' usage);
* `boots`: what booting nodes draw;
* `standby`: what powered-off nodes draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from common.curves import PowerCurve
from rl.simulation.engine.node import SimNode

ENERGY_PARTS = ("work", "idle_with_pods", "idle_empty", "daemonsets", "boots", "standby")
WORK, IDLE_WITH_PODS, IDLE_EMPTY, DAEMONSETS, BOOTS, STANDBY = range(len(ENERGY_PARTS))


def split_watts(
    watts: float,
    part: int,
    idle_watts: float = 0.0,
    daemon_watts: float = 0.0,
) -> tuple[float, ...]:
    """`watts` as a vector over ENERGY_PARTS. A ready node (`part` IDLE_WITH_PODS or
    IDLE_EMPTY) draws its idle watts, its DaemonSet pods' `daemon_watts` above them and the rest
    for work; a booting or powered-off one draws everything as `part`."""
    split = [0.0] * len(ENERGY_PARTS)
    if part in (IDLE_WITH_PODS, IDLE_EMPTY):
        split[part] = idle_watts
        split[DAEMONSETS] = daemon_watts
        split[WORK] = watts - idle_watts - daemon_watts
    else:
        split[part] = watts
    return tuple(split)


def ready_node_power(
    curve: PowerCurve,
    cores: float,
    usage_cores: float,
    daemon_usage_cores: float,
    has_daemon_pods: bool,
    has_workload_pods: bool,
) -> tuple[float, tuple[float, ...]]:
    """The power model of a ready node, in one place: its watts `P(min(1, usage / cores))` (usage:
    its workload and DaemonSet pods' CPU) and their split over ENERGY_PARTS. The simulator
    (rl/simulation/engine/lifecycle.py) and the energy of a recorded run (rl/simulation/recorded.py: the
    benchmark on a real cluster) both call it."""
    utilization = min(1.0, usage_cores / cores) if cores > 0 else 0.0
    watts = curve.watts(utilization)
    idle = curve.watts(0.0)
    ready = curve.watts(min(1.0, daemon_usage_cores / cores)) if has_daemon_pods else idle
    part = IDLE_WITH_PODS if has_workload_pods else IDLE_EMPTY
    return watts, split_watts(watts, part, idle, ready - idle)


def split_by_part(parts: Sequence[float]) -> dict[str, float]:
    return dict(zip(ENERGY_PARTS, parts, strict=True))


def total_split(nodes: Sequence[SimNode]) -> dict[str, float]:
    """The cluster's joules by part (the nodes settled up to the same instant)."""
    return split_by_part([sum(n.split_joules[i] for n in nodes) for i in range(len(ENERGY_PARTS))])


def split_sum(split: Mapping[str, float]) -> float:
    return sum(split[p] for p in ENERGY_PARTS)


class EnergyLedger:
    def __init__(self, record_timeline: bool = True) -> None:
        self.record_timeline = record_timeline
        self.energy_joules = 0.0
        self.cluster_watts = 0.0
        self.timeline: list[tuple[float, float]] = []
        # Joules spent at once (instant boots), with the timeline: (time, joules).
        self.lumps: list[tuple[float, float]] = []

    def advance(self, seconds: float) -> None:
        """The cluster's energy over `seconds` at its current power."""
        self.energy_joules += self.cluster_watts * seconds

    def settle(self, node: SimNode, now: float) -> None:
        """The node's energy (and its parts, and its powered time) up to `now`."""
        seconds = now - node.last_energy_s
        node.energy_joules += node.power_watts * seconds
        if not node.split_joules:
            node.split_joules = [0.0] * len(ENERGY_PARTS)
        if node.split_watts:
            for part, watts in enumerate(node.split_watts):
                node.split_joules[part] += watts * seconds
        if node.powered:
            node.powered_seconds += seconds
        node.last_energy_s = now

    def set_power(
        self,
        node: SimNode,
        watts: float,
        now: float,
        nodes: Sequence[SimNode],
        split: tuple[float, ...] = (),
        powered: bool = True,
    ) -> None:
        """The node draws `watts` from `now` on, `split` over ENERGY_PARTS; `powered`: on or
        booting (it counts in node-hours), not off."""
        self.settle(node, now)
        node.power_watts = watts
        node.split_watts = split
        node.powered = powered
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
        node.split_joules[BOOTS] += joules
        self.energy_joules += joules
        if self.record_timeline:
            self.lumps.append((now, joules))
