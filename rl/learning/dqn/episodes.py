"""Training episodes: a random cluster and trace, the rows a decision shows, the reward.

* Draws (`draw_episode`): cluster size uniform in `TRAINING_SIZES` (rl/simulation/traces/pool.py), two or three
  node kinds from the bundled SPECpower curves, a trace family and a load (15–50 % of the
  cluster's cores) and a seed, all from the training RNG.
* Rows: feature schema v3 (`scheduler.learning.features_v3`) of each feasible node, with the node
  workloads, autoscaler marks and lifetime predictor the simulator knows (`rl.policies.sim_features`); the v1 part comes from the heuristic's energy plugin configured as the
  `heuristic` policy is, exactly as the scheduler would compute it.
* Reward of one decision: `−(cluster energy until the next decision) / joules_scale
  − pending_weight × (pod-hours not started meanwhile) − slowdown_weight × Σ slowdown of the
  pods that finished meanwhile`. A pod that waits (for room, or for its node's boot) costs
  reward every second it waits, so leaving work pending is never a cheap action.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from rl.evaluation.gate_run import gate_cluster
from rl.policies.scheduling_profiles import heuristic_energy
from rl.policies.sim_features import sim_lifetimes
from rl.simulation.cluster import ClusterModel, simulation
from rl.simulation.engine.simulator import PlacementRequest, PowerOffModel
from rl.simulation.traces.pool import TRAINING_SIZES, TraceDraw, random_cluster, scaled_trace
from rl.simulation.traces.scenario import (
    DEFAULT_DAEMONSETS_FILE,
    NodeSpec,
    PodSpec,
    load_daemonsets,
    scenario_path,
)
from rl.simulation.traces.tracegen import FAMILIES
from scheduler.domain.cluster_defaults import BOOT_SECONDS, SCALE_DOWN_UNNEEDED_S
from scheduler.learning.features_v3 import candidate_matrix_v3
from scheduler.plugins.energy import EnergyPlugin


def training_cluster(
    autoscaler: bool = True, unneeded_seconds: float = SCALE_DOWN_UNNEEDED_S,
    boot_seconds: float = BOOT_SECONDS,
) -> ClusterModel:
    """The cluster rules of training: the gate's (`rl.evaluation.gate_run.gate_cluster`) with the bundled
    DaemonSets; or, with `autoscaler=False`, the visible-power-off ablation without DaemonSets
    (used by the tiny tests)."""
    if not autoscaler:
        return ClusterModel(power_off=PowerOffModel(unneeded_seconds, boot_seconds))
    daemonsets = tuple(load_daemonsets(scenario_path(DEFAULT_DAEMONSETS_FILE)))
    return gate_cluster(daemonsets, unneeded_seconds, boot_seconds)


@dataclass(frozen=True)
class RewardConfig:
    joules_scale: float = 3.6e5  # 0.1 kWh = −1
    pending_weight: float = 1.0  # per pod-hour not started
    slowdown_weight: float = 1.0  # per unit of slowdown (a pod taking twice as long: −1)


@dataclass(frozen=True)
class EpisodeDraw:
    size: int
    family: str
    load: float
    hours: float
    seed: int


def draw_episode(
    rng: random.Random, hours: float, sizes: tuple[int, int] = TRAINING_SIZES
) -> EpisodeDraw:
    return EpisodeDraw(
        size=rng.randint(*sizes),
        family=rng.choice(FAMILIES),
        load=round(rng.uniform(0.15, 0.5), 3),
        hours=hours,
        seed=rng.randrange(2**31),
    )


def build_episode(draw: EpisodeDraw) -> tuple[list[NodeSpec], list[PodSpec]]:
    nodes = random_cluster(random.Random(draw.seed), draw.size)
    pods = scaled_trace(TraceDraw(draw.family, draw.hours, draw.load, draw.seed), nodes)
    return nodes, pods


class Episode:
    """One simulation stepped decision by decision, with rows and rewards."""

    def __init__(
        self,
        nodes: list[NodeSpec],
        pods: list[PodSpec],
        reward: RewardConfig,
        cluster: ClusterModel,
        seed: int = 0,
    ) -> None:
        self.sim = simulation(nodes, pods, cluster, seed)
        self.energy: EnergyPlugin = heuristic_energy(nodes, cluster.policy_power_off())
        self.reward = reward
        self.lifetimes = sim_lifetimes(self.sim)
        self.decision: PlacementRequest | None = self.sim.next_decision()

    def rows(self) -> np.ndarray:
        """Feature rows (feasible × width) of the pending decision."""
        d = self.decision
        assert d is not None
        workloads = self.lifetimes.workloads()
        matrix = candidate_matrix_v3(
            d.info, d.feasible, d.now, self.energy, workloads, self.lifetimes.predictor
        )
        return np.asarray(matrix, dtype=np.float64)

    def names(self) -> list[str]:
        assert self.decision is not None
        return [s.info.name for s in self.decision.feasible]

    def step(self, index: int) -> float:
        """Place the pending pod on feasible node `index`; the decision's reward."""
        sim = self.sim
        assert self.decision is not None
        energy, pending, done = sim.energy_joules, sim.state.pending_pod_seconds, sim.completed_count
        sim.place(self.decision.feasible[index].info.name)
        self.decision = sim.next_decision()
        slowdown = sum(o.slowdown for o in sim.completed[done:])
        return (
            -(sim.energy_joules - energy) / self.reward.joules_scale
            - self.reward.pending_weight * (sim.state.pending_pod_seconds - pending) / 3600.0
            - self.reward.slowdown_weight * slowdown
        )

    @property
    def done(self) -> bool:
        return self.decision is None
