"""Autoscaler semantics on hand-computable cases: candidates, Pending pods, scans, boots,
expanders, scale-down, standby power and DaemonSet load."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from common.curves import PowerCurve
from rl.evaluation.benchmark import run_once
from rl.policies.catalog import BUILTIN_POLICIES
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.autoscaler.scan import ScaleUpOption, autoscaling, least_waste_score
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.simulator import Simulation
from rl.simulation.engine.telemetry import TelemetryModel, dropped_nodes
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec, parse_node_groups
from scheduler.domain.model import NodeState, PodInfo
from scheduler.plugins.energy import EnergyPlugin
from tests.helpers.sim_run import run_policy

LINEAR = PowerCurve.linear(100.0, 200.0)  # 100 W idle, 200 W at full load


def node(name: str, group: str, cores: float, *, ordinal: int = 0, min_count: int = 0,
         standby: float = 0.0, priority: int = 0) -> NodeSpec:
    return NodeSpec(name, group, cores, 8, LINEAR, ordinal=ordinal, min_count=min_count,
                    standby_watts=standby, priority=priority)


def pod(index: int, submit: float, duration: float, usage: float, request: float) -> PodSpec:
    return PodSpec(index, submit, duration, request, 0.5, usage)


# 6,000 J over 120 s: a booting node draws 50 W.
MODEL = AutoscalerModel(boot_seconds=120.0, boot_joules=6_000.0)


def simulate(nodes, pods, policy="default", model=MODEL, daemonsets=(), seed=0):
    cluster = ClusterModel(autoscaler=model, daemonsets=tuple(daemonsets))
    return run_once(nodes, pods, policy, seed, cluster=cluster, record_timeline=True)


@pytest.mark.parametrize("policy", BUILTIN_POLICIES)
def test_a_pod_that_fits_the_powered_on_node_goes_there_for_every_policy(policy):
    # Node b is off: no policy may see it, whatever it thinks of an empty node.
    nodes = [node("a-0", "a", 4, min_count=1), node("b-0", "b", 16)]
    result = simulate(nodes, [pod(0, 5, 100, usage=1, request=1)], policy)
    assert [o.node for o in result.outcomes] == ["a-0"]
    assert result.boots == 0 and result.scale_ups == 0
    # a: 100 W for 5 s, 125 W for 100 s; b is off all along with no standby power.
    assert result.energy_joules == pytest.approx(100 * 5 + 125 * 100)
    assert result.outcomes[0].pending_s == 0


@pytest.mark.parametrize(
    ("frequent_loops", "scale_up_at"),
    # Frequent loops (cluster-autoscaler's default): the pod turning unschedulable at 3 starts a
    # loop at once, which waits for more new pods (under 2 s old: static_autoscaler.go
    # allPodsAreNew), and the next, a scan interval later at 13, boots b. Without: the scans at
    # 0, 10, … and the one at 10 boots b.
    [(True, 13.0), (False, 10.0)],
)
def test_a_pod_that_fits_nowhere_waits_for_a_loop_and_the_boot(frequent_loops, scale_up_at):
    # a (1 core, always on) cannot take a 2-core pod arriving at t = 3; b (4 cores, standby
    # 5 W) boots at the scale-up, ready 120 s later: the pod runs 100 s at u = 0.5 (150 W).
    nodes = [node("a-0", "a", 1, min_count=1), node("b-0", "b", 4, standby=5.0)]
    model = AutoscalerModel(boot_seconds=120.0, boot_joules=6_000.0, frequent_loops_enabled=frequent_loops)
    result = simulate(nodes, [pod(0, 3, 100, usage=2, request=2)], model=model)
    (outcome,) = result.outcomes
    start = scale_up_at + 120.0
    assert (outcome.node, outcome.start_s, outcome.finish_s) == ("b-0", start, start + 100)
    assert outcome.pending_s == pytest.approx(start - 3)
    assert result.unschedulable == 1 and result.boots == 1 and result.scale_ups == 1
    # a: 100 W until the end; b: standby 5 W until the scale-up, boot 6,000 J, then 150 W × 100 s.
    assert result.node_energy_joules["a-0"] == pytest.approx(100.0 * (start + 100))
    assert result.node_energy_joules["b-0"] == pytest.approx(5.0 * scale_up_at + 6_000.0 + 15_000.0)
    assert result.end_s == start + 100


def _two_groups() -> list[NodeSpec]:
    # b: 4 cores, c: 8 cores, both off; b has the higher priority.
    return [node("a-0", "a", 1, min_count=1), node("b-0", "b", 4, priority=1),
            node("c-0", "c", 8, priority=2)]


@pytest.mark.parametrize(
    ("expander", "group", "watts"),
    # least-waste: 2 of 4 cores idle (0.5) beats 6 of 8 (0.75), memory equal. priority: c (2).
    [("least-waste", "b-0", 150.0), ("priority", "c-0", 125.0)],
)
def test_the_expander_decides_the_group(expander, group, watts):
    model = AutoscalerModel(expander=expander, boot_seconds=120.0, boot_joules=6_000.0)
    result = simulate(_two_groups(), [pod(0, 3, 100, usage=2, request=2)], model=model)
    (outcome,) = result.outcomes
    # the loop at 3 waits for new pods, the one at 13 scales up: ready at 133
    assert outcome.node == group and outcome.start_s == 133.0
    assert result.energy_joules == pytest.approx(100 * 233 + 6_000 + watts * 100)


def test_random_expander_and_ties_follow_the_seed():
    model = AutoscalerModel(expander="random", boot_seconds=120.0, boot_joules=6_000.0)
    groups = {
        simulate(_two_groups(), [pod(0, 3, 100, 2, 2)], model=model, seed=s).outcomes[0].node
        for s in range(12)
    }
    assert groups == {"b-0", "c-0"}


def test_least_waste_score_counts_cpu_and_memory():
    infos = {0: pod(0, 0, 1, 1, 3).pod_info(), 1: pod(1, 0, 1, 1, 1).pod_info()}
    template = node("b-0", "b", 4).node_info()  # 4 cores, 8 GiB
    option = ScaleUpOption("b", 2, (0, 1), template)
    # CPU: (8 − 4) / 8 idle; memory: (16 − 1) / 16 GiB idle.
    assert least_waste_score(option, infos.__getitem__) == pytest.approx(0.5 + 15 / 16)


def test_several_pods_get_as_many_nodes_as_first_fit_needs():
    # Three 3-core pods on 4-core template nodes: three nodes, one scale-up (at 11: the loop the
    # pods start at 1 waits for more new pods).
    nodes = [node("a-0", "a", 1, min_count=1)] + [node(f"b-{i}", "b", 4, ordinal=i) for i in range(4)]
    result = simulate(nodes, [pod(i, 1, 50, usage=1, request=3) for i in range(3)])
    assert result.scale_ups == 1 and result.boots == 3
    assert sorted(o.node for o in result.outcomes) == ["b-0", "b-1", "b-2"]
    assert {o.start_s for o in result.outcomes} == {131.0}


@pytest.mark.parametrize(("recheck_s", "gone_at"), [(300.0, 1_043.0), (0.0, 843.0)])
def test_scale_down_after_the_unneeded_time(recheck_s, gone_at):
    # pod 1 keeps a busy until 1,200 s; b boots for pod 0 at 13 (ready 133, empty from 233).
    # While pod 0 runs, b is at the 0.5 threshold but pod 0 fits nowhere else: the removal
    # simulation refuses b at 133, and cluster-autoscaler does not consider it again for
    # --unremovable-node-recheck-timeout (planner.go categorizeNodes AddTimeout; eligibility.go
    # IsRecent): with the shipped 300 s, not before 433, when it is empty and unneeded from; it
    # goes at the first loop (every 10 s from the scale-up) with 433 + 600 strictly before now,
    # t = 1,043. With no recheck timeout the loop at 233 finds it unneeded: gone at 843 (the
    # scale-up's 600 s cool-down ended at 613). Then it draws its 5 W standby.
    nodes = [node("a-0", "a", 1, min_count=1), node("b-0", "b", 4, standby=5.0)]
    pods = [pod(0, 3, 100, usage=2, request=2), pod(1, 0, 1_200, usage=0.5, request=0.5)]
    model = AutoscalerModel(boot_seconds=120.0, boot_joules=6_000.0, unremovable_recheck_s=recheck_s)
    result = simulate(nodes, pods, model=model)
    assert result.scale_downs == 1 and result.end_s == 1_200.0
    b = 5 * 13 + 6_000 + 150 * 100 + 100 * (gone_at - 233) + 5 * (1_200 - gone_at)
    assert result.node_energy_joules["b-0"] == pytest.approx(b)
    assert result.node_energy_joules["a-0"] == pytest.approx(150.0 * 1_200)
    assert (gone_at, 150.0 + 5.0) in result.timeline


def test_min_count_nodes_never_power_off():
    nodes = [node("a-0", "a", 4, min_count=1)]
    result = simulate(nodes, [pod(0, 0, 10, 1, 1), pod(1, 2_000, 10, 1, 1)])
    assert result.scale_downs == 0
    assert result.energy_joules == pytest.approx(125 * 10 + 100 * 1_990 + 125 * 10)


def test_standby_watts_of_nodes_that_stay_off():
    nodes = [node("a-0", "a", 4, min_count=1), node("b-0", "b", 4, standby=7.0),
             node("b-1", "b", 4, ordinal=1, standby=7.0)]
    result = simulate(nodes, [pod(0, 0, 100, usage=2, request=1)])
    assert result.node_energy_joules == pytest.approx({"a-0": 15_000.0, "b-0": 700.0, "b-1": 700.0})


AGENT = DaemonSetSpec("agent", cpu_request=0.5, cpu_usage=1.0, mem_request_gib=0.25)


def test_daemonset_load_is_in_the_power_and_the_requests_but_not_in_emptiness():
    nodes = [node("a-0", "a", 4, min_count=1), node("b-0", "b", 4)]
    seen: list[NodeState] = []

    class Spy:
        name = "spy"

        def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
            pass

        def choose(
            self, pod: PodInfo, feasible: Sequence[NodeState], now: float, candidates: Sequence[NodeState] = ()
        ) -> str:
            seen.extend(feasible)
            return feasible[0].info.name

    sim = Simulation(nodes, [pod(0, 10, 100, usage=1, request=3.5)], autoscaler=autoscaling(MODEL),
                     daemonsets=[AGENT])
    result = run_policy(sim, Spy(), random.Random(0))
    # Only a is on: DaemonSet usage 1 of 4 cores (125 W) for 10 s, then 2 of 4 (150 W).
    assert result.energy_joules == pytest.approx(125 * 10 + 150 * 100)
    (state,) = seen
    assert state.empty and (state.pod_count, state.daemon_pod_count) == (1, 1)
    assert state.requested.cpu_millicores == 500
    # 3.5 cores fit next to the DaemonSet's 0.5; a 3.6-core pod would not (it waits forever:
    # b's template node carries the DaemonSet too).
    late = Simulation(nodes, [pod(0, 10, 100, 1, 3.6)], autoscaler=autoscaling(MODEL), daemonsets=[AGENT])
    assert run_policy(late, Spy(), random.Random(0)).never_scheduled == 1


def test_the_energy_price_takes_a_daemonset_only_node_for_empty():
    """Issue 14: the consolidation price's empty-node branch fires on a node that runs only
    DaemonSet pods. Two always-on 4-core nodes (100 → 200 W), the DaemonSet using 1 core on
    each; pod 0 (1 core) goes to one of them, then pod 1 (1 core request) is priced. The node
    with only the DaemonSet: Δu × a_n = 0.25 × min P(v)/v for v ≤ 0.5 = 0.25 × 150 / 0.5 = 75 W;
    the node running pod 0 (u = 0.5): min(P(0.75) − P(0.5), 75) = 25 W."""
    from rl.policies.catalog import make_policy
    from scheduler.framework import CandidateBatch

    nodes = [node("a-0", "a", 4, min_count=2), node("a-1", "a", 4, ordinal=1, min_count=2)]
    cluster = ClusterModel(autoscaler=MODEL, daemonsets=(AGENT,))
    policy = make_policy("kubejoule", nodes, cluster.policy_power_off())
    energy = policy.profile.plugin("KubejouleEnergy")  # type: ignore[attr-defined]
    priced: list[dict[str, tuple[float, bool]]] = []

    class Spy:
        name = "spy"

        def reset(self, specs: Sequence[NodeSpec], rng: random.Random) -> None:
            policy.reset(specs, rng)

        def choose(
            self, pod: PodInfo, feasible: Sequence[NodeState], now: float, candidates: Sequence[NodeState] = ()
        ) -> str:
            deltas = energy.evaluate(pod, CandidateBatch.of(feasible, now)).delta_watts
            priced.append({s.info.name: (float(d), s.empty) for s, d in zip(feasible, deltas, strict=True)})
            return policy.choose(pod, feasible, now)

    sim = Simulation(nodes, [pod(0, 0, 100, 1, 1), pod(1, 10, 100, 1, 1)], autoscaler=autoscaling(MODEL),
                     daemonsets=[AGENT])
    run_policy(sim, Spy(), random.Random(0))
    first, second = priced
    assert sorted(first.values()) == [(pytest.approx(75.0), True)] * 2
    busy = next(n for n, (_, empty) in second.items() if not empty)
    idle = next(n for n in second if n != busy)
    assert second[busy] == (pytest.approx(25.0), False)
    assert second[idle] == (pytest.approx(75.0), True)


def test_node_group_fields_parse_with_defaults_and_bounds():
    group = {"name": "g", "count": 3, "cpu_cores": 4, "memory_gib": 8,
             "power": {"idle_watts": 50, "max_watts": 100, "curve": "linear"}}
    nodes = parse_node_groups([{**group, "min_count": 1, "standby_watts": 4}])
    assert [(n.always_on, n.initially_on, n.standby_watts) for n in nodes] == [
        (True, True, 4.0), (False, False, 4.0), (False, False, 4.0)]
    nodes = parse_node_groups([{**group, "initial_count": 2}])
    assert [n.initially_on for n in nodes] == [True, True, False]
    from rl.simulation.traces.scenario import ScenarioError
    for bad in ({"min_count": 4}, {"min_count": 2, "initial_count": 1}, {"standby_watts": -1}):
        with pytest.raises(ScenarioError):
            parse_node_groups([{**group, **bad}])


class Recorder:
    """Places every pod on the first candidate and keeps what it was shown."""

    name = "recorder"

    def __init__(self) -> None:
        self.shown: list[tuple[float, tuple[NodeState, ...]]] = []

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        pass

    def choose(
        self, pod: PodInfo, feasible: Sequence[NodeState], now: float, candidates: Sequence[NodeState] = ()
    ) -> str:
        self.shown.append((now, tuple(feasible)))
        return feasible[0].info.name


@pytest.mark.parametrize(("telemetry", "u_seen", "since", "sample"), [
    # The store refreshed at 5 and holds the agent's sample of t = 5: pod 0 (2 cores, placed
    # at 6) is not in it; the cache counts its request as placed since the sample.
    (TelemetryModel(), 0.0, 2.0, 5.0),
    # The ablation: the instantaneous state at 8.
    (None, 0.5, 0.0, 8.0),
])
def test_a_policy_decides_on_the_sample_not_the_instantaneous_state(telemetry, u_seen, since, sample):
    nodes = [node("a-0", "a", 4, min_count=1)]
    pods = [pod(0, 6, 100, usage=2, request=2), pod(1, 8, 100, usage=1, request=1)]
    sim = Simulation(nodes, pods, autoscaler=autoscaling(MODEL), telemetry=telemetry)
    policy = Recorder()
    run_policy(sim, policy, random.Random(0))
    (now, (state,)) = policy.shown[1]
    assert now == 8.0
    assert state.telemetry is not None
    assert (state.telemetry.utilization, state.cpu_since_sample_cores) == (u_seen, since)
    assert state.telemetry.sample_time == sample
    # The energy scorer prices pod 1 from what it is shown: u = 0 + 2/4 with the lag.
    assert EnergyPlugin.utilization_with_assumed(state) == pytest.approx(0.5)


def test_sample_grid_with_a_slower_store():
    model = TelemetryModel(sample_seconds=5, refresh_seconds=15)
    assert [model.visible_sample_time(t) for t in (0, 14.9, 15, 29, 30.0000000001)] == [
        0, 0, 15, 15, 30]
    slow_agent = TelemetryModel(sample_seconds=10, refresh_seconds=5)
    assert slow_agent.visible_sample_time(17) == 10


def test_a_node_not_running_at_the_sample_has_no_telemetry():
    # b boots for pod 0 at the t = 13 loop and is ready at 133; pod 1 arrives at 134, when
    # the store (refreshed at 130) holds the samples of 130: b was not running then.
    nodes = [node("a-0", "a", 1, min_count=1), node("b-0", "b", 4)]
    model = AutoscalerModel(boot_seconds=120.0, boot_joules=0.0)  # ready at 133
    pods = [pod(0, 3, 100, usage=2, request=2), pod(1, 134, 10, 0.5, 0.5)]
    sim = Simulation(nodes, pods, autoscaler=autoscaling(model), telemetry=TelemetryModel())
    policy = Recorder()
    run_policy(sim, policy, random.Random(0))
    shown = {now: {s.info.name: s for s in states} for now, states in policy.shown}
    assert shown[134.0]["b-0"].telemetry is None  # ready at 133, the store holds 130's sample
    assert shown[134.0]["a-0"].telemetry is not None


def test_the_kubejoule_expander_picks_the_least_energy_group():
    # Two off groups for a 2-core pod: "hot" (4 cores, 150 W idle) and "cool" (8 cores, linear
    # 100–200 W): per core of load cool costs less at every load up to the reference 0.5.
    hot = PowerCurve.linear(150.0, 250.0)
    nodes = [node("a-0", "a", 1, min_count=1), NodeSpec("hot-0", "hot", 4, 8, hot, priority=9),
             node("cool-0", "cool", 8)]
    model = AutoscalerModel(expander="kubejoule", boot_seconds=120.0, boot_joules=6_000.0)
    for seed in range(4):
        result = simulate(nodes, [pod(0, 3, 100, usage=2, request=2)], model=model, seed=seed)
        assert result.outcomes[0].node == "cool-0"
        assert result.energy_joules == pytest.approx(100 * 233 + 6_000 + 125 * 100)


def test_telemetry_dropout_hides_the_chosen_nodes_agents_for_the_whole_run():
    names = [f"n{i}" for i in range(400)]
    dropped = dropped_nodes(names, 0.25, seed=3)
    assert dropped == dropped_nodes(names, 0.25, seed=3) != dropped_nodes(names, 0.25, seed=4)
    assert 70 < len(dropped) < 130
    assert dropped_nodes(names, 0.0, 3) == frozenset() and dropped_nodes(names, 1.0, 3) == set(names)
    with pytest.raises(ValueError):
        ClusterModel(telemetry_dropout=1.5)
    nodes = [node("a-0", "a", 4, min_count=1), node("a-1", "a", 4, ordinal=1, min_count=2)]
    sim = Simulation(nodes, [pod(0, 7, 10, 1, 1)], autoscaler=autoscaling(MODEL), telemetry=TelemetryModel(),
                     missing_telemetry=frozenset({"a-1"}))
    policy = Recorder()
    run_policy(sim, policy, random.Random(0))
    (_, states) = policy.shown[0]
    seen = {s.info.name: s.telemetry for s in states}
    assert seen["a-1"] is None and seen["a-0"] is not None and seen["a-0"].sample_time == 5.0
