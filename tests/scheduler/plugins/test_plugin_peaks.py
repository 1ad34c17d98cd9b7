"""PEAKS against kubernetes-sigs/scheduler-plugins' own tests.

Each Go case is translated with its inputs and expected score and cites its source as
(repository, path, test function, case name). Cases marked `kubejoule` are ours, computed by
hand from pkg/trimaran/peaks/peaks.go (Score, NormalizeScore).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from benchmarks.harness.standalone_objects import container, node, pod
from common.curves import PowerCurve
from scheduler.cluster.kubeobjects import node_info_from_k8s, pod_info_from_k8s
from scheduler.domain.filters import filter_nodes
from scheduler.domain.model import NodeState, NodeTelemetry, Resources
from scheduler.framework import CandidateBatch, NormalizingPlugin, normalized
from scheduler.plugins.peaks import (
    Peaks,
    PeaksPowerModel,
    fit_power_model,
    peaks_normalize,
    peaks_raw_scores,
    pod_request_millicores,
)

SP = "kubernetes-sigs/scheduler-plugins"
SCORE = f"{SP} pkg/trimaran/peaks/peaks_test.go TestPeaksScore"
NORMALIZE = f"{SP} pkg/trimaran/peaks/peaks_test.go TestPeaksNormalizeScore"
INTEGRATION = f"{SP} test/integration/peaks_test.go TestPeaksPlugin"
OURS = "kubejoule"

# The power model of peaks_test.go's `data` (node-1), and of test/integration/peaks_test.go.
K0, K2 = 471.7412504314313, -0.07186049052516228
GO_MODELS = {
    "node-1": PeaksPowerModel(K0, -91.50493019588365, K2),
    "node-2": PeaksPowerModel(K0, -1091.50493019588365, K2),
    "node-3": PeaksPowerModel(K0, -2091.50493019588365, K2),
}
# peaks_test.go's scoreToUse: int64(getPowerJumpForUtilisation(0, 100, node-1's model) × 10^15).
M1 = GO_MODELS["node-1"]
SCORE_TO_USE = int(M1.k1 * (math.exp(M1.k2 * 100) - math.exp(M1.k2 * 0)) * math.pow(10, 15))


def state(node_obj: Mapping[str, Any], cpu_pct: float | None, metrics: bool = True) -> NodeState:
    info = node_info_from_k8s(node_obj)
    telemetry = None
    if metrics:
        utilization = None if cpu_pct is None else cpu_pct / 100
        telemetry = NodeTelemetry(info.name, 0.0, utilization=utilization)
    return NodeState(info, telemetry=telemetry)


GO_NODE = node("node-1", cpu="1000m", memory="1Gi")
# testutil2.MakePod("ns", "p").Container(MakeResourceList().CPU(1).Mem(2)): requests only.
WITH_REQUESTS = pod(containers=[container("con0", {"cpu": "1", "memory": "2"})])
# testPod3: no containers, overhead cpu = testPod1's (absent) container request, i.e. 0.
WITH_OVERHEAD = pod(containers=[], overhead={"cpu": "0"})
# testPod4: one container with a CPU limit of 2000m and no requests.
LIMIT_ONLY = pod(containers=[container("", limits={"cpu": "2000m"})])

SCORE_CASES = [
    # (source, case, pod, node state, expected raw score)
    (SCORE, "Pod with Requests", WITH_REQUESTS, state(GO_NODE, 0), SCORE_TO_USE),
    (SCORE, "No CPU metrics found", WITH_REQUESTS, state(GO_NODE, None), 0),
    (SCORE, "Pod with Overhead", WITH_OVERHEAD, state(GO_NODE, 0), 0),
    (SCORE, "Pod with above node resource capacity", LIMIT_ONLY, state(GO_NODE, 100), 0),
    (SCORE, "No watcher response for node", LIMIT_ONLY, state(GO_NODE, 0, metrics=False), 0),
    (SCORE, "404 resp from watcher", pod(containers=[]), state(GO_NODE, 0, metrics=False), 0),
    # The limit is not read: a limit-only pod requests 0, so its jump is 0 on an idle node
    # (the unmerged draft predicted 2000m from the limit: 200 % → 0 as well, but on a 4-core
    # node at 0 % it gave a jump of 50 %).
    (OURS, "a limit is not a request", LIMIT_ONLY, state(node("node-1", cpu="4"), 0), 0),
    # 500m on 4 cores at 10 %: p = 22.5 → int64(k1 (e^(22.5 k2) − e^(10 k2)) 10^15).
    (
        OURS,
        "request on a bigger node",
        pod(containers=[container(requests={"cpu": "500m"})]),
        state(node("node-1", cpu="4"), 10),
        int(M1.k1 * (math.exp(M1.k2 * 22.5) - math.exp(M1.k2 * 10)) * 1e15),
    ),
    # Capacity 4 cores, allocatable 2: p = 12.5 on capacity (25 on allocatable).
    (
        OURS,
        "capacity, not allocatable",
        pod(containers=[container(requests={"cpu": "500m"})]),
        state(node("node-1", cpu="2", capacity_cpu="4"), 0),
        int(M1.k1 * (math.exp(M1.k2 * 12.5) - 1.0) * 1e15),
    ),
]


@pytest.mark.parametrize(
    ("pod_obj", "node_state", "expected"),
    [c[2:] for c in SCORE_CASES],
    ids=[f"{c[0].split()[0]}: {c[1]}" for c in SCORE_CASES],
)
def test_peaks_score_table(pod_obj: dict[str, Any], node_state: NodeState, expected: int) -> None:
    [raw] = Peaks(GO_MODELS).score(pod_info_from_k8s(pod_obj), CandidateBatch.of([node_state]))
    assert raw == expected


def test_score_to_use_is_the_jump_in_watts() -> None:
    """SCORE's expected value, by hand: −91.505 × (e^(−7.186) − 1) ≈ 91.43 W, × 10^15."""
    assert pytest.approx(91.4356e15, rel=1e-5) == SCORE_TO_USE


NORMALIZE_CASES = [
    (NORMALIZE, "Normalize score {minScore, maxScore}", [0, 100], [100, 0]),
    (NORMALIZE, "Normalize score {minScore, minScore}", [0, 0], [0, 0]),
    (NORMALIZE, "Normalize score {maxScore, maxScore}", [100, 100], [100, 100]),
    # 100 − int64(100 · (20 − 10) / 30) = 100 − 33.
    (OURS, "three nodes", [10, 20, 40], [100, 67, 0]),
    (OURS, "equal non-zero costs", [7, 7, 7], [100, 100, 100]),
    # A raw of MinInt64 (what Go's int64() gives an overflowing jump) makes max − min wrap
    # to −1 in int64, as in Go: 100 − int64(100 · (−2^62) / −1) = 100 − MinInt64, wrapped.
    (OURS, "int64 wrap-around as in Go", [-(2**63), 2**62, 2**63 - 1], [100, -(2**63) + 100, 0]),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[2:] for c in NORMALIZE_CASES],
    ids=[f"{c[0].split()[0]}: {c[1]}" for c in NORMALIZE_CASES],
)
def test_peaks_normalize_table(raw: list[int], expected: list[int]) -> None:
    assert peaks_normalize(raw).tolist() == expected


def test_integration_first_pod_to_the_smallest_jump_then_the_next_that_fits() -> None:
    """INTEGRATION: three 2-core nodes at 0 % with k1 = −91.5, −1091.5, −2091.5; a 300m pod
    goes to node-1 (smallest jump). The 1900m pod no longer fits node-1 (NodeResourcesFit),
    and PEAKS does not count the first pod (the metrics still say 0 %): node-2."""
    nodes = [node(f"node-{i}", cpu="2", memory="256") for i in (1, 2, 3)]
    plugin = Peaks(GO_MODELS)
    requested: dict[str, Resources] = {n["metadata"]["name"]: Resources() for n in nodes}
    placed = []
    for name, cpu in (("pod-1", "300m"), ("pod-2", "1900m")):
        p = pod_info_from_k8s(
            pod(name, containers=[container(requests={"cpu": cpu, "memory": "50"})])
        )
        states = [
            NodeState(
                node_info_from_k8s(n),
                requested=requested[n["metadata"]["name"]],
                telemetry=NodeTelemetry(n["metadata"]["name"], 0.0, utilization=0.0),
            )
            for n in nodes
        ]
        feasible = filter_nodes(p, states).feasible
        batch = CandidateBatch.of(feasible)
        scores = normalized(plugin, p, batch)
        chosen = batch.names[int(np.argmax(scores))]
        requested[chosen] = requested[chosen] + p.requests
        placed.append(chosen)
    assert placed == ["node-1", "node-2"]


def test_request_as_kube_scheduler_helpers_count_it() -> None:
    """GetResourceRequestQuantity: containers + sidecars or the largest init container; the
    overhead only when that is not zero; limits never."""
    cases = [
        (
            pod(containers=[container(requests={"cpu": "1"}), container(requests={"cpu": "500m"})]),
            1500,
        ),
        (
            pod(
                containers=[container(requests={"cpu": "1"})],
                init_containers=[container("i", {"cpu": "3"})],
            ),
            3000,
        ),
        (
            pod(
                containers=[container(requests={"cpu": "1"})],
                init_containers=[container("s", {"cpu": "250m"}, restart_policy="Always")],
            ),
            1250,
        ),
        (pod(containers=[container(requests={"cpu": "1"})], overhead={"cpu": "100m"}), 1100),
        (pod(containers=[container()], overhead={"cpu": "100m"}), 0),
        (pod(containers=[container(limits={"cpu": "2"})]), 0),
    ]
    assert [pod_request_millicores(pod_info_from_k8s(p)) for p, _ in cases] == [e for _, e in cases]


def test_edges_no_model_over_capacity_and_nan() -> None:
    # No model (0, 0, 0) → raw 0; past 100 % → 0; NaN metric → 0; exp overflow → MinInt64 as Go.
    raw = peaks_raw_scores(
        [0.0, 90.0, np.nan, 0.0], [1000.0] * 4, 200.0, [0.0, 5.0, 5.0, 1.0], [0.0, 0.01, 0.01, 50.0]
    )
    assert raw.tolist() == [0, 0, 0, -(2**63)]


def test_a_pod_without_cpu_request_has_no_preference() -> None:
    nodes = [state(node(f"node-{i}", cpu="2"), pct) for i, pct in ((1, 0), (2, 30), (3, 80))]
    scores = normalized(
        Peaks(GO_MODELS), pod_info_from_k8s(pod(containers=[container()])), CandidateBatch.of(nodes)
    )
    assert scores.tolist() == [0, 0, 0]


def test_batch_equals_single_node_calls_before_normalize() -> None:
    rng = random.Random(11)
    nodes, models = [], {}
    for i in range(40):
        name = f"n{i}"
        nodes.append(
            state(
                node(name, cpu=rng.choice(["2", "4", "16"])),
                rng.choice([None, rng.uniform(0, 100)]),
                metrics=rng.random() > 0.1,
            )
        )
        if rng.random() > 0.1:
            models[name] = PeaksPowerModel(
                100.0, rng.uniform(-500, -10), rng.uniform(-0.08, -0.001)
            )
    plugin = Peaks(models)
    p = pod_info_from_k8s(pod(containers=[container(requests={"cpu": "600m"})]))
    batch = plugin.score(p, CandidateBatch.of(nodes))
    assert batch.tolist() == [int(plugin.score(p, CandidateBatch.of([n]))[0]) for n in nodes]
    assert len(set(batch.tolist())) > 5
    normalized = plugin.normalize(p, batch)
    assert normalized.min() >= 0 and normalized.max() == 100


def test_fit_recovers_an_exponential_curve() -> None:
    truth = PeaksPowerModel(80.0, 20.0, 0.015)
    curve = PowerCurve.from_points([truth.watts(x) for x in range(0, 101, 10)])
    fitted = fit_power_model(curve)
    for x in range(0, 101, 10):
        assert fitted.watts(x) == pytest.approx(truth.watts(x), rel=1e-4)
    concave = fit_power_model(PowerCurve.fan(100.0, 250.0, 1.4))
    assert concave.k1 < 0 and concave.k2 < 0  # a concave curve fits with both negative
    assert concave.watts(100) == pytest.approx(250.0, rel=0.02)


def test_is_a_score_plugin_with_normalize() -> None:
    assert isinstance(Peaks(GO_MODELS), NormalizingPlugin)


def test_a_reused_batch_sees_new_telemetry() -> None:
    p = pod_info_from_k8s(pod(containers=[container(requests={"cpu": "300m"})]))
    nodes = [state(node(name, cpu="2"), 0) for name in GO_MODELS]
    plugin = Peaks(GO_MODELS)
    batch = CandidateBatch.of(nodes)
    before = plugin.score(p, batch).tolist()
    changed = [state(node("node-1", cpu="2"), 50)]
    batch.update([0], changed)
    assert (
        plugin.score(p, batch).tolist()
        == plugin.score(p, CandidateBatch.of([changed[0], *nodes[1:]])).tolist()
    )
    assert plugin.score(p, batch).tolist() != before


def test_power_models_from_the_originals_configuration_or_fitted_to_curves() -> None:
    from scheduler.plugins.peaks import PeaksArgs, power_models

    given = {"node-1": {"k0": K0, "k1": M1.k1, "k2": K2}}
    curve = PowerCurve.fan(100.0, 250.0, 1.4)
    models = power_models(PeaksArgs.from_config({"nodePowerModel": given}), {"node-1": curve, "node-2": curve})
    assert models["node-1"] == M1  # an explicit model wins over the curve
    assert models["node-2"] == fit_power_model(curve)
    for bad in (
        {"watcherAddress": "http://x"},
        {"nodePowerModel": {"n": {"k0": 1}}},
        {"nodePowerModel": {"n": {"k0": "a", "k1": 0, "k2": 0}}},
    ):
        with pytest.raises(ValueError):
            PeaksArgs.from_config(bad)
