"""cluster-autoscaler's loop trigger and its wait for new pods (rl/simulation/autoscaler/trigger.py).

cluster-autoscaler 1.36.1 has no test of its own for either (no loop/trigger_test.go; no case of
core/static_autoscaler_test.go reaches `allPodsAreNew`), so these follow the source: main.go's
loop (`trigger.Wait(previousRun)`), loop/trigger.go `LoopTrigger.Wait` and core/static_autoscaler.go
`allPodsAreNew`. Nodes are 4 cores / 8 GiB, linear 100–200 W; boots take 120 s."""

from __future__ import annotations

import random

import pytest

from common.curves import PowerCurve
from rl.evaluation.benchmark import run_once
from rl.simulation.autoscaler.model import AutoscalerModel, old_defaults
from rl.simulation.autoscaler.scan import Autoscaler, autoscaling
from rl.simulation.autoscaler.trigger import LoopTrigger, all_pods_are_new
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.simulator import Simulation
from rl.simulation.traces.scenario import NodeSpec, PodSpec

LINEAR = PowerCurve.linear(100.0, 200.0)


def node(name: str, group: str, cores: float = 4, *, ordinal: int = 0, min_count: int = 0,
         priority: int = 0) -> NodeSpec:
    return NodeSpec(name, group, cores, 8, LINEAR, ordinal=ordinal, min_count=min_count, priority=priority)


def pod(index: int, submit: float, request: float, duration: float = 100.0, owner: str | None = None) -> PodSpec:
    return PodSpec(index, submit, duration, request, 0.5, 1.0, owner_kind=owner)


def simulate(nodes, pods, model):
    return run_once(nodes, pods, "default", 0, cluster=ClusterModel(autoscaler=model), record_timeline=True)


def test_a_productive_loop_is_followed_by_two_loops_at_once():
    # main.go passes Wait the start of the loop before the one that ran (previousRun); Wait
    # returns at once while the last scale-up (or deletion) is not before it: after a productive
    # loop k, loops k+1 and k+2 run at once, k+3 waits for the scan interval.
    trigger = LoopTrigger(10.0)
    assert trigger.after_loop(productive=False) == 10.0
    assert trigger.after_loop(productive=True) == 0.0
    assert trigger.after_loop(productive=False) == 0.0
    assert trigger.after_loop(productive=False) == 10.0
    # productive again within the two: counted from the latest
    assert trigger.after_loop(productive=True) == 0.0
    assert trigger.after_loop(productive=True) == 0.0
    assert trigger.after_loop(productive=False) == 0.0
    assert trigger.after_loop(productive=False) == 10.0
    assert trigger.wakes_on_unschedulable and trigger.loops == 8


def test_without_frequent_loops_every_loop_waits_the_scan_interval():
    # main.go's other branch: `time.After(ScanInterval)` before every loop, no pod observer.
    trigger = LoopTrigger(7.0, frequent_loops=False)
    assert [trigger.after_loop(productive=p) for p in (True, True, False)] == [7.0, 7.0, 7.0]
    assert not trigger.wakes_on_unschedulable
    assert not old_defaults(AutoscalerModel()).frequent_loops_enabled
    assert AutoscalerModel().frequent_loops_enabled  # --frequent-loops-enabled defaults to true


def test_all_pods_are_new_while_the_oldest_is_under_the_wait():
    # oldest.Add(2 s).After(now): strictly after, so a pod exactly 2 s old is not new.
    assert all_pods_are_new([9.0, 8.5], now=10.0, wait_s=2.0)
    assert not all_pods_are_new([9.0, 8.0], now=10.0, wait_s=2.0)
    assert not all_pods_are_new([9.0, 7.0], now=10.0, wait_s=2.0)
    assert not all_pods_are_new([], now=10.0, wait_s=2.0)
    with pytest.raises(ValueError):
        AutoscalerModel(new_pod_wait_s=-1.0)


@pytest.mark.parametrize(("frequent_loops", "c_boots_at"), [(True, 10.0), (False, 20.0)])
def test_a_burst_scales_two_groups_in_quick_succession(frequent_loops, c_boots_at):
    # Two 3-core pods at t = 0, nothing on but a 1-core node; b and c have one 4-core node each,
    # b first by priority. The loop at 0 waits for more new pods; the one at 10 boots b for one
    # pod. With frequent loops the loop right after it (at once) boots c for the other, as the
    # real cluster-autoscaler does; with a loop per scan interval, c waits for the one at 20.
    nodes = [node("a-0", "a", 1, min_count=1), node("b-0", "b", priority=2), node("c-0", "c", priority=1)]
    model = AutoscalerModel(expander="priority", boot_seconds=120.0, boot_joules=0.0,
                            frequent_loops_enabled=frequent_loops)
    result = simulate(nodes, [pod(0, 0, 3), pod(1, 0, 3)], model)
    assert result.scale_ups == 2 and result.boots == 2
    starts = sorted((o.start_s, o.node) for o in result.outcomes)
    assert starts == [(130.0, "b-0"), (c_boots_at + 120.0, "c-0")]


@pytest.mark.parametrize(("frequent_loops", "boot_at"), [(True, 102.5), (False, 110.0)])
def test_new_pods_are_gathered_until_the_oldest_is_two_seconds_old(frequent_loops, boot_at):
    # Pods at 100, 101 and 102.5 (3 cores each, one 4-core b node each): each starts a loop when it
    # turns unschedulable; those at 100 and 101 see the oldest under 2 s old and wait; the one at
    # 102.5 (oldest 2.5 s) boots three nodes in one scale-up. Without frequent loops: the scan at
    # 110 does.
    nodes = [node("a-0", "a", 1, min_count=1)] + [node(f"b-{i}", "b", ordinal=i) for i in range(4)]
    model = AutoscalerModel(boot_seconds=120.0, boot_joules=0.0, frequent_loops_enabled=frequent_loops)
    result = simulate(nodes, [pod(0, 100, 3), pod(1, 101, 3), pod(2, 102.5, 3)], model)
    assert result.scale_ups == 1 and result.boots == 3
    assert {o.start_s for o in result.outcomes} == {boot_at + 120.0}


def test_a_replacement_is_a_new_pod_from_its_eviction():
    # A ReplicaSet pod placed at 5 and evicted at 50: its replacement was created at 50 (the
    # age allPodsAreNew reads), and its first failure to fit is again an unschedulable pod.
    sim = Simulation([node("a-0", "a", min_count=1)], [pod(0, 5, 2, owner="ReplicaSet")])
    decision = sim.next_decision()
    assert decision is not None and sim.actions.created_s(0) == 5.0
    sim.place("a-0")
    sim.state.marked_unschedulable.add(0)
    assert sim.next_decision(until=50.0) is None and sim.now == 50.0
    sim.actions.evict(sim.nodes[0], 0)
    assert sim.actions.created_s(0) == 50.0 and 0 not in sim.state.marked_unschedulable


def test_a_pod_that_stays_unschedulable_starts_one_loop_only():
    # A 6-core pod no group can hold arrives at 3: its first failure starts a loop at 3; its
    # retries (a pod finishing at 8 and 58 frees room) start none: loops at 0, 3, 13, 23, … only.
    model = AutoscalerModel(boot_seconds=120.0, boot_joules=0.0)
    nodes = [node("a-0", "a", min_count=1), node("b-0", "b")]
    sim = Simulation(nodes, [pod(0, 3, 6), pod(1, 5, 1, duration=3.0), pod(2, 55, 1, duration=3.0)],
                     autoscaler=autoscaling(model))
    rng = random.Random(0)
    while (decision := sim.next_decision(until=60.0)) is not None:
        sim.place(rng.choice(decision.feasible).info.name)
    assert sim.now == 60.0
    # loops at 0, 3 (the pod turned unschedulable), 13, 23, 33, 43, 53: seven
    assert isinstance(sim.autoscaler, Autoscaler) and sim.autoscaler.trigger.loops == 7
