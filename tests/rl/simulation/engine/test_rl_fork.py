"""Forking a run (Simulation.fork), stopping it at an instant (next_decision(until=…)) and the
credit of an action measured on forks (rl/learning/dqn/credit.py)."""

from __future__ import annotations

import random

import pytest

from common.curves import PowerCurve
from rl.evaluation.gate_run import gate_cluster
from rl.learning.dqn.credit import RewardConfig, fork_cost
from rl.policies.catalog import make_policy
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.cluster import ClusterModel, simulation
from rl.simulation.engine.simulator import SimResult, Simulation
from rl.simulation.traces.pool import TraceDraw, random_cluster, scaled_trace
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from rl.simulation.traces.tracegen import family_pdbs


def _case(seed: int = 3):
    nodes = random_cluster(random.Random(seed), 10)
    pods = scaled_trace(TraceDraw("batch-services", 0.5, 0.45, seed), nodes)
    return nodes, pods, gate_cluster((), pdbs=tuple(family_pdbs(pods)))


def _finish(sim: Simulation, policy_name: str, nodes, cluster) -> SimResult:
    policy = make_policy(policy_name, nodes, cluster.policy_power_off())
    policy.reset(sim.state.specs, random.Random(7))
    while (d := sim.next_decision()) is not None:
        sim.place(policy.choose(d.info, d.feasible, d.now, d.candidates))
    return sim.result()


def _summary(result: SimResult) -> tuple:
    return (
        result.energy_joules,
        result.end_s,
        tuple(sorted(result.node_energy_joules.items())),
        tuple((o.index, o.node, o.start_s, o.finish_s) for o in result.outcomes),
        result.evictions,
        result.scale_ups,
        result.scale_downs,
    )


def action_costs(sim, nodes, continuation, horizon_s, reward, seed) -> list[float]:
    """`fork_cost` of each of `nodes`, each fork continued by a fresh `continuation()` with the
    same seed (common random numbers)."""
    return [fork_cost(sim, n, continuation(), horizon_s, reward, seed) for n in nodes]


def test_a_fork_continues_exactly_as_the_run_and_never_touches_it():
    nodes, pods, cluster = _case()
    straight = _summary(
        _finish(simulation(nodes, pods, cluster, 1), "mostallocated", nodes, cluster)
    )

    sim = simulation(nodes, pods, cluster, 1)
    policy = make_policy("mostallocated", nodes, cluster.policy_power_off())
    policy.reset(sim.state.specs, random.Random(7))
    for _ in range(len(pods) // 2):  # half-way, with pods running, waiting and nodes booting
        d = sim.next_decision()
        assert d is not None
        sim.place(policy.choose(d.info, d.feasible, d.now, d.candidates))
    fork = sim.fork()
    # The fork runs to the end with another policy first: the original must not notice.
    other = _summary(_finish(fork, "roundrobin", nodes, cluster))
    assert other != straight
    # The original, continued as the straight run continued, ends as it did (the policy's
    # state matters too, so it goes on with the same policy object).
    while (d := sim.next_decision()) is not None:
        sim.place(policy.choose(d.info, d.feasible, d.now, d.candidates))
    assert _summary(sim.result()) == straight


def test_next_decision_until_stops_at_the_instant_and_the_run_goes_on():
    nodes, pods, cluster = _case()
    straight = _summary(
        _finish(simulation(nodes, pods, cluster, 1), "mostallocated", nodes, cluster)
    )
    sim = simulation(nodes, pods, cluster, 1)
    policy = make_policy("mostallocated", nodes, cluster.policy_power_off())
    policy.reset(sim.state.specs, random.Random(7))
    stops = 0
    for until in (600.0, 600.0, 1234.5, 1800.0):
        while (d := sim.next_decision(until=until)) is not None:
            assert d.now <= until
            sim.place(policy.choose(d.info, d.feasible, d.now, d.candidates))
        assert sim.now == until and not sim.finished
        stops += 1
        watts = sim.cluster_watts
        energy = sim.energy_joules
        # energy is counted to the instant: the next stop adds exactly the power meanwhile
        # when nothing happens in between (a stop at the same instant adds nothing)
        assert sim.next_decision(until=until) is None and sim.energy_joules == energy
        assert watts == sim.cluster_watts
    while (d := sim.next_decision()) is not None:
        sim.place(policy.choose(d.info, d.feasible, d.now, d.candidates))
    assert stops == 4 and _summary(sim.result()) == straight


LINEAR = PowerCurve.linear(100.0, 200.0)


def test_the_credit_of_keeping_an_unneeded_node_on():
    """a-0 always stays on; b-0 booted for pod 1 and is empty and unneeded when pod 2 comes.
    Placing pod 2 (a long one) on b-0 keeps b-0 on for its whole life; on a-0, b-0 goes once
    it has been unneeded for 600 s. The forks' costs differ by about b-0's idle power over
    that time, and measuring them changes nothing in the run."""
    nodes = [
        NodeSpec("a-0", "a", 4, 8, LINEAR, min_count=1),
        NodeSpec("b-0", "b", 4, 8, LINEAR, ordinal=0),
    ]
    pods = [
        PodSpec(0, 0.0, 300.0, 2.0, 0.5, 1.0),
        PodSpec(1, 1.0, 300.0, 3.0, 0.5, 1.0),
        PodSpec(2, 600.0, 3000.0, 1.0, 0.5, 0.5),
    ]
    model = AutoscalerModel(boot_seconds=120.0)
    cluster = ClusterModel(autoscaler=model)
    sim = simulation(nodes, pods, cluster, 0)
    for expected in ("a-0", "b-0"):
        d = sim.next_decision()
        assert d is not None and [s.info.name for s in d.feasible] == [expected]
        sim.place(expected)
    d = sim.next_decision()
    assert d is not None and sorted(s.info.name for s in d.feasible) == ["a-0", "b-0"]
    before = (sim.now, sim.energy_joules, sim.cluster_watts)

    def continuation():
        return make_policy("mostallocated", nodes, cluster.policy_power_off())

    reward = RewardConfig()
    on_a, on_b = action_costs(sim, ["a-0", "b-0"], continuation, 3600.0, reward, seed=5)
    assert (sim.now, sim.energy_joules, sim.cluster_watts) == before
    assert sim.next_decision() is d
    # b-0 stays on (100 W idle) for about 3000 s instead of going at about 430 + 600 s.
    extra_seconds = (on_b - on_a) * reward.joules_scale / 100.0
    assert 2_000.0 < extra_seconds < 3_100.0
    # the same action costs the same, whatever was measured before
    assert fork_cost(sim, "a-0", continuation(), 3600.0, reward, 5) == on_a
    assert fork_cost(sim, "b-0", continuation(), 3600.0, reward, 5) == on_b
    # longer horizons see more of the difference
    short_a, short_b = action_costs(sim, ["a-0", "b-0"], continuation, 900.0, reward, seed=5)
    assert 0.0 < short_b - short_a < on_b - on_a


@pytest.mark.parametrize("horizon", [0.0, 60.0])
def test_a_short_horizon_still_counts_the_placement(horizon):
    nodes, pods, cluster = _case()
    sim = simulation(nodes, pods, cluster, 1)
    d = sim.next_decision()
    assert d is not None
    costs = action_costs(
        sim,
        [s.info.name for s in d.feasible],
        lambda: make_policy("mostallocated", nodes, cluster.policy_power_off()),
        horizon,
        RewardConfig(),
        seed=1,
    )
    assert len(costs) == len(d.feasible) and all(c >= 0.0 for c in costs)
