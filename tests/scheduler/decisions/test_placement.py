"""The standalone scheduler's decisions (scheduler/decisions/placement.py): the decider's reused, patched
batch gives what the profile gives on a fresh batch of the cache's nodes, pod after pod, on
random clusters; the feasible set and the failure message are those of the per-node filters
(scheduler/domain/filters.py); percentageOfNodesToScore samples as kube-scheduler does."""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
import pytest

from benchmarks.harness.standalone_objects import container, node, pod
from common.curves import PowerCurve
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.config.registry import PluginContext, profile_from_entries
from scheduler.decisions.placement import MODE_ACTIVE, MODE_SHADOW, ProfileDecider
from scheduler.domain.filters import filter_nodes
from scheduler.domain.model import NodeTelemetry, PodInfo
from scheduler.framework import CandidateBatch, SchedulingProfile, select_best
from scheduler.framework.nodes_to_score import num_feasible_nodes_to_find
from scheduler.plugins.defaults import default_profile, kubejoule_profile
from scheduler.plugins.energy import EnergyPlugin
from scheduler.plugins.noderesources import MOST_ALLOCATED
from scheduler.standalone.staging import Stager
from tests.helpers.standalone_harness import StaticTelemetry

ZONES = ("a", "b", "c")


def _random_node(rng: random.Random, i: int) -> dict[str, Any]:
    taints = []
    if rng.random() < 0.15:
        taints.append(
            {"key": "dedicated", "value": rng.choice(["gpu", "db"]), "effect": "NoSchedule"}
        )
    return node(
        f"n{i:03d}",
        cpu=rng.choice(["2", "4", "8", "16", "3500m"]),
        memory=rng.choice(["4Gi", "8Gi", "16Gi", "32Gi"]),
        pods=rng.choice(["110", "110", "3"]),
        ephemeral_storage=rng.choice([None, "10Gi"]),
        labels={"zone": rng.choice(ZONES), "gen": str(rng.randint(1, 6))},
        taints=taints,
        ready=rng.random() > 0.05,
        unschedulable=rng.random() < 0.05,
    )


def _random_pod(rng: random.Random, i: int) -> dict[str, Any]:
    requests: dict[str, str] | None = rng.choice(
        [
            None,
            {},
            {"cpu": f"{rng.randint(1, 40) * 50}m"},
            {"cpu": f"{rng.randint(1, 20) * 100}m", "memory": f"{rng.randint(1, 16) * 256}Mi"},
            {"memory": "1Gi", "ephemeral-storage": "2Gi"},
        ]
    )
    containers = [container("app", requests)]
    if rng.random() < 0.3:
        containers.append(container("sidecar"))  # no requests: kube-scheduler's defaults
    init = (
        [container("init", {"cpu": f"{rng.randint(1, 30) * 100}m"})] if rng.random() < 0.2 else []
    )
    kwargs: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.15:
        kwargs["node_selector"] = {"zone": rng.choice(ZONES)}
    elif roll < 0.3:
        kwargs["affinity_terms"] = [
            {
                "matchExpressions": [
                    {
                        "key": "gen",
                        "operator": rng.choice(["Gt", "Lt"]),
                        "values": [str(rng.randint(1, 6))],
                    }
                ]
            }
        ]
    if rng.random() < 0.2:
        kwargs["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return pod(f"p{i:03d}", containers=containers, init_containers=init, **kwargs)


def _telemetry(rng: random.Random, names: list[str], now: float) -> StaticTelemetry:
    samples = {}
    for name in names:
        roll = rng.random()
        if roll < 0.1:
            continue  # missing
        idle = rng.uniform(40, 120)
        curve = rng.choice(
            [
                PowerCurve.linear(idle, idle + rng.uniform(50, 200)).as_points(),
                PowerCurve.fan(idle, idle + rng.uniform(50, 200), 1.4).as_points(),
                None,  # no curve exported: online fit or no_curve
            ]
        )
        age = 100.0 if roll < 0.2 else rng.uniform(0, 10)  # some stale
        samples[name] = NodeTelemetry(
            name,
            now - age,
            idle * 1.3,
            rng.choice(["rapl", "estimated"]),
            rng.uniform(0, 0.9),
            None,
            curve,
        )
    return StaticTelemetry(samples)


def _profile(kind: str, energy: EnergyPlugin) -> SchedulingProfile:
    if kind == "energy":
        return kubejoule_profile(energy)
    if kind == "defaults+energy":
        return kubejoule_profile(energy, energy_weight=3, with_default_scores=True)
    entries = [  # bin packing plus the extender's view of energy
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": MOST_ALLOCATED}}},
        {"name": "KubejouleEnergy", "weight": 5, "extender": True},
    ]
    return profile_from_entries(entries, PluginContext(energy))


def _cluster(rng: random.Random, now: float) -> tuple[ClusterCache, StaticTelemetry, dict]:
    cache = ClusterCache("kubejoule-scheduler")
    nodes = [_random_node(rng, i) for i in range(60)]
    for obj in nodes:
        cache.upsert_node(obj)
    for i in range(40):  # pods already running somewhere
        running = _random_pod(rng, 1000 + i)
        running["spec"]["nodeName"] = rng.choice(nodes)["metadata"]["name"]
        cache.upsert_pod(running)
    telemetry = _telemetry(rng, [n["metadata"]["name"] for n in nodes], now)
    # Configured Fan-curve nodes: curves that do not come from telemetry.
    fan = {n["metadata"]["name"]: PowerCurve.fan(70.0, 250.0, 1.6) for n in nodes[::5]}
    return cache, telemetry, fan


@pytest.mark.parametrize(
    ("seed", "mode", "kind", "consolidation"),
    [
        (1, MODE_ACTIVE, "energy", False),
        (2, MODE_SHADOW, "energy", True),
        (3, MODE_ACTIVE, "defaults+energy", True),
        (4, MODE_SHADOW, "defaults+energy", False),
        (5, MODE_ACTIVE, "entries", False),
    ],
)
def test_decider_equals_the_profile_on_fresh_batches(
    seed: int, mode: str, kind: str, consolidation: bool
) -> None:
    rng = random.Random(seed)
    now = time.time()
    cache, telemetry, fan = _cluster(rng, now)

    def energy() -> EnergyPlugin:
        return EnergyPlugin(delta_p_ref_watts=30.0, consolidation=consolidation, curves=fan)

    decider = ProfileDecider(_profile(kind, energy()))
    reference, comparison = _profile(kind, energy()), default_profile()
    infeasible = 0
    for i in range(150):
        info = pod_info_from_k8s(_random_pod(rng, i))
        table = cache.table(telemetry.telemetry, telemetry.snapshot())
        got = decider.decide(info, table, mode, random.Random(i), now)
        if not _check(got, info, cache, telemetry.telemetry, kind, reference, comparison, mode, i, now):
            infeasible += 1
            continue
        assert got.chosen is not None
        cache.assume(info, got.chosen, now + i * 0.01)  # the next pod sees this one
    assert 0 < infeasible < 150  # the random cases cover both outcomes


def _check(
    got: Any, info: PodInfo, cache: ClusterCache, telemetry: Any, kind: str, reference: SchedulingProfile,
    comparison: SchedulingProfile, mode: str, i: int, now: float,
) -> bool:
    """`got` equals the profile run on a fresh batch of the cache's nodes; False when no node
    fits (as the reference filters say)."""
    states = cache.node_states(telemetry)
    filtered = filter_nodes(info, states)  # the per-node reference filters
    assert got.names == [s.info.name for s in filtered.feasible], info.key
    if not filtered.feasible:
        assert got.chosen is None
        assert got.summary == filtered.summary()
        return False
    batch = CandidateBatch.of(filtered.feasible, now)
    want = reference.score(info, batch).total
    want_default = comparison.score(info, batch).total
    np.testing.assert_allclose(got.total, want, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(got.default_total, want_default)
    pick = random.Random(i)
    default_choice = batch.names[select_best(want_default, pick)]
    recommended = batch.names[select_best(want, pick)]
    assert (got.recommended, got.default_choice) == (recommended, default_choice)
    assert got.chosen == (recommended if mode == MODE_ACTIVE else default_choice)
    # The energy details are the energy plugin's (also behind the extender's view).
    evaluated = reference.plugin(
        "KubejouleEnergy" if kind != "entries" else "extender:KubejouleEnergy"
    )
    scores = getattr(evaluated, "plugin", evaluated).evaluate(info, batch)  # type: ignore[attr-defined]
    np.testing.assert_allclose(got.score, scores.score, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.delta_watts, scores.delta_watts, rtol=0, atol=1e-9)
    assert [got.reason(j) for j in range(len(got.names))] == scores.reasons()
    return True


@pytest.mark.parametrize(
    ("seed", "kind", "consolidation"),
    [(6, "energy", True), (7, "defaults+energy", False), (8, "entries", True)],
)
def test_refreshes_staged_in_the_background_decide_as_fresh_batches(
    seed: int, kind: str, consolidation: bool
) -> None:
    """Telemetry refreshed every few pods, the new node states and plugin columns staged off
    the decision path (Stager), pods placed between a stage and its adoption: every decision
    still equals the profile on a fresh batch, and the staged table is the one adopted."""
    rng = random.Random(seed)
    now = time.time()
    cache, telemetry, fan = _cluster(rng, now)
    names = cache.node_names()

    def energy() -> EnergyPlugin:
        return EnergyPlugin(delta_p_ref_watts=30.0, consolidation=consolidation, curves=fan)

    decider = ProfileDecider(_profile(kind, energy()))
    reference, comparison = _profile(kind, energy()), default_profile()
    entry = reference.plugin("KubejouleEnergy" if kind != "entries" else "extender:KubejouleEnergy")
    taught = getattr(entry, "plugin", entry)
    stager = Stager(cache, decider, telemetry.snapshot, lambda: now)
    adopted = 0
    for i in range(120):
        staged_table = None
        if i % 12 == 0:
            telemetry.samples = _telemetry(rng, names, now + i).samples  # a refresh: a new view
            for sample in telemetry.samples.values():  # the reference learns from every node too
                taught.observe(sample)
            stager.stage_once()
            staged_table = cache._staged.table  # type: ignore[union-attr]
            if i % 24 == 0:  # a pod placed after the stage, before its adoption
                late = pod_info_from_k8s(_random_pod(rng, 5000 + i))
                cache.assume(late, rng.choice(names), now + i * 0.01)
        assert stager.current is not None
        token, view = stager.current
        info = pod_info_from_k8s(_random_pod(rng, i))
        table = cache.table(view, token)
        if staged_table is not None:
            assert table is staged_table
            adopted += 1
        got = decider.decide(info, table, MODE_ACTIVE, random.Random(i), now)
        if _check(got, info, cache, view, kind, reference, comparison, MODE_ACTIVE, i, now):
            cache.assume(info, got.chosen, now + i * 0.01)  # type: ignore[arg-type]
    assert adopted == 10 and stager.staged == 10


@pytest.mark.parametrize("kind", ["energy", "defaults+energy", "entries"])
def test_the_energy_plugin_is_evaluated_once_per_decision(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision's energy details and the profile's energy entry (also the extender's view
    of it) come from one evaluation."""
    rng = random.Random(7)
    now = time.time()
    cache, telemetry, fan = _cluster(rng, now)
    decider = ProfileDecider(_profile(kind, EnergyPlugin(delta_p_ref_watts=30.0, curves=fan)))
    calls: list[int] = []
    evaluate = EnergyPlugin.evaluate

    def counted(self: EnergyPlugin, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return evaluate(self, *args, **kwargs)

    monkeypatch.setattr(EnergyPlugin, "evaluate", counted)
    decided = 0
    for i in range(20):
        info = pod_info_from_k8s(_random_pod(rng, i))
        calls.clear()
        got = decider.decide(info, cache.table(telemetry.telemetry, telemetry.snapshot()), MODE_ACTIVE,
                             random.Random(i), now)
        if got.chosen is not None:
            decided += 1
            assert len(calls) == 1, info.key
    assert decided > 0


def test_a_profile_without_energy_plugin_explains_nothing_in_watts() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    for i in range(5):
        cache.upsert_node(node(f"n{i}", cpu=str(i + 1)))
    info = pod_info_from_k8s(pod("x", requests={"cpu": "1500m"}))
    got = ProfileDecider(default_profile()).decide(
        info, cache.table(), MODE_ACTIVE, random.Random(0), 0.0
    )
    assert got.names == ["n1", "n2", "n3", "n4"]  # n0 has 1 cpu
    np.testing.assert_array_equal(got.score, got.total)
    assert got.reason(0) == "profile" and np.isnan(got.delta_watts).all()
    assert got.chosen == got.default_choice == "n4"  # LeastAllocated: the emptiest


def test_percentage_of_nodes_to_score_samples_from_where_the_last_search_stopped() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    for i in range(300):  # every third node too small for the pod
        cache.upsert_node(node(f"n{i:03d}", cpu="1" if i % 3 == 0 else "4"))
    info = pod_info_from_k8s(pod("x", requests={"cpu": "2"}))
    decider = ProfileDecider(default_profile(), percentage_of_nodes_to_score=0)
    wanted = num_feasible_nodes_to_find(0, 300)  # 300 × (50 − 2) % = 144
    assert wanted == 144
    first = decider.decide(info, cache.table(), MODE_SHADOW, random.Random(0), 0.0)
    assert len(first.names) == wanted and first.feasible_nodes == 200
    # 144 feasible nodes are the first 216 (two of every three): the next search starts there.
    assert first.names[0] == "n001" and first.names[-1] == "n215"
    assert decider.nodes_to_score.next_start == 216
    second = decider.decide(info, cache.table(), MODE_SHADOW, random.Random(0), 0.0)
    assert second.names[0] == "n217" and len(second.names) == wanted
    # Every feasible node scored without the option.
    every = ProfileDecider(default_profile()).decide(
        info, cache.table(), MODE_SHADOW, random.Random(0), 0.0
    )
    assert len(every.names) == 200
