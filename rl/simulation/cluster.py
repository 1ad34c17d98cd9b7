"""How a simulated cluster behaves besides its nodes and trace, and the one function that builds a
`Simulation` from it.

`ClusterModel` gathers the power regime (cluster-autoscaler's semantics, or the visible
power-off ablation, or always on), the DaemonSets on every node, what telemetry the scheduler
sees, the telemetry-dropout fault and how workloads are treated (PodDisruptionBudgets, pod
startup time: rl/simulation/engine/workloads.py). `simulation()` turns nodes, a trace, a ClusterModel and a
seed into a `Simulation`; the benchmark, the promotion gate, the DQN's training episodes, the
gymnasium environment and the decision log all build their runs with it, so a rule
added to the cluster model reaches every one of them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.autoscaler.scan import autoscaling
from rl.simulation.engine.simulator import PowerOffModel, Simulation
from rl.simulation.engine.telemetry import TelemetryModel, dropped_nodes
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec

if TYPE_CHECKING:
    from common.curves import PowerCurve


@dataclass(frozen=True)
class ClusterModel:
    """How the cluster behaves besides its nodes and trace (see rl/simulation/engine/simulator.py)."""

    power_off: PowerOffModel | None = None  # the visible-power-off ablation
    autoscaler: AutoscalerModel | None = None
    daemonsets: tuple[DaemonSetSpec, ...] = ()
    telemetry: TelemetryModel | None = None  # None: perfect telemetry (ablation)
    telemetry_dropout: float = 0.0  # fault mode: each node's agent missing with this probability
    workloads: WorkloadModel = field(default_factory=WorkloadModel)  # PDBs, pod startup time
    # The schedulers' configuration names every node's power curve (`curves:`), as a deployment
    # whose nodes run no agent does (the on-cluster benchmark's KWOK nodes: rl/cluster/schedulers.py):
    # the energy plugin then prices a node without telemetry from it instead of scoring it 0.
    configured_curves: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.telemetry_dropout <= 1.0:
            raise ValueError("the telemetry dropout must be a probability in [0, 1]")

    @property
    def daemon_cores(self) -> float:
        return sum(d.cpu_usage for d in self.daemonsets)

    def policy_power_off(self) -> PowerOffModel | None:
        """What policies are told about power-off: nodes are powered off when empty (the
        energy scorer's consolidation switch) under the autoscaler and in the ablation."""
        if self.autoscaler is not None:
            a = self.autoscaler
            return PowerOffModel(a.scale_down_unneeded_s, a.boot_seconds, a.boot_joules)
        return self.power_off

    def policy_curves(self, nodes: Sequence[NodeSpec]) -> dict[str, PowerCurve] | None:
        """The curves the policies' configuration names (`configured_curves`), else None."""
        return {n.name: n.curve for n in nodes} if self.configured_curves else None


def simulation(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    cluster: ClusterModel,
    seed: int,
    record_timeline: bool = False,
) -> Simulation:
    """A run of `pods` on `nodes` under `cluster`'s rules. `seed` draws the autoscaler's random
    choices (its `random` expander, ties among options) and, in the dropout fault mode, the
    nodes whose agent is missing — the same for every policy run with that seed."""
    return Simulation(
        nodes,
        pods,
        cluster.power_off,
        record_timeline=record_timeline,
        autoscaler=None if cluster.autoscaler is None else autoscaling(cluster.autoscaler),
        daemonsets=cluster.daemonsets,
        telemetry=cluster.telemetry,
        rng=random.Random(f"autoscaler-{seed}"),
        missing_telemetry=dropped_nodes([n.name for n in nodes], cluster.telemetry_dropout, seed),
        workloads=cluster.workloads,
    )
