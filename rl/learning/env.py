"""A gymnasium environment over the simulator: one step = one pod placed.

* Observation (`Dict`):
  - `features`: `float32[nodes, width]`, one row per node of the cluster (in node-group order),
    each the scheduler's feature schema v1 (`scheduler.learning.features.candidate_matrix`: the node's
    features, then the pod's), unknown values as 0 with their flag at 0;
  - `action_mask`: `int8[nodes]`, 1 where the pod fits (the scheduler's filter).
* Action: `Discrete(nodes)`, the node to place the pod on. A node the pod does not fit on is an
  invalid action: the pod goes where the default kube-scheduler scoring would put it, and the
  step's reward carries `invalid_action_penalty`.
* Reward: `−(energy from this decision to the next) / reward_joules_scale
  − slowdown_weight × Σ slowdown of the pods that finished in between` (slowdown as a fraction,
  0 = undisturbed). The last step also pays for the energy until the last pod finishes.
* Episode: the whole trace; `terminated` once the last pod is placed and the run is over.

The features use the energy plugin configured like the `heuristic` policy, so `delta_watts`
is the heuristic's ΔP, and the observation matches what the standalone scheduler's decision log
records, which is what lets a model trained here score real decisions.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rl.policies.catalog import make_policy
from rl.policies.scheduling_profiles import heuristic_energy
from rl.simulation.cluster import ClusterModel, simulation
from rl.simulation.engine.simulator import PlacementRequest, PowerOffModel, Simulation
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from scheduler.learning.features import FEATURE_SCHEMA, candidate_matrix

# Every v1 feature is far below this (watts of one server, ages capped at an hour, ≤ 110 pods);
# a finite bound keeps the space well defined and values are clipped to it all the same.
FEATURE_CEILING = 1e6


@dataclass(frozen=True)
class EnvConfig:
    reward_joules_scale: float = 3.6e5  # 0.1 kWh of energy = reward −1
    slowdown_weight: float = 1.0  # reward −1 per unit of slowdown (a pod taking twice as long)
    invalid_action_penalty: float = 1.0


class ClusterSchedulingEnv(gym.Env[Any, Any]):  # gymnasium's spaces type no narrower
    metadata: dict[str, Any] = {"render_modes": []}  # gymnasium's type for it

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        pods: Sequence[PodSpec],
        power_off: PowerOffModel | None = None,
        config: EnvConfig | None = None,
    ) -> None:
        if not pods:
            raise ValueError("the environment needs a trace with at least one pod")
        self.nodes = list(nodes)
        self.pods = list(pods)
        self.power_off = power_off
        self.config = config or EnvConfig()
        self.width = FEATURE_SCHEMA.width
        self.observation_space = spaces.Dict(
            {
                "features": spaces.Box(
                    low=0.0,
                    high=FEATURE_CEILING,
                    shape=(len(self.nodes), self.width),
                    dtype=np.float32,
                ),
                "action_mask": spaces.MultiBinary(len(self.nodes)),
            }
        )
        self.action_space = spaces.Discrete(len(self.nodes))
        self._names = [n.name for n in self.nodes]
        self._sim: Simulation | None = None
        self._decision: PlacementRequest | None = None
        self._energy = heuristic_energy(self.nodes, power_off)
        self._fallback = make_policy("default", self.nodes)
        self._energy_mark = 0.0
        self._completed_mark = 0

    # -- gymnasium API ----------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, object]]:
        super().reset(seed=seed)
        self._sim = simulation(self.nodes, self.pods, ClusterModel(power_off=self.power_off), 0)
        self._energy = heuristic_energy(self.nodes, self.power_off)
        tie_seed = int(self.np_random.integers(0, 2**31 - 1))
        self._fallback.reset(self.nodes, random.Random(tie_seed))
        self._energy_mark = 0.0
        self._completed_mark = 0
        self._decision = self._sim.next_decision()
        return self._observation(), self._info()

    def step(
        self, action: np.int64 | int
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, object]]:
        if self._sim is None or self._decision is None:
            raise RuntimeError("call reset() before step(), and again after the episode ends")
        decision = self._decision
        feasible = {s.info.name for s in decision.feasible}
        name = self._names[int(action)]
        penalty = 0.0
        if name not in feasible:
            penalty = self.config.invalid_action_penalty
            name = self._fallback.choose(
                decision.info, decision.feasible, decision.now, decision.candidates
            )
        self._sim.place(name)
        self._decision = self._sim.next_decision()
        energy = self._sim.energy_joules - self._energy_mark
        self._energy_mark = self._sim.energy_joules
        finished = self._sim.completed[self._completed_mark :]
        self._completed_mark = self._sim.completed_count
        slowdown = sum(o.slowdown for o in finished)
        reward = (
            -energy / self.config.reward_joules_scale
            - self.config.slowdown_weight * slowdown
            - penalty
        )
        terminated = self._decision is None
        info = self._info()
        info.update({"energy_joules": energy, "slowdown": slowdown, "invalid_action": penalty > 0})
        return self._observation(), float(reward), terminated, False, info

    # -- helpers ----------------------------------------------------------------------------------

    def action_masks(self) -> np.ndarray:
        """1 where the current pod fits (for maskable algorithms)."""
        mask = np.zeros(len(self.nodes), dtype=np.int8)
        if self._decision is not None:
            feasible = {s.info.name for s in self._decision.feasible}
            for i, name in enumerate(self._names):
                mask[i] = name in feasible
        return mask

    def _observation(self) -> dict[str, np.ndarray]:
        features = np.zeros((len(self.nodes), self.width), dtype=np.float32)
        if self._sim is not None and self._decision is not None:
            states = self._sim.view.node_states()
            rows = candidate_matrix(self._decision.info, states, self._decision.now, self._energy)
            features[:] = np.clip(np.asarray(rows, dtype=np.float32), 0.0, FEATURE_CEILING)
        return {"features": features, "action_mask": self.action_masks()}

    def _info(self) -> dict[str, object]:
        sim = self._sim
        return {
            "now_s": sim.now if sim is not None else 0.0,
            "energy_joules_total": sim.energy_joules if sim is not None else 0.0,
            "pods_done": sim.completed_count if sim is not None else 0,
        }
