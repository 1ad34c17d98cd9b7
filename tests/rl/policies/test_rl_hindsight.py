"""The hindsight reference's predictor (rl/policies/hindsight.py): each trace pod's true remaining run
from the simulation — at placement, at an age, after an eviction by owner — and priors for pods
that are not the trace's; it learns nothing."""

from __future__ import annotations

import pytest

from common.curves import PowerCurve
from rl.policies.hindsight import HindsightPredictor
from rl.simulation.engine.simulator import Simulation
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.lifetimes import LEVEL_CONTROLLER, LifetimePredictor

NODES = [NodeSpec("a", "g", 8, 16, PowerCurve.linear(50.0, 150.0)),
         NodeSpec("b", "g", 8, 16, PowerCurve.linear(50.0, 150.0), ordinal=1)]
STARTUP = 10.0


def simulation() -> Simulation:
    pods = [
        PodSpec(0, 0.0, 3600.0, 1.0, 1.0, 1.0, owner_kind="ReplicaSet", workload="web"),
        PodSpec(1, 0.0, 1800.0, 1.0, 1.0, 1.0, owner_kind="Job", workload="batch"),
        PodSpec(2, 0.0, 7200.0, 1.0, 1.0, 1.0, owner_kind="ReplicaSet", workload="db"),
    ]
    return Simulation(NODES, pods, workloads=WorkloadModel(pod_startup_s=STARTUP))


def test_a_pod_is_told_its_true_run_at_placement_and_at_its_age() -> None:
    sim = simulation()
    hindsight = HindsightPredictor(sim)
    seen: dict[str, float] = {}

    def look(s: Simulation) -> None:
        if s.now == 1000.0:
            node = next(n for n in s.nodes if 0 in n.placed_at)
            age = s.now - node.placed_at[0]
            seen["age"] = age
            seen["web"] = hindsight.predict_remaining(s.pod_info(0), age)
            seen["job"] = hindsight.predict_remaining(s.pod_info(1), age)

    assert hindsight.predict(sim.pod_info(0), 0.0).remaining_s == 3600.0
    assert hindsight.predict(sim.pod_info(0), 0.0).level == LEVEL_CONTROLLER
    sim.every(1000.0, look)
    while sim.next_decision() is not None:
        sim.place("a")
    assert seen == {"age": 1000.0, "web": 2600.0, "job": 800.0}
    # past its end (or a NaN age) the answer is never negative
    assert hindsight.predict_remaining(sim.pod_info(1), 5000.0) == 0.0
    assert hindsight.predict_remaining(sim.pod_info(1), float("nan")) == 1800.0


@pytest.mark.parametrize(
    ("index", "expected"),
    [(0, STARTUP + 3600.0 - 1000.0), (1, STARTUP + 1800.0)],
    ids=["a Deployment pod's replacement lives the rest", "a Job pod starts over"],
)
def test_after_an_eviction_the_replacement_is_told_its_own_run(index: int, expected: float) -> None:
    sim = simulation()
    hindsight = HindsightPredictor(sim)
    told: list[float] = []

    def evict(s: Simulation) -> None:
        if s.now == 1000.0:
            node = next(n for n in s.nodes if index in n.placed_at)
            assert s.actions.request_eviction(node, index)
            told.append(hindsight.predict_remaining(s.pod_info(index), 0.0))

    sim.every(1000.0, evict)
    while sim.next_decision() is not None:
        sim.place("a" if sim.now < 1000.0 else "b")
    assert told == [pytest.approx(expected)]


def test_a_pod_not_of_the_trace_gets_the_priors_and_nothing_is_learned() -> None:
    sim = simulation()
    hindsight = HindsightPredictor(sim)
    daemon = pod_info_from_k8s({
        "metadata": {"name": "kube-proxy-a", "namespace": "kube-system", "uid": "ds-kube-proxy-a",
                     "ownerReferences": [{"kind": "DaemonSet", "name": "kube-proxy",
                                          "controller": True, "uid": "x"}]},
        "spec": {"containers": [{"name": "c"}]},
    })
    priors = LifetimePredictor()
    assert hindsight.predict_remaining(daemon, 60.0) == priors.predict_remaining(daemon, 60.0)
    stranger = pod_info_from_k8s({"metadata": {"name": "x", "namespace": "d", "uid": "sim-99"},
                                 "spec": {"containers": [{"name": "c"}]}})
    assert hindsight.trace_index(stranger) is None  # beyond the trace
    assert hindsight.observe_end(sim.pod_info(0), 10.0) is False
    assert hindsight.version == 0


def test_the_hindsight_policy_is_the_shipped_profile_told_the_truth() -> None:
    from rl.evaluation.benchmark import run_once
    from rl.policies.catalog import make_policy
    from rl.policies.hindsight import HindsightPolicy
    from rl.policies.scheduling_profiles import energy_plugins
    from rl.simulation.cluster import ClusterModel

    sim = simulation()
    policy = make_policy("hindsight", NODES)
    assert isinstance(policy, HindsightPolicy) and policy.name == "hindsight"
    policy.attach(sim)
    plugins = energy_plugins(policy.profile)
    shipped = energy_plugins(make_policy("kubejoule", NODES).profile)
    assert plugins and all(p.levers.lifetimes for p in plugins)
    assert [p.levers.efficiency for p in plugins] == [p.levers.efficiency for p in shipped]
    outlook = plugins[0].outlook
    assert isinstance(outlook.source, HindsightPredictor)
    assert outlook.pod_lifetime(sim.pod_info(2)) == 7200.0  # the truth, not the 1-day prior
    learning = make_policy("kubejoule", NODES)
    learning.attach(sim)
    assert energy_plugins(learning.profile)[0].outlook.pod_lifetime(sim.pod_info(2)) != 7200.0
    # it runs as a benchmark entry, with a controller beside it
    result = run_once(NODES, simulation().pods, "hindsight+rebalancer", 0, cluster=ClusterModel())
    assert result.never_scheduled == 0 and len(result.outcomes) == 3


def test_the_benchmark_table_puts_hindsight_beside_the_oracle() -> None:
    from rl.evaluation.report import format_table, is_reference

    row = {"energy_kwh": 1.0, "energy_vs_default_pct": 0.0, "gap_closed_pct": 0.0,
           "slowdown_mean": 0.0, "slowdown_p99": 0.0, "pending_seconds_mean": 0.0,
           "pending_seconds_p99": 0.0, "boots": 0, "scale_ups": 0, "scale_downs": 0,
           "restarted_pods": 0, "unschedulable": 0, "never_scheduled": 0}
    keys = ["default@least-waste", "hindsight@kubejoule", "kubejoule@kubejoule",
            "hindsight+rebalancer@kubejoule", "mostallocated@kubejoule"]
    table = format_table({"policies": dict.fromkeys(keys, row), "oracle": {"energy_kwh": 0.5}})
    names = [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[2:]]
    assert names == ["default@least-waste", "kubejoule@kubejoule", "mostallocated@kubejoule",
                     "hindsight@kubejoule", "hindsight+rebalancer@kubejoule", "oracle bound"]
    assert is_reference("hindsight") and not is_reference("kubejoule@kubejoule")
