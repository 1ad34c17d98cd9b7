"""Driving a simulation to its end with one policy, decision by decision (what the tests do;
the product drives it through rl/evaluation/benchmark.py's run loop and the gymnasium environment)."""

from __future__ import annotations

import random

from rl.simulation.engine.simulator import Policy, SimResult, Simulation


def run_policy(sim: Simulation, policy: Policy, rng: random.Random) -> SimResult:
    policy.reset(sim.state.specs, rng)
    while (decision := sim.next_decision()) is not None:
        sim.place(policy.choose(decision.info, decision.feasible, decision.now, decision.candidates))
    return sim.result()
