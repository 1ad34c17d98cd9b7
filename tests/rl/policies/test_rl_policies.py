"""The simulator's policies: kube-scheduler's choice, round robin, and that every scorer policy
runs the scheduler's own plugins (their formulas are tested in tests/scheduler/plugins/test_plugin_*)."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from common.curves import PowerCurve
from rl.policies.catalog import BUILTIN_POLICIES, PluginPolicy, RoundRobinPolicy, make_policy
from rl.simulation.traces.scenario import NodeSpec
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources
from scheduler.framework import CandidateBatch

GIB = 2**30


def make_pod(cpu_millicores: int, memory_gib: float = 1.0) -> PodInfo:
    return PodInfo("ns", "p", "uid", Resources(cpu_millicores, round(memory_gib * GIB), 1))


def make_node(
    name: str,
    cores: float,
    memory_gib: float,
    requested_mc: int = 0,
    requested_gib: float = 0.0,
    utilization: float | None = 0.0,
    since_sample_cores: float = 0.0,
) -> NodeState:
    info = NodeInfo(name, Resources(round(cores * 1000), round(memory_gib * GIB), 110))
    telemetry = None
    if utilization is not None:
        telemetry = NodeTelemetry(
            name, 0.0, watts=100.0, source="estimated", utilization=utilization, cores=cores
        )
    return NodeState(
        info,
        requested=Resources(requested_mc, round(requested_gib * GIB), 1),
        telemetry=telemetry,
        cpu_since_sample_cores=since_sample_cores,
        pod_count=1 if requested_mc else 0,
    )


# --- kube-scheduler default / MostAllocated --------------------------------------------------


def test_default_policy_follows_kube_scheduler_totals():
    # Pod 1 core / 1 GiB.
    # a (4 cores, 8 GiB, 1 core + 2 GiB requested): LeastAllocated cpu (4000−2000)·100//4000 = 50,
    #   memory (8−3)/8 → 62, (50+62)//2 = 56; Balanced: |0.5 − 0.375|/2 → int(93.75) = 93: 149.
    # b (8 cores, 8 GiB, 6 cores + 1 GiB): cpu 12, memory 75 → 43; Balanced |0.875−0.25|/2
    #   → int(68.75) = 68: 111.  kube-scheduler picks a.
    pod = make_pod(1000, 1.0)
    nodes = [make_node("b", 8, 8, 6000, 1.0), make_node("a", 4, 8, 1000, 2.0)]
    policy = make_policy("default", [])
    policy.reset([], random.Random(0))
    assert policy.choose(pod, nodes, 0.0) == "a"


def test_mostallocated_packs_the_fuller_node():
    # a empty (4 cores, 8 GiB): MostAllocated cpu 25, memory 12 → 18; Balanced |0.25−0.125|/2
    #   → 93: 111.  b (4 cores, 8 GiB, 2 cores + 2 GiB): cpu 75, memory 37 → 56; Balanced
    #   |0.75 − 0.375|/2 → 81: 137.  MostAllocated picks b; LeastAllocated picks a.
    pod = make_pod(1000, 1.0)
    nodes = [make_node("a", 4, 8), make_node("b", 4, 8, 2000, 2.0)]
    packing = make_policy("mostallocated", [])
    spreading = make_policy("default", [])
    for policy in (packing, spreading):
        policy.reset([], random.Random(0))
    assert packing.choose(pod, nodes, 0.0) == "b"
    assert spreading.choose(pod, nodes, 0.0) == "a"


def test_default_breaks_ties_at_random():
    pod = make_pod(500)
    nodes = [make_node(f"n{i}", 4, 8) for i in range(4)]
    chosen = set()
    for seed in range(40):
        policy = make_policy("default", [])
        policy.reset([], random.Random(seed))
        chosen.add(policy.choose(pod, nodes, 0.0))
    assert chosen == {"n0", "n1", "n2", "n3"}


def test_roundrobin_cycles_over_feasible_nodes():
    specs = [NodeSpec(f"n{i}", "g", 4, 8, PowerCurve.linear(1, 2)) for i in range(3)]
    states = [make_node(f"n{i}", 4, 8) for i in range(3)]
    policy = RoundRobinPolicy()
    policy.reset(specs, random.Random(0))
    pod = make_pod(100)
    assert [policy.choose(pod, states, 0.0) for _ in range(4)] == ["n0", "n1", "n2", "n0"]
    # n1 infeasible: skip to n2, then wrap to n0.
    assert policy.choose(pod, [states[0], states[2]], 0.0) == "n2"
    assert policy.choose(pod, [states[0], states[2]], 0.0) == "n0"


# --- scorer hook -------------------------------------------------------------------------------


class PreferNamed:
    name = "prefer"

    def __init__(self, favourite: str) -> None:
        self.favourite = favourite

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        return np.array([90.0 if name == self.favourite else 10.0 for name in batch.names])


def make_prefer_b(nodes):
    return PreferNamed("b")


def test_any_score_plugin_is_a_policy():
    policy = PluginPolicy(PreferNamed("b"))
    policy.reset([], random.Random(0))
    nodes = [make_node("a", 4, 8), make_node("b", 4, 8)]
    assert policy.choose(make_pod(100), nodes, 0.0) == "b"
    loaded = make_policy(f"py:{__name__}:make_prefer_b", [])
    loaded.reset([], random.Random(0))
    assert loaded.choose(make_pod(100), nodes, 0.0) == "b"


def test_every_builtin_policy_builds_and_unknown_names_fail():
    specs = [NodeSpec("a", "g", 4, 8, PowerCurve.linear(50, 100))]
    for name in BUILTIN_POLICIES:
        assert make_policy(name, specs).name == name
    with pytest.raises(ValueError):
        make_policy("nope", specs)
    with pytest.raises(ValueError):
        make_policy("py:only-module", specs)


# --- the policies run the scheduler's code, not a copy of it --------------------------------


def test_default_policy_scores_with_the_default_profiles_plugins(monkeypatch: pytest.MonkeyPatch):
    """`default` runs scheduler.plugins' NodeResourcesBalancedAllocation: tilting it towards the
    node LeastAllocated ranks lower moves the choice there."""
    from scheduler.plugins.noderesources import NodeResourcesBalancedAllocation

    pod = make_pod(1000, 1.0)
    nodes = [make_node("a", 4, 8), make_node("b", 4, 8, 2000, 2.0)]

    def choice() -> str:
        policy = make_policy("default", [])
        policy.reset([], random.Random(0))
        return policy.choose(pod, nodes, 0.0)

    assert choice() == "a"

    def favour_b(self, pod_info, batch):
        return np.array([1000 if n == "b" else 0 for n in batch.names], dtype=np.int64)

    monkeypatch.setattr(NodeResourcesBalancedAllocation, "score", favour_b)
    assert choice() == "b"


def test_heuristic_and_kubejoule_policies_run_the_energy_plugin(monkeypatch: pytest.MonkeyPatch):
    from scheduler.plugins.energy import EnergyPlugin

    specs = [NodeSpec(n, "g", 4, 8, PowerCurve.linear(50, 100)) for n in ("a", "b", "c")]
    states = [make_node(n, 4, 8) for n in ("a", "b", "c")]
    seen: list[tuple[str, ...]] = []
    evaluate = EnergyPlugin.evaluate

    def prefer_c(self, pod, batch, *args, **kwargs):
        seen.append(tuple(batch.names))
        scores = evaluate(self, pod, batch, *args, **kwargs)
        return dataclasses.replace(
            scores, score=np.array([99.0 if n == "c" else 1.0 for n in batch.names])
        )

    monkeypatch.setattr(EnergyPlugin, "evaluate", prefer_c)
    for name in ("heuristic", "kubejoule"):
        policy = make_policy(name, specs)
        policy.reset(specs, random.Random(0))
        assert policy.choose(make_pod(500), states, 0.0) == "c"
    assert seen == [("a", "b", "c")] * 2  # one batched call with every candidate


def test_peaks_and_trimaran_policies_run_the_scheduler_plugins(monkeypatch: pytest.MonkeyPatch):
    """`peaks` and `trimaran` call scheduler.plugins' kernels: tilting each kernel towards one
    node moves the policy's choice there."""
    import scheduler.plugins.peaks as peaks_plugin
    import scheduler.plugins.trimaran as trimaran_plugin

    specs = [NodeSpec(n, "g", 4, 8, PowerCurve.linear(50, 100)) for n in ("a", "b", "c")]
    states = [make_node(n, 4, 8, utilization=0.1) for n in ("a", "b", "c")]

    def choice(name: str) -> str:
        policy = make_policy(name, specs)
        policy.reset(specs, random.Random(0))
        return policy.choose(make_pod(500), states, 0.0)

    def tlp_prefers_c(util, capacity, added, target=40):
        return np.array([0, 0, 90], dtype=np.int64)

    monkeypatch.setattr(trimaran_plugin, "target_load_packing_scores", tlp_prefers_c)
    assert choice("trimaran") == "c"

    def peaks_raw_prefers_b(util, capacity, pod_mc, k1, k2):
        return np.array([50, 1, 50], dtype=np.int64)  # b: the smallest jump

    monkeypatch.setattr(peaks_plugin, "peaks_raw_scores", peaks_raw_prefers_b)
    assert choice("peaks") == "b"


@pytest.mark.parametrize("lagging", [True, False])
def test_simulated_nodes_list_the_pods_bound_since_their_sample(lagging: bool):
    """TargetLoadPacking predicts each pod bound since the sample: the simulator lists exactly
    the pods whose requests make up `cpu_since_sample_cores`, with lagging samples and with the
    perfect-telemetry ablation (pods waiting for a boot)."""
    from rl.simulation.engine.simulator import PowerOffModel, Simulation
    from rl.simulation.engine.telemetry import TelemetryModel
    from rl.simulation.traces.scenario import PodSpec

    specs = [NodeSpec(n, "g", 4, 8, PowerCurve.linear(50, 100)) for n in ("a", "b")]
    # A burst, a quiet spell (the nodes power off in the ablation), then a second burst.
    times = [i * 0.7 if i < 12 else 100 + i * 0.5 for i in range(24)]
    pods = [PodSpec(i, t, 30.0, 0.25 + 0.25 * (i % 3), 0.5, 0.3) for i, t in enumerate(times)]
    sim = Simulation(
        specs,
        pods,
        power_off=None if lagging else PowerOffModel(after_seconds=1.0, boot_seconds=20.0),
        telemetry=TelemetryModel(sample_seconds=5.0, refresh_seconds=5.0) if lagging else None,
    )
    seen = 0
    while (decision := sim.next_decision()) is not None:
        for state in decision.feasible:
            listed = sum(p.requests.cpu_millicores for p in state.pods_since_sample)
            assert listed == round(state.cpu_since_sample_cores * 1000)
            seen += len(state.pods_since_sample)
        sim.place(decision.feasible[decision.pod.index % len(decision.feasible)].info.name)
    assert seen > 0  # some decisions did see pods bound since the sample
