"""The energy of a recorded run (rl/simulation/recorded.py) is the simulator's: the same power
model and ledger, so a simulated run's own pod lives, recorded, give back its energy, its split
and its node-hours; bad records are refused by name."""

from __future__ import annotations

import pytest

from rl.evaluation.benchmark import run_once
from rl.simulation.cluster import ClusterModel
from rl.simulation.recorded import PodLife, recorded_result
from rl.simulation.traces.scenario import DaemonSetSpec, PodSpec, parse_node_groups

NODES = parse_node_groups([
    {"name": "fan", "count": 2, "cpu_cores": 8, "memory_gib": 16,
     "power": {"idle_watts": 100, "max_watts": 250, "curve": "fan", "r": 1.4}},
    {"name": "lin", "count": 1, "cpu_cores": 4, "memory_gib": 8,
     "power": {"idle_watts": 50, "max_watts": 120}},
])
DAEMONSETS = (DaemonSetSpec("agent", cpu_request=0.1, cpu_usage=0.05, mem_request_gib=0.1),)


def _pods() -> list[PodSpec]:
    # Usage never above what a node holds: no contention, so the simulated run times are the
    # trace's (as on a KWOK node).
    return [
        PodSpec(i, submit_s=30.0 * i, duration_s=200.0 + 37.0 * (i % 5), cpu_request=1.0 + (i % 3),
                mem_request_gib=1.0, cpu_usage=0.5 + 0.5 * (i % 3))
        for i in range(24)
    ]


@pytest.mark.parametrize("policy", ["default", "mostallocated"])
@pytest.mark.parametrize("daemonsets", [(), DAEMONSETS])
def test_a_simulated_runs_record_gives_back_its_energy(policy: str, daemonsets: tuple[DaemonSetSpec, ...]) -> None:
    pods = _pods()
    sim = run_once(NODES, pods, policy, 0, cluster=ClusterModel(daemonsets=daemonsets, telemetry=None))
    lives = [PodLife(o.index, o.node, o.start_s, o.finish_s) for o in sim.outcomes]
    recorded = recorded_result(NODES, pods, lives, daemonsets)
    assert recorded.energy_joules == pytest.approx(sim.energy_joules, rel=1e-9)
    assert recorded.end_s == sim.end_s
    assert recorded.node_seconds == pytest.approx(sim.node_seconds)
    assert recorded.energy_split_joules == pytest.approx(sim.energy_split_joules)
    assert recorded.node_energy_joules == pytest.approx(sim.node_energy_joules)
    assert [o.pending_s for o in recorded.outcomes] == pytest.approx([o.pending_s for o in sim.outcomes])


def test_an_idle_static_cluster_draws_its_idle_watts() -> None:
    pods = _pods()[:1]
    result = recorded_result(NODES, pods, [PodLife(0, "lin-0", 0.0, 100.0)])
    # fan nodes idle (2 × 100 W), the linear node at 1 of 4 cores: 50 + 70 × 0.125.
    assert result.energy_joules == pytest.approx(100.0 * (200.0 + 50.0 + 70.0 * 0.5 / 4))
    assert result.node_seconds == pytest.approx(300.0)


def test_a_partial_record_counts_up_to_its_end_and_leaves_unfinished_pods_out() -> None:
    pods = _pods()[:2]
    lives = [PodLife(0, "lin-0", 0.0, 50.0), PodLife(1, "lin-0", 10.0, None)]
    result = recorded_result(NODES, pods, lives, end_s=80.0)
    assert result.end_s == 80.0
    assert [o.index for o in result.outcomes] == [0]
    assert result.never_scheduled == 1


@pytest.mark.parametrize(
    ("life", "message"),
    [
        (PodLife(7, "lin-0", 0.0, 1.0), "not a pod of the trace"),
        (PodLife(0, "nowhere", 0.0, 1.0), "not a node of the cluster"),
        (PodLife(0, "lin-0", 5.0, 1.0), "before it starts"),
    ],
)
def test_a_bad_record_is_refused_by_name(life: PodLife, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        recorded_result(NODES, _pods()[:1], [life])


def test_busy_node_seconds_is_the_union_of_each_nodes_pod_intervals() -> None:
    pods = _pods()[:4]
    lives = [PodLife(0, "lin-0", 0.0, 10.0), PodLife(1, "lin-0", 5.0, 20.0), PodLife(2, "lin-0", 30.0, 40.0),
             PodLife(3, "fan-0", 0.0, 7.0)]
    assert recorded_result(NODES, pods, lives).busy_node_seconds() == pytest.approx(20.0 + 10.0 + 7.0)
