"""The simulator's energy, contention, waiting and power-off model on hand-computable cases."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest

from common.curves import PowerCurve
from rl.simulation.engine.simulator import PowerOffModel, Simulation
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from scheduler.domain.model import NodeState, PodInfo
from tests.helpers.sim_run import run_policy

LINEAR = PowerCurve.linear(100.0, 200.0)  # 100 W idle, 200 W at full load


class FixedPolicy:
    """Places pod i on `placement[i]`; the simulator must offer that node as feasible."""

    name = "fixed"

    def __init__(self, placement: Mapping[int, str]) -> None:
        self.placement = placement

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        pass

    def choose(
        self, pod: PodInfo, feasible: Sequence[NodeState], now: float, candidates: Sequence[NodeState] = ()
    ) -> str:
        index = int(pod.name.removeprefix("pod-"))
        wanted = self.placement[index]
        assert wanted in {s.info.name for s in feasible}
        return wanted


def node(
    name: str, cores: float = 4, curve: PowerCurve = LINEAR, memory_gib: float = 8
) -> NodeSpec:
    return NodeSpec(name, "g", cores, memory_gib, curve)


def pod(index: int, submit: float, duration: float, usage: float, request: float = 1.0) -> PodSpec:
    return PodSpec(index, submit, duration, request, 0.5, usage)


def run(nodes, pods, placement, power_off=None):
    sim = Simulation(nodes, pods, power_off)
    return run_policy(sim, FixedPolicy(placement), random.Random(0))


def test_one_pod_on_one_node():
    # Idle 0–10 s (100 W), then u = 2/4 for 100 s (150 W): 1,000 + 15,000 J, ends at 110 s.
    result = run([node("a")], [pod(0, 10, 100, usage=2)], {0: "a"})
    assert result.energy_joules == pytest.approx(16_000.0, rel=1e-12)
    assert result.end_s == pytest.approx(110.0)
    assert result.slowdowns() == [pytest.approx(0.0)]
    assert result.node_energy_joules == {"a": pytest.approx(16_000.0)}
    assert result.timeline == [(0.0, 100.0), (10.0, 150.0), (110.0, 100.0)]


def test_two_nodes_with_different_curves():
    # a: 1 core busy of 4 from 0 to 100 s → 125 W × 100 s, then idle 100 W × 100 s.
    # b (fan, 2 cores, 50 W → 250 W, r = 2): idle 0–50 s, u = 1/2 for 150 s → 50 + 200·(1 − 1/4).
    fan = PowerCurve.fan(50.0, 250.0, 2.0)
    nodes = [node("a"), node("b", cores=2, curve=fan)]
    pods = [pod(0, 0, 100, usage=1), pod(1, 50, 150, usage=1)]
    result = run(nodes, pods, {0: "a", 1: "b"})
    b_half = 50.0 + 200.0 * (2 * 0.5 - 0.5**2)  # 200 W
    expected_a = 125.0 * 100 + 100.0 * 100
    expected_b = 50.0 * 50 + b_half * 150
    assert result.end_s == pytest.approx(200.0)
    assert result.node_energy_joules["a"] == pytest.approx(expected_a)
    assert result.node_energy_joules["b"] == pytest.approx(expected_b)
    assert result.energy_joules == pytest.approx(expected_a + expected_b)


def test_contention_stretches_running_pods_and_caps_power():
    # A (4 cores of usage) runs alone 0–50 s; B (4 cores) joins on the same 4-core node: both at
    # half speed. A has 50 s of work left → done at 150 s; B then has 50 s left alone → 200 s.
    # The node is at u = 1 (200 W) for all 200 s.
    pods = [pod(0, 0, 100, usage=4), pod(1, 50, 100, usage=4)]
    result = run([node("a")], pods, {0: "a", 1: "a"})
    finish = {o.index: o.finish_s for o in result.outcomes}
    assert finish == {0: pytest.approx(150.0), 1: pytest.approx(200.0)}
    assert result.slowdowns() == [pytest.approx(0.5), pytest.approx(0.5)]
    assert result.energy_joules == pytest.approx(200.0 * 200)


def test_usage_above_cores_on_its_own_slows_the_pod():
    result = run([node("a")], [pod(0, 0, 100, usage=8, request=2)], {0: "a"})
    assert result.outcomes[0].finish_s == pytest.approx(200.0)
    assert result.energy_joules == pytest.approx(200.0 * 200)


def test_power_off_and_boot_energy():
    # Pod 0 runs 0–100 s at 150 W; the node is empty 100–160 s (100 W) and then off (0 W) until
    # pod 1 arrives at 1,000 s; the boot takes 10 s and 500 J; pod 1 runs 1,010–1,110 s at 150 W.
    power_off = PowerOffModel(after_seconds=60, boot_seconds=10, boot_joules=500)
    pods = [pod(0, 0, 100, usage=2), pod(1, 1000, 100, usage=2)]
    result = run([node("a")], pods, {0: "a", 1: "a"}, power_off)
    assert result.energy_joules == pytest.approx(15_000 + 6_000 + 500 + 15_000)
    assert result.boots == 1
    assert result.end_s == pytest.approx(1110.0)
    assert result.outcomes[1].start_s == pytest.approx(1010.0)
    assert result.slowdowns()[1] == pytest.approx(0.1)
    assert (1000.0, 50.0) in result.timeline  # booting at 500 J / 10 s
    assert (160.0, 0.0) in result.timeline


def test_boot_energy_defaults_to_full_load_power():
    power_off = PowerOffModel(after_seconds=0, boot_seconds=10)
    result = run([node("a")], [pod(0, 100, 100, usage=2)], {0: "a"}, power_off)
    # Off from t = 0 (empty for 0 s), boot 10 s at 200 W, run 100 s at 150 W.
    assert result.energy_joules == pytest.approx(2_000 + 15_000)


def test_pod_arriving_before_power_off_keeps_node_on():
    power_off = PowerOffModel(after_seconds=60, boot_seconds=10, boot_joules=500)
    pods = [pod(0, 0, 100, usage=2), pod(1, 150, 100, usage=2)]
    result = run([node("a")], pods, {0: "a", 1: "a"}, power_off)
    assert result.boots == 0
    assert result.energy_joules == pytest.approx(15_000 + 100 * 50 + 15_000)


def test_pods_placed_on_a_booting_node_start_together():
    power_off = PowerOffModel(after_seconds=0, boot_seconds=30, boot_joules=0)
    pods = [pod(0, 100, 100, usage=1), pod(1, 110, 100, usage=1)]
    result = run([node("a")], pods, {0: "a", 1: "a"}, power_off)
    starts = [o.start_s for o in result.outcomes]
    assert starts == [pytest.approx(130.0), pytest.approx(130.0)]
    assert result.boots == 1


def test_pod_that_does_not_fit_waits_and_is_counted():
    # 1 allocatable core; each pod requests 1: the second waits for the first to finish.
    nodes = [node("a", cores=1)]
    pods = [pod(0, 0, 100, usage=1), pod(1, 10, 100, usage=1)]
    result = run(nodes, pods, {0: "a", 1: "a"})
    second = result.outcomes[1]
    assert second.waited and second.start_s == pytest.approx(100.0)
    assert second.slowdown == pytest.approx((200 - 10) / 100 - 1)
    assert result.unschedulable == 1 and result.never_scheduled == 0


def test_pod_larger_than_any_node_is_never_scheduled():
    result = run([node("a")], [pod(0, 0, 100, usage=1, request=8)], {})
    assert result.never_scheduled == 1 and result.unschedulable == 1
    assert result.outcomes == []


def test_energy_accounts_agree():
    """Cluster integral, per-node integrals and the timeline's integral are the same energy."""
    rng = random.Random(5)
    nodes = [node(f"n{i}", cores=4) for i in range(3)]
    pods = [
        pod(i, rng.uniform(0, 500), rng.uniform(10, 300), rng.uniform(0.1, 3)) for i in range(40)
    ]
    pods = [
        PodSpec(i, p.submit_s, p.duration_s, 0.1, 0.1, p.cpu_usage)
        for i, p in enumerate(sorted(pods, key=lambda p: p.submit_s))
    ]
    placement = {i: f"n{i % 3}" for i in range(40)}
    result = run(nodes, pods, placement, PowerOffModel(30, 5, 100))
    timeline = result.timeline + [(result.end_s, 0.0)]
    integral = sum(w * (t2 - t1) for (t1, w), (t2, _) in zip(timeline, timeline[1:], strict=False))
    assert sum(result.node_energy_joules.values()) == pytest.approx(result.energy_joules, rel=1e-9)
    assert integral == pytest.approx(result.energy_joules, rel=1e-9)
    assert len(result.outcomes) == 40


def test_place_refuses_an_infeasible_node():
    sim = Simulation([node("a", cores=1), node("b")], [pod(0, 0, 10, usage=1, request=2)])
    decision = sim.next_decision()
    assert decision is not None
    assert [s.info.name for s in decision.feasible] == ["b"]
    with pytest.raises(ValueError):
        sim.place("a")


def test_boot_without_boot_time_costs_its_joules_at_once():
    # boot_seconds = 0: the boot's 500 J are spent at the instant the pod arrives (t = 100) and
    # the pod starts then; before it the node idled 10 s (100 W) and was off.
    power_off = PowerOffModel(after_seconds=10, boot_seconds=0, boot_joules=500)
    result = run([node("a")], [pod(0, 100, 100, usage=2)], {0: "a"}, power_off)
    assert result.boots == 1
    assert result.outcomes[0].start_s == pytest.approx(100.0)
    assert result.energy_joules == pytest.approx(100 * 10 + 500 + 150 * 100)


def test_the_pod_count_limit_of_the_schedulers_filter_applies():
    # max_pods 1: the scheduler's filter says "Too many pods", so the second pod waits for the
    # first although cpu and memory would fit.
    nodes = [NodeSpec("a", "g", 4, 8, LINEAR, max_pods=1)]
    pods = [pod(0, 0, 100, usage=1), pod(1, 10, 100, usage=1)]
    result = run(nodes, pods, {0: "a", 1: "a"})
    assert result.outcomes[1].waited and result.outcomes[1].start_s == pytest.approx(100.0)
    assert result.unschedulable == 1


def test_feasibility_is_the_schedulers_own_filter(monkeypatch: pytest.MonkeyPatch):
    """The simulator asks scheduler.domain.filters, not a copy of it: a node its filter refuses is
    never offered, whatever the resources say."""
    import scheduler.domain.filters as filters

    real = filters.node_failures

    def refuse_a(pod_info: PodInfo, state: NodeState) -> tuple[str, ...]:
        return ("refused by the test",) if state.info.name == "a" else real(pod_info, state)

    monkeypatch.setattr(filters, "node_failures", refuse_a)
    sim = Simulation([node("a"), node("b")], [pod(i, i, 10, usage=1) for i in range(3)])
    offered = []
    while (decision := sim.next_decision()) is not None:
        offered.append([s.info.name for s in decision.feasible])
        sim.place("b")
    assert offered == [["b"]] * 3
