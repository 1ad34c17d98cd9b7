"""Credit on the action: what one placement costs against another, by forking the simulation.

At a decision, for each candidate node to compare, the run is forked (`Simulation.fork`), the
pod placed on that node, and the fork continued for `horizon_s` seconds of simulated time with a
fixed continuation policy placing every later pod (the same policy, with the same tie-breaking
seed, in every fork of the decision). A fork's cost over the horizon has the episode reward's
terms (`RewardConfig`):

    cost = energy / joules_scale + pending_weight × pod-hours not started
           + slowdown_weight × Σ slowdown of the pods that finished

Forks of one decision differ only in the one placement, so the difference of two costs is what
choosing one node over the other did over the horizon — credit on the action itself, not the
share of a cluster-wide signal it happened to move (the reward of an ordinary transition is
the whole cluster's energy until the next decision, where the chosen node is a small part).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rl.simulation.engine.simulator import Policy, Simulation


@dataclass(frozen=True)
class RewardConfig:
    joules_scale: float = 3.6e5  # 0.1 kWh = 1 unit of cost
    pending_weight: float = 1.0  # per pod-hour not started
    slowdown_weight: float = 1.0  # per unit of slowdown (a pod taking twice as long: 1)


def fork_cost(
    sim: Simulation,
    node: str,
    continuation: Policy,
    horizon_s: float,
    reward: RewardConfig,
    seed: int,
) -> float:
    """The cost (module docstring) of placing the pending pod of `sim` on `node`, then letting
    `continuation` (reset here with `seed`) place every pod for `horizon_s` seconds. `sim` is
    left as it was."""
    fork = sim.fork()
    energy, pending, done = fork.energy_joules, fork.state.pending_pod_seconds, fork.completed_count
    continuation.reset(fork.state.specs, random.Random(seed))
    fork.place(node)
    end = fork.now + horizon_s
    while (decision := fork.next_decision(until=end)) is not None:
        fork.place(
            continuation.choose(decision.info, decision.feasible, decision.now, decision.candidates)
        )
    slowdown = sum(o.slowdown for o in fork.completed[done:])
    return (
        (fork.energy_joules - energy) / reward.joules_scale
        + reward.pending_weight * (fork.state.pending_pod_seconds - pending) / 3600.0
        + reward.slowdown_weight * slowdown
    )

