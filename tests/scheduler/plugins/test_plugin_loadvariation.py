"""LoadVariationRiskBalancing against kubernetes-sigs/scheduler-plugins' own tests.

Each Go case is translated with its inputs and expected score and cites its source as
(repository, path, test function, case name). TestScore's cases that need a CPU deviation or
memory metrics (which kubejoule's telemetry does not carry) run through the kernel with the same
inputs; the others run through the plugin.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from benchmarks.harness.standalone_objects import container, node, pod
from scheduler.cluster.kubeobjects import node_info_from_k8s, pod_info_from_k8s
from scheduler.domain.model import NodeState, NodeTelemetry
from scheduler.framework import CandidateBatch, ScorePlugin
from scheduler.plugins.gomath import go_round
from scheduler.plugins.loadvariation import (
    LoadVariationArgs,
    LoadVariationRiskBalancing,
    effective_request,
    load_variation_scores,
    risk_scores,
)

LVRB = "kubernetes-sigs/scheduler-plugins pkg/trimaran/loadvariationriskbalancing"
ANALYSIS = f"{LVRB}/analysis_test.go TestComputeScore"
SCORE = f"{LVRB}/loadvariationriskbalancing_test.go TestScore"

COMPUTE_CASES = [
    # (source, case, margin, sensitivity, (capacity, req, usedAvg, usedStdev), expected)
    (ANALYSIS, "valid data", 1, 1, (100, 10, 40, 36), 57),
    (ANALYSIS, "zero capacity", 1, 2, (0, 10, 40, 36), 0),
    (ANALYSIS, "negative usedAvg", 1, 2, (100, 10, -40, 36), 65),
    (ANALYSIS, "large usedAvg", 1, 2, (100, 10, 200, 36), 20),
    (ANALYSIS, "negative usedStdev", 1, 2, (100, 10, 40, -36), 75),
    (ANALYSIS, "large usedStdev", 1, 2, (100, 10, 40, 120), 25),
    (ANALYSIS, "negative margin", -1, 1, (100, 10, 40, 36), 75),
    (ANALYSIS, "negative sensitivity", 1, -1, (100, 10, 40, 36), 57),
    (ANALYSIS, "zero sensitivity", 1, 0, (100, 10, 40, 36), 75),
]


@pytest.mark.parametrize(
    ("margin", "sensitivity", "stats", "expected"),
    [c[2:] for c in COMPUTE_CASES],
    ids=[f"analysis_test.go: {c[1]}" for c in COMPUTE_CASES],
)
def test_compute_score_table(
    margin: float, sensitivity: float, stats: tuple[float, ...], expected: int
) -> None:
    capacity, req, used, stdev = stats
    # Go's stats are absolute; with capacity 100 (or 0) they are also the percentages here.
    score = risk_scores([capacity], [req], [used], [stdev], LoadVariationArgs(margin, sensitivity))
    assert int(go_round(score)[0]) == expected


MIB = 2**20
NODE_CPU_MILLICORES, NODE_MEMORY = 1000.0, 1024.0 * MIB  # nodeResources: 1000m, 1Gi


def go_pod(cpu_millicores: int, memory_bytes: int) -> dict[str, Any]:
    """getPodWithContainersAndOverhead(0, 0, 0, [cpu], [mem]): an init container requesting
    0 and 0, one container with request = limit."""
    resources = {"cpu": f"{cpu_millicores}m", "memory": str(memory_bytes)}
    return pod(
        containers=[container("test-container-0", resources, limits=resources)],
        init_containers=[container("test-init", {"cpu": "0", "memory": "0"})],
        overhead={"cpu": "0"},
    )


KERNEL_CASES = [
    # (source, case, pod, cpu (avg %, stdev %), memory (avg %, stdev %) or None, expected)
    (SCORE, "average and stDev metrics", go_pod(200, 256 * MIB), (30, 16), None, 67),
    (SCORE, "CPU and Memory metrics", go_pod(100, 512 * MIB), (40, 16), (50, 10), 45),
    (SCORE, "pick worst case: CPU or Memory", go_pod(100, 512 * MIB), (80, 20), (25, 15), 45),
]


@pytest.mark.parametrize(
    ("pod_obj", "cpu", "memory", "expected"),
    [c[2:] for c in KERNEL_CASES],
    ids=[f"loadvariationriskbalancing_test.go: {c[1]}" for c in KERNEL_CASES],
)
def test_score_table_with_deviation_and_memory_through_the_kernel(
    pod_obj: dict[str, Any],
    cpu: tuple[float, float],
    memory: tuple[float, float] | None,
    expected: int,
) -> None:
    cpu_req, mem_req = effective_request(pod_info_from_k8s(pod_obj))
    mem_avg, mem_std = memory if memory is not None else (np.nan, 0.0)
    score = load_variation_scores(
        (NODE_CPU_MILLICORES, cpu_req, cpu[0], cpu[1]), (NODE_MEMORY, mem_req, mem_avg, mem_std)
    )
    assert int(score) == expected


def state(cpu_pct: float | None, metrics: bool = True) -> NodeState:
    info = node_info_from_k8s(node("node-1", cpu="1000m", memory="1Gi"))
    telemetry = None
    if metrics:
        telemetry = NodeTelemetry(
            "node-1", 0.0, utilization=None if cpu_pct is None else cpu_pct / 100
        )
    return NodeState(info, telemetry=telemetry)


PLUGIN_CASES = [
    (SCORE, "new node", state(50), 75),
    (SCORE, "hot node", state(100), 50),
    (SCORE, "404 resp from watcher", state(0, metrics=False), 0),
]


@pytest.mark.parametrize(
    ("node_state", "expected"),
    [c[2:] for c in PLUGIN_CASES],
    ids=[f"loadvariationriskbalancing_test.go: {c[1]}" for c in PLUGIN_CASES],
)
def test_score_table_through_the_plugin(node_state: NodeState, expected: int) -> None:
    plugin = LoadVariationRiskBalancing()
    [score] = plugin.score(pod_info_from_k8s(pod(containers=[])), CandidateBatch.of([node_state]))
    assert score == expected


def test_effective_request_counts_init_containers_and_overhead_as_the_original() -> None:
    p = pod_info_from_k8s(
        pod(
            containers=[
                container("a", {"cpu": "300m", "memory": "100"}),
                container("b", {"cpu": "200m"}),
            ],
            init_containers=[
                container("i", {"cpu": "400m"}),
                container("s", {"memory": "900"}, restart_policy="Always"),  # a plain init here
            ],
            overhead={"cpu": "50m", "memory": "10"},
        )
    )
    assert effective_request(p) == (500 + 50, 900 + 10)


def test_allocatable_not_capacity_and_batch_equals_single() -> None:
    # Allocatable 2 cores of capacity 4: 50 % measured of 2000m plus a 500m pod → μ = 0.75.
    info = node_info_from_k8s(node("n", cpu="2", capacity_cpu="4"))
    p = pod_info_from_k8s(pod(containers=[container(requests={"cpu": "500m"})]))
    plugin = LoadVariationRiskBalancing()
    [score] = plugin.score(
        p, CandidateBatch.of([NodeState(info, telemetry=NodeTelemetry("n", 0.0, utilization=0.5))])
    )
    assert score == 63  # round((1 − 0.75 / 2) × 100) = round(62.5), away from zero
    rng = random.Random(3)
    nodes = [
        NodeState(
            node_info_from_k8s(node(f"n{i}", cpu=rng.choice(["1", "2", "8"]))),
            telemetry=NodeTelemetry(f"n{i}", 0.0, utilization=rng.choice([None, rng.random()])),
        )
        for i in range(30)
    ]
    batch = plugin.score(p, CandidateBatch.of(nodes))
    assert batch.tolist() == [int(plugin.score(p, CandidateBatch.of([n]))[0]) for n in nodes]
    assert len(set(batch.tolist())) > 5
    assert isinstance(plugin, ScorePlugin)


def test_args() -> None:
    assert LoadVariationArgs.from_config({}) == LoadVariationArgs(1.0, 1.0)
    assert LoadVariationArgs.from_config(
        {"safeVarianceMargin": 2, "safeVarianceSensitivity": 0.5}
    ) == LoadVariationArgs(2.0, 0.5)
    for bad in ({"margin": 1}, {"safeVarianceMargin": "1"}):
        with pytest.raises(ValueError):
            LoadVariationArgs.from_config(bad)
