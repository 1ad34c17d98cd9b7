"""Where the energy goes (rl/simulation/engine/energy.py): the parts of every run add up to its total,
each part is what its definition says on a run worked by hand, and the oracle bound's split adds
up to the bound."""

from __future__ import annotations

import random

import pytest

from common.curves import PowerCurve
from rl.cmd.benchmark_cli import scenario_setup
from rl.evaluation.benchmark import plan_benchmark, run_task
from rl.evaluation.oracle import oracle_bound
from rl.simulation.engine.energy import ENERGY_PARTS, split_sum
from rl.simulation.engine.simulator import PowerOffModel, Simulation
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec
from tests.helpers.sim_run import run_policy

LINEAR = PowerCurve.linear(100.0, 200.0)  # 100 W idle, 200 W at full load on 4 cores


class OnNode:
    name = "on-node"

    def __init__(self, node: str) -> None:
        self.node = node

    def reset(self, nodes, rng) -> None:
        pass

    def choose(self, pod, feasible, now, candidates=()) -> str:
        return self.node


def test_a_run_split_by_hand():
    # One 4-core node, a DaemonSet using 0.4 cores (P = 110 W, 10 W of it the DaemonSet's),
    # empty 0–10 s, then a pod using 2 cores for 100 s (P = 160 W: 50 W work), then empty and
    # powered off after 20 s, booting... no: the run ends when the pod finishes.
    node = NodeSpec("a", "g", 4, 8, LINEAR, standby_watts=5.0)
    pods = [PodSpec(0, 10.0, 100.0, 1.0, 0.5, 2.0)]
    sim = Simulation([node], pods, daemonsets=[DaemonSetSpec("ds", 0.1, 0.4)])
    result = run_policy(sim, OnNode("a"), random.Random(0))
    split = result.energy_split_joules
    assert split is not None
    assert split["idle_empty"] == pytest.approx(100.0 * 10)
    assert split["idle_with_pods"] == pytest.approx(100.0 * 100)
    assert split["daemonsets"] == pytest.approx(10.0 * 110)
    assert split["work"] == pytest.approx(50.0 * 100)
    assert split["boots"] == split["standby"] == 0.0
    assert split_sum(split) == pytest.approx(result.energy_joules, rel=1e-12)
    assert result.node_seconds == pytest.approx(110.0)


def test_boots_and_standby_are_their_own_parts():
    # Visible power-off: the node is off after 5 s empty (5 W), a pod placed at 50 s boots it
    # (20 s at boot_joules / boot_seconds = 150 W), then runs 30 s.
    node = NodeSpec("a", "g", 4, 8, LINEAR, standby_watts=5.0)
    pods = [PodSpec(0, 50.0, 30.0, 1.0, 0.5, 0.0)]
    sim = Simulation([node], pods, PowerOffModel(5.0, boot_seconds=20.0, boot_joules=3000.0))
    result = run_policy(sim, OnNode("a"), random.Random(0))
    split = result.energy_split_joules
    assert split["standby"] == pytest.approx(5.0 * 45)
    assert split["boots"] == pytest.approx(3000.0)
    assert split["idle_empty"] == pytest.approx(100.0 * 5)
    assert split_sum(split) == pytest.approx(result.energy_joules, rel=1e-12)
    assert result.node_seconds == pytest.approx(5.0 + 20.0 + 30.0)


@pytest.mark.parametrize("policy", ["default@least-waste", "mostallocated@kubejoule"])
def test_the_parts_add_up_to_the_total_on_the_headline_cluster(policy):
    nodes, pods, cluster = scenario_setup("heterogeneous-autoscaler")
    pods = [p for p in pods if p.submit_s < 3 * 3600.0]  # the first three hours: a quick run
    plan = plan_benchmark(nodes, pods, [policy], 1, cluster, vary_workload=True)
    summary = run_task(plan, plan.tasks[0]).summary
    assert set(summary.energy_split_joules) == set(ENERGY_PARTS)
    assert all(v >= -1e-6 for v in summary.energy_split_joules.values())
    total = split_sum(summary.energy_split_joules)
    assert abs(total - summary.energy_joules) <= 0.001 * summary.energy_joules
    assert summary.energy_split_joules["boots"] > 0  # the autoscaler booted nodes
    assert summary.energy_split_joules["standby"] > 0


def test_the_oracle_split_adds_up_to_the_bound():
    nodes, pods, cluster = scenario_setup("heterogeneous-autoscaler")
    bound = oracle_bound(nodes, pods, True, daemon_cores=cluster.daemon_cores)
    split = bound.split_joules()
    assert split_sum(split) == pytest.approx(bound.energy_joules, rel=1e-12)
    assert split["boots"] == split["idle_empty"] == 0.0
    assert split["work"] == pytest.approx(bound.work_core_seconds * bound.watts_per_core)
