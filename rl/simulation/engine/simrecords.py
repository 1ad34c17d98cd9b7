"""The simulator's value types: the visible-power-off ablation's model, the pod a policy is asked
to place, what happened to each pod, and a run's result (rl/simulation/engine/simulator.py produces
them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rl.simulation.traces.scenario import NodeSpec, PodSpec
from scheduler.domain.cluster_defaults import BOOT_SECONDS
from scheduler.domain.model import NodeState, PodInfo


@dataclass(frozen=True)
class PowerOffModel:
    """The `--power-off-visible` ablation: nodes power off when empty for `after_seconds` and
    stay visible; placing a pod on an off node boots it."""

    after_seconds: float
    boot_seconds: float = BOOT_SECONDS
    # None: boot_seconds × the node's full-load watts (a boot keeps the machine busy).
    boot_joules: float | None = None

    def __post_init__(self) -> None:
        if self.after_seconds < 0 or self.boot_seconds < 0:
            raise ValueError("power-off and boot times must be >= 0")
        if self.boot_joules is not None and self.boot_joules < 0:
            raise ValueError("boot_joules must be >= 0")


def boot_joules_for(node: NodeSpec, boot_seconds: float, boot_joules: float | None) -> float:
    """One boot's energy: `boot_joules`, else boot_seconds × the node's full-load watts."""
    if boot_joules is not None:
        return boot_joules
    return boot_seconds * node.curve.max_watts


@dataclass(frozen=True)
class PlacementRequest:
    """A pod waiting to be placed, and the feasible nodes (as the scheduler would see them)
    among `candidates`, every node the scheduler sees."""

    pod: PodSpec
    info: PodInfo
    feasible: tuple[NodeState, ...]
    now: float
    candidates: tuple[NodeState, ...] = ()


@dataclass(frozen=True)
class PodOutcome:
    index: int
    node: str
    submit_s: float
    start_s: float  # the last start (an evicted pod's replacement starts again)
    finish_s: float
    duration_s: float
    waited: bool  # found no feasible node at least once
    first_start_s: float | None = None  # None: start_s

    @property
    def slowdown(self) -> float:
        """(finish − submit) / duration − 1: 0 when the pod ran as fast as it wanted at once."""
        return (self.finish_s - self.submit_s) / self.duration_s - 1.0

    @property
    def pending_s(self) -> float:
        """Arrival to (first) start."""
        first = self.start_s if self.first_start_s is None else self.first_start_s
        return first - self.submit_s


@dataclass
class SimResult:
    energy_joules: float
    end_s: float
    node_energy_joules: dict[str, float]
    outcomes: list[PodOutcome]
    unschedulable: int  # pods that found no feasible node at least once
    never_scheduled: int  # pods still waiting when nothing else could happen
    boots: int
    timeline: list[tuple[float, float]]  # (time, cluster watts from then on)
    scale_ups: int = 0  # autoscaler scale-up decisions (each boots one or more nodes)
    scale_downs: int = 0  # nodes the autoscaler powered off
    # Scale-down's disruption (rl/simulation/engine/workloads.py): pods evicted, those replaced by a pod that
    # starts over (Jobs), those deleted for good (bare pods), the CPU-seconds evicted pods had
    # done and lost, and the workloads that lost a pod.
    evictions: int = 0
    restarted_pods: int = 0
    deleted_pods: int = 0
    lost_cpu_seconds: float = 0.0
    disrupted_workloads: int = 0
    # Where the energy went (rl/simulation/engine/energy.py, ENERGY_PARTS: joules each, summing to
    # energy_joules) and the node-seconds nodes were on or booting.
    energy_split_joules: dict[str, float] | None = None
    node_seconds: float = 0.0
    # Energy spent at once (instant boots) beside the timeline, when recorded: (time, joules).
    energy_lumps: list[tuple[float, float]] = field(default_factory=list)

    def slowdowns(self) -> list[float]:
        return [o.slowdown for o in self.outcomes]

    def pending_seconds(self) -> list[float]:
        return [o.pending_s for o in self.outcomes]

    def busy_node_seconds(self) -> float:
        """Σ over nodes of the time it ran at least one (finished) workload pod: the union of
        its pods' start–finish intervals."""
        spans: dict[str, list[tuple[float, float]]] = {}
        for o in self.outcomes:
            spans.setdefault(o.node, []).append((o.start_s, o.finish_s))
        total = 0.0
        for intervals in spans.values():
            intervals.sort()
            start, end = intervals[0]
            for a, b in intervals[1:]:
                if a > end:
                    total += end - start
                    start, end = a, b
                else:
                    end = max(end, b)
            total += end - start
        return total
