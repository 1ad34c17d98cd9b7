"""The energy plugin's v3 levers (scheduler/plugins/energy/levers.py): node-time pricing with
predicted lifetimes, nodes cluster-autoscaler is about to remove, efficiency, and the per-pod
scale that never saturates."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from common.curves import PowerCurve
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.config.registry import PluginContext, score_entries
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources, Taint
from scheduler.framework import CandidateBatch
from scheduler.plugins.energy import EnergyPlugin
from scheduler.plugins.energy.levers import (
    DELETION_CANDIDATE_TAINT,
    SCALE_FIXED,
    SCALE_POD,
    SHIPPED_LEVERS,
    Levers,
    node_empty_in,
)
from tests.helpers.outlook import NodeOutlook, one_node

NOW = 1_000_000.0
LINEAR_100_300 = PowerCurve.linear(100.0, 300.0).as_points()  # 200 W per unit of utilization
# SPECpower_ssj2008 curves of rl/scenarios/heterogeneous.yaml (W at 0 %, 10 % … 100 %).
WESTMERE = (58.4, 98.0, 109.0, 118.0, 128.0, 140.0, 153.0, 170.0, 189.0, 205.0, 222.0)  # 24 CPUs
X5670 = (66.0, 107.0, 120.0, 131.0, 143.0, 156.0, 173.0, 191.0, 211.0, 229.0, 247.0)  # 24 CPUs
# A wasteful kind: high idle power, shallow slope (per unit of utilization: 100 W idle + 50 W).
FLAT_100_150 = PowerCurve.linear(100.0, 150.0).as_points()


def pod(cpu: str = "1", name: str = "p") -> PodInfo:
    return pod_info_from_k8s({
        "metadata": {"name": name, "namespace": "ns", "uid": name,
                     "ownerReferences": [{"kind": "Job", "name": "j", "controller": True}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    })


def node(
    name: str,
    utilization: float = 0.3,
    points: tuple[float, ...] = LINEAR_100_300,
    cores: float = 10.0,
    pods: int = 2,
    taints: tuple[Taint, ...] = (),
    requested_cpu: float = 3.0,
) -> NodeState:
    info = NodeInfo(name, Resources(cpu_millicores=int(cores * 1000), memory_bytes=64 << 30),
                    taints=taints)
    telemetry = NodeTelemetry(node=name, sample_time=NOW - 1.0, watts=200.0, source="rapl",
                              utilization=utilization, cores=cores, curve_points=points)
    return NodeState(info=info, telemetry=telemetry, pod_count=pods,
                     requested=Resources(cpu_millicores=int(requested_cpu * 1000)))


class FakeOutlook:
    """An Outlook with fixed answers."""

    def __init__(self, life: float | None, nodes: dict[str, NodeOutlook]) -> None:
        self.life = life
        self.known = nodes

    def pod_lifetime(self, pod: PodInfo) -> float | None:
        return self.life

    def nodes(self, names):
        found = [self.known.get(name) for name in names]
        ends = np.array([np.nan if o is None or o.empty_in_s is None else o.empty_in_s for o in found])
        return ends, np.array([o is not None and o.unneeded for o in found], dtype=bool)


def plugin(levers: Levers, outlook: FakeOutlook | None = None) -> EnergyPlugin:
    return EnergyPlugin(consolidation=True, levers=levers, outlook=outlook)


def evaluate(p: EnergyPlugin, states: list[NodeState], cpu: str = "1"):
    return p.evaluate(pod(cpu), CandidateBatch.of(states, NOW))


def line_share(cores: float, delta_cores: float) -> float:
    """The consolidation share on the 100→300 W line at u_ref 0.5: Δu × P(0.5) / 0.5."""
    return delta_cores / cores * 200.0 / 0.5


# -- the levers' args ----------------------------------------------------------------------------


def test_args_left_out_are_on_and_bad_args_are_named() -> None:
    assert Levers.from_config({"efficiency": False}) == Levers(
        lifetimes=True, protect_removal=True, efficiency=False, scale=SCALE_POD)
    v2 = Levers.from_config({"lifetimes": False, "protectRemoval": False, "efficiency": False,
                           "scale": SCALE_FIXED})
    assert not v2.v3
    with pytest.raises(ValueError, match="unknown args.*lifetime"):
        Levers.from_config({"lifetime": True})
    with pytest.raises(ValueError, match="lifetimes must be true or false"):
        Levers.from_config({"lifetimes": "yes"})
    with pytest.raises(ValueError, match="scale must be one of"):
        Levers.from_config({"scale": "log"})
    with pytest.raises(ValueError, match="scaleDownUtilizationThreshold"):
        Levers.from_config({"scaleDownUtilizationThreshold": 1.5})


def test_profile_args_configure_the_schedulers_energy_plugin() -> None:
    energy = EnergyPlugin(delta_p_ref_watts=35.0, consolidation=True)
    entries = [{"name": "KubejouleEnergy", "args": {"efficiency": False, "scale": "pod"}}]
    built = score_entries(entries, PluginContext(energy))[0][0]
    assert isinstance(built, EnergyPlugin)
    assert built.levers == Levers(lifetimes=True, protect_removal=True, efficiency=False, scale=SCALE_POD)
    assert (built.delta_p_ref_watts, built.consolidation) == (35.0, True)  # set up as the given one
    assert energy.levers == Levers()  # building it changed no other plugin
    with pytest.raises(ValueError, match=r"profile\[0\] \(KubejouleEnergy\): unknown args"):
        score_entries([{"name": "KubejouleEnergy", "args": {"packing": True}}], PluginContext(energy))
    bare = EnergyPlugin()
    assert score_entries([{"name": "KubejouleEnergy"}], PluginContext(bare))[0][0] is bare
    assert bare.levers == Levers()  # no args: the plugin as the scorer: section sets it up


# -- (a) lifetimes -------------------------------------------------------------------------------


def test_a_pod_outliving_the_nodes_pods_pays_the_idle_share_for_the_extension() -> None:
    levers = Levers(lifetimes=True, scale=SCALE_POD)
    states = [node("soon"), node("late")]
    nodes = {"soon": NodeOutlook(100.0), "late": NodeOutlook(10_000.0)}
    marginal = 0.1 * 200.0  # 1 core of 10 on the line
    share = line_share(10.0, 1.0)
    # A pod of 1,000 s: on "late" it ends first (marginal only); on "soon" it keeps the node on
    # for 900 of its 1,000 s, paying the share for them.
    long = evaluate(plugin(levers, FakeOutlook(1_000.0, nodes)), states)
    assert long.delta_watts[1] == pytest.approx(marginal)
    assert long.delta_watts[0] == pytest.approx(0.1 * marginal + 0.9 * share)
    assert long.score[1] > long.score[0]
    # A pod of 50 s ends before the pods of either: marginal watts on both, a tie on price.
    short = evaluate(plugin(levers, FakeOutlook(50.0, nodes)), states)
    assert short.delta_watts == pytest.approx([marginal, marginal])
    # Without the lever the long pod sees the same two nodes alike.
    off = evaluate(plugin(Levers(scale=SCALE_POD), FakeOutlook(1_000.0, nodes)), states)
    assert off.delta_watts == pytest.approx([marginal, marginal])


def test_without_a_prediction_a_running_node_costs_its_marginal_watts() -> None:
    levers = Levers(lifetimes=True, scale=SCALE_POD)
    states = [node("a"), node("b"), node("empty", utilization=0.0, pods=0)]
    no_life = evaluate(plugin(levers, FakeOutlook(None, {"a": NodeOutlook(10.0)})), states)
    unknown_node = evaluate(plugin(levers, FakeOutlook(1_000.0, {})), states)
    for result in (no_life, unknown_node):
        assert result.delta_watts[:2] == pytest.approx([20.0, 20.0])
        assert result.delta_watts[2] == pytest.approx(line_share(10.0, 1.0))  # empty: the share


def test_node_empty_in_is_the_longest_remaining_lifetime_at_each_pods_age() -> None:
    pods = [(pod(name="a"), NOW - 100.0), (pod(name="b"), NOW - 10.0)]
    remaining = {("a", 100.0): 50.0, ("b", 10.0): 400.0}
    assert node_empty_in(pods, NOW, lambda p, age: remaining[(p.name, age)]) == 400.0
    assert node_empty_in([], NOW, lambda p, age: 1.0) == 0.0
    assert node_empty_in(pods, NOW, lambda p, age: float("nan")) == 0.0


# -- (b) nodes cluster-autoscaler is about to remove ---------------------------------------------


def test_a_node_about_to_be_removed_is_not_revived_for_a_short_pod() -> None:
    levers = Levers(lifetimes=True, protect_removal=True, scale=SCALE_POD)
    taint = (Taint(DELETION_CANDIDATE_TAINT, "1700000000", "PreferNoSchedule"),)
    states = [
        node("tainted", taints=taint),
        node("unneeded-low", requested_cpu=3.0),  # 30 % of requests: below CA's 0.5
        node("unneeded-high", requested_cpu=7.0),  # 70 %: CA would not remove it
        node("kept"),
    ]
    outlook = FakeOutlook(50.0, {
        "tainted": NodeOutlook(5_000.0), "unneeded-low": NodeOutlook(5_000.0, unneeded=True),
        "unneeded-high": NodeOutlook(5_000.0, unneeded=True), "kept": NodeOutlook(5_000.0),
    })
    result = evaluate(plugin(levers, outlook), states)
    share, marginal = line_share(10.0, 1.0), 20.0
    assert result.delta_watts == pytest.approx([share, share, marginal, marginal])
    assert result.score[3] > result.score[0] and result.score[2] > result.score[1]
    # The lever off: the short pod takes the cheap marginal watts of the doomed nodes too.
    off = evaluate(plugin(Levers(lifetimes=True, scale=SCALE_POD), outlook), states)
    assert off.delta_watts == pytest.approx([marginal] * 4)
    # The live scheduler sees only the taint: it needs no outlook for it.
    live = evaluate(plugin(Levers(protect_removal=True, scale=SCALE_POD)), states)
    assert live.delta_watts == pytest.approx([share, marginal, marginal, marginal])


def test_the_threshold_is_the_levers() -> None:
    levers = Levers(protect_removal=True, scale=SCALE_POD, scale_down_utilization_threshold=0.2)
    outlook = FakeOutlook(50.0, {"n": NodeOutlook(5_000.0, unneeded=True)})
    result = evaluate(plugin(levers, outlook), [node("n", requested_cpu=3.0)])
    assert result.delta_watts[0] == pytest.approx(20.0)  # 30 % of requests is above 0.2


# -- (c) efficiency ------------------------------------------------------------------------------


def test_efficiency_sends_load_to_the_nodes_with_the_fewest_watts_per_unit_of_work() -> None:
    # "flat" (4 cores) idles at 100 W and adds only 50 W at full load: a core costs 12.5 W of
    # marginal power there against 20 W on the 10-core line, but full it spends 150 W for 4
    # cores (37.5 W each) against the line's 300 W for 10 (30 W each).
    states = [node("flat", points=FLAT_100_150, cores=4.0), node("line", cores=10.0)]
    marginal_only = evaluate(plugin(Levers(scale=SCALE_POD)), states)
    assert marginal_only.delta_watts == pytest.approx([12.5, 20.0])
    assert marginal_only.score[0] > marginal_only.score[1]
    efficient = evaluate(plugin(Levers(efficiency=True, scale=SCALE_POD)), states)
    # v = max(u + Δu, efficiencyUtilization 1): Δu × P(1) / 1.
    assert efficient.delta_watts == pytest.approx([0.25 * 150.0, 0.1 * 300.0])
    assert efficient.score[1] > efficient.score[0]
    # At a configured expected utilization of 0.5: flat 0.25 × P(0.55) / 0.55, line 0.1 ×
    # P(0.5) / 0.5 (its share at the reference load: the cap).
    half = Levers(efficiency=True, scale=SCALE_POD, efficiency_utilization=0.5)
    at_half = evaluate(plugin(half), states)
    assert at_half.delta_watts == pytest.approx([0.25 * 127.5 / 0.55, 0.1 * 200.0 / 0.5])
    assert Levers.from_config({"efficiencyUtilization": 0.5}).efficiency_utilization == 0.5
    with pytest.raises(ValueError, match="efficiencyUtilization must be in"):
        Levers.from_config({"efficiencyUtilization": 0})


def test_efficiency_never_prices_a_running_node_above_an_empty_one_of_its_kind() -> None:
    for u, cpu in itertools.product((0.0, 0.1, 0.3, 0.6, 0.9), ("0.1", "1", "5", "24")):
        states = [node("running", utilization=u, points=WESTMERE, cores=24.0),
                  node("empty", utilization=0.0, points=WESTMERE, cores=24.0, pods=0,
                       requested_cpu=0.0)]
        result = evaluate(plugin(SHIPPED_LEVERS), states, cpu)
        assert result.delta_watts[0] <= result.delta_watts[1] + 1e-9
        assert result.score[0] > result.score[1], (u, cpu)  # fuller wins a tie on price


# -- the scale: no ΔP_ref that saturates -----------------------------------------------------------


@pytest.mark.parametrize("levers", [SHIPPED_LEVERS, Levers(scale=SCALE_POD)], ids=["v3", "pod-scale"])
def test_two_nodes_whose_prices_differ_never_tie_from_a_tenth_of_a_core_to_64(levers: Levers) -> None:
    sizes = ("100m", "250m", "500m", "1", "2", "4", "8", "16", "32", "48", "64")
    states = [
        node("westmere", utilization=0.2, points=WESTMERE, cores=128.0),
        node("x5670", utilization=0.2, points=X5670, cores=128.0),
        node("westmere-empty", utilization=0.0, points=WESTMERE, cores=128.0, pods=0),
        node("x5670-empty", utilization=0.0, points=X5670, cores=128.0, pods=0),
    ]
    p = plugin(levers)
    for cpu in sizes:
        result = evaluate(p, states, cpu)
        prices = result.delta_watts
        for i, j in itertools.combinations(range(len(states)), 2):
            if abs(prices[i] - prices[j]) > 1e-9 * max(prices[i], prices[j]):
                assert result.score[i] != result.score[j], (cpu, i, j)
                assert (result.score[i] > result.score[j]) == (prices[i] < prices[j]), (cpu, i, j)
    # The v2 scale (ΔP_ref 20 W) saturates: a big pod scores 0 everywhere.
    saturated = evaluate(EnergyPlugin(consolidation=True), states, "32")
    assert np.all(saturated.score == 0.0)


def test_scores_are_candidate_independent() -> None:
    outlook = FakeOutlook(900.0, {
        "a": NodeOutlook(100.0), "b": NodeOutlook(5_000.0, unneeded=True), "c": NodeOutlook(0.0),
    })
    states = [node("a", points=WESTMERE, cores=24.0), node("b", requested_cpu=2.0),
              node("c", utilization=0.0, pods=0, points=X5670, cores=24.0)]
    p = plugin(SHIPPED_LEVERS, outlook)
    together = evaluate(p, states)
    for i, state in enumerate(states):
        alone = evaluate(p, [state])
        assert alone.score[0] == together.score[i]
        assert alone.delta_watts[0] == together.delta_watts[i]


# -- the live outlook: the standalone scheduler's cluster cache ------------------------------------


def test_the_live_outlook_reads_the_cluster_cache_and_learns_from_pods_that_end() -> None:
    from benchmarks.harness.standalone_objects import node as node_object
    from benchmarks.harness.standalone_objects import pod as pod_object
    from scheduler.cluster.cache import ClusterCache
    from scheduler.lifetimes import LifetimePredictor
    from scheduler.plugins.energy.levers import CacheOutlook

    clock = [1_000.0]
    predictor = LifetimePredictor()
    cache = ClusterCache("kubejoule-scheduler", lambda: clock[0], lifetimes=predictor)
    outlook = CacheOutlook(cache, predictor, lambda: clock[0])
    cache.upsert_node(node_object("n"))
    cache.upsert_node(node_object("idle"))

    def job_pod(name: str) -> dict:
        obj = pod_object(name, requests={"cpu": "1"}, node_name="n")
        obj["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "batch", "controller": True}]
        obj["metadata"]["creationTimestamp"] = "1970-01-01T00:16:40Z"  # 1,000 s
        obj["status"] = {"phase": "Running"}
        return obj

    first, second = job_pod("first"), job_pod("second")
    cache.upsert_pod(first)
    cache.upsert_pod(second)
    prior = predictor.prior_seconds("Job")
    assert one_node(outlook, "idle").empty_in_s == 0.0
    assert one_node(outlook, "n").empty_in_s == pytest.approx(prior)  # the Lomax prior at age 0
    assert outlook.pod_lifetime(pod_info_from_k8s(first)) == pytest.approx(prior)
    clock[0] = 1_060.0  # the first ends after 60 s: learned, and the node's pods predicted again
    cache.upsert_pod({**first, "status": {"phase": "Succeeded"}})
    assert predictor.version == 1
    # The second, at 60 s, has outlived every lifetime learned: the prior again, at its age.
    assert one_node(outlook, "n").empty_in_s == pytest.approx(
        predictor.predict_remaining(pod_info_from_k8s(second), 60.0))
    third = job_pod("third")
    third["metadata"]["creationTimestamp"] = "1970-01-01T00:17:30Z"  # 1,050 s: 10 s old
    cache.upsert_pod({**second, "status": {"phase": "Succeeded"}})
    cache.upsert_pod(third)
    # Two Job pods of 60 s learned: the third, 10 s old, is predicted to end well before the prior.
    assert one_node(outlook, "n").empty_in_s < prior / 2
