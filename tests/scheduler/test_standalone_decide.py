"""The vectorized decision equals the reference one, pod after pod, on random clusters."""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
import pytest

from agent.curves import PowerCurve
from scheduler.cluster_cache import ClusterCache
from scheduler.decide import MODE_ACTIVE, MODE_SHADOW, FastDecider, decide
from scheduler.kube_scoring import LEAST_ALLOCATED, MOST_ALLOCATED, KubeDefaultScorer
from scheduler.model import NodeTelemetry, PodInfo
from scheduler.scorer import HeuristicScorer
from tests.helpers.standalone_harness import StaticTelemetry
from tests.helpers.standalone_objects import container, node, pod

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


@pytest.mark.parametrize(
    ("seed", "mode", "strategy", "consolidation"),
    [
        (1, MODE_ACTIVE, LEAST_ALLOCATED, False),
        (2, MODE_SHADOW, LEAST_ALLOCATED, True),
        (3, MODE_ACTIVE, MOST_ALLOCATED, True),
        (4, MODE_SHADOW, MOST_ALLOCATED, False),
    ],
)
def test_fast_decisions_equal_reference_decisions(
    seed: int, mode: str, strategy: str, consolidation: bool
) -> None:
    rng = random.Random(seed)
    now = time.time()
    cache = ClusterCache("kubejoule-scheduler")
    nodes = [_random_node(rng, i) for i in range(60)]
    for obj in nodes:
        cache.upsert_node(obj)
    for i in range(40):  # pods already running somewhere
        running = _random_pod(rng, 1000 + i)
        running["spec"]["nodeName"] = rng.choice(nodes)["metadata"]["name"]
        cache.upsert_pod(running)
    telemetry = _telemetry(rng, [n["metadata"]["name"] for n in nodes], now)
    # Configured Fan-curve nodes take the scorer's non-vectorized path inside its batch.
    fan = {n["metadata"]["name"]: PowerCurve.fan(70.0, 250.0, 1.6) for n in nodes[::5]}
    scorer = HeuristicScorer(delta_p_ref_watts=30.0, consolidation=consolidation, curves=fan)
    fast = FastDecider(scorer, strategy)
    infeasible = 0
    for i in range(150):
        info = PodInfo.from_k8s(_random_pod(rng, i))
        table = cache.table(telemetry.telemetry, telemetry.snapshot())
        got = fast.decide(info, table, mode, random.Random(i), now)
        want = decide(
            info,
            cache.node_states(telemetry.telemetry),
            scorer,
            mode,
            random.Random(i),
            now,
            strategy,
        )
        assert got.names == want.names, info.key
        assert got.summary == want.summary
        if want.chosen is None:
            infeasible += 1
            assert got.chosen is None
            continue
        np.testing.assert_array_equal(got.default_total, want.default_total)
        np.testing.assert_allclose(got.score, want.score, rtol=0, atol=1e-9)
        np.testing.assert_allclose(got.delta_watts, want.delta_watts, rtol=0, atol=1e-9)
        assert [got.reason(j) for j in range(len(got.names))] == [
            want.reason(j) for j in range(len(want.names))
        ]
        assert (got.chosen, got.recommended, got.default_choice) == (
            want.chosen,
            want.recommended,
            want.default_choice,
        )
        cache.assume(info, got.chosen, now + i * 0.01)  # the next pod sees this one
    assert 0 < infeasible < 150  # the random cases cover both outcomes


def test_fast_decider_works_with_any_scorer() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    for i in range(5):
        cache.upsert_node(node(f"n{i}", cpu=str(i + 1)))
    info = PodInfo.from_k8s(pod("x", requests={"cpu": "1500m"}))
    scorer = KubeDefaultScorer()  # no batch path: the decider scores through score()
    got = FastDecider(scorer).decide(info, cache.table(), MODE_ACTIVE, random.Random(0), 0.0)
    want = decide(info, cache.node_states(), scorer, MODE_ACTIVE, random.Random(0), 0.0)
    assert got.names == want.names == ["n1", "n2", "n3", "n4"]
    np.testing.assert_array_equal(got.score, want.score)
    assert got.chosen == want.chosen == "n4"
