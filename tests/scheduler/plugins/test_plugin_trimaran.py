"""TargetLoadPacking against kubernetes-sigs/scheduler-plugins' own tests.

Each Go case is translated with its inputs and expected score and cites its source as
(repository, path, test function, case name). Cases marked `kubejoule` are ours: they pin what
the Go tables leave implicit (limits, capacity vs allocatable, rounding), computed by hand from
pkg/trimaran/targetloadpacking/targetloadpacking.go (Score, PredictUtilisation).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from benchmarks.harness.standalone_objects import container, node, pod
from scheduler.cluster.kubeobjects import node_info_from_k8s, pod_info_from_k8s
from scheduler.domain.filters import filter_nodes
from scheduler.domain.model import NodeState, NodeTelemetry, PodInfo
from scheduler.framework import CandidateBatch, ScorePlugin
from scheduler.plugins.gomath import go_int64, go_round
from scheduler.plugins.trimaran import (
    TargetLoadPacking,
    TargetLoadPackingArgs,
    predicted_pod_millicores,
    target_load_packing_scores,
)

SP = "kubernetes-sigs/scheduler-plugins"
UNIT = f"{SP} pkg/trimaran/targetloadpacking/targetloadpacking_test.go TestTargetLoadPackingScoring"
INTEGRATION = f"{SP} test/integration/targetloadpacking_test.go TestTargetNodePackingPlugin"
OURS = "kubejoule"


def state(
    node_obj: Mapping[str, Any],
    cpu_pct: float | None,
    since: Sequence[PodInfo] = (),
    metrics: bool = True,
) -> NodeState:
    """A candidate node; `cpu_pct` None with `metrics` = a sample without a CPU metric, and
    `metrics` False = no sample at all (the load watcher's 404)."""
    info = node_info_from_k8s(node_obj)
    telemetry = None
    if metrics:
        utilization = None if cpu_pct is None else cpu_pct / 100
        telemetry = NodeTelemetry(info.name, 0.0, utilization=utilization)
    return NodeState(info, telemetry=telemetry, pods_since_sample=tuple(since))


# Go's st.MakeNode().Capacity({cpu: 1000m, memory: 1Gi}): capacity = allocatable.
GO_NODE = node("node-1", cpu="1000m", memory="1Gi")
# getPodWithContainersAndOverhead(0, 1000): one container, request = limit = 1000m, overhead 0.
GO_POD_1000 = pod(
    containers=[container("test-container-0", {"cpu": "1000m"}, limits={"cpu": "1000m"})],
    overhead={"cpu": "0"},
)

CASES = [
    # (source, case, pod, node state, expected score)
    (UNIT, "new node", pod(containers=[]), state(GO_NODE, 0), 40),
    (UNIT, "hot node", pod(containers=[]), state(GO_NODE, 50), 33),
    (UNIT, "excess utilization returns min score", GO_POD_1000, state(GO_NODE, 30), 0),
    (UNIT, "404 resp from watcher", pod(containers=[]), state(GO_NODE, 0, metrics=False), 0),
    # U = 10 + 100 · 2000 / 4000 = 60 → round(40 · 40 / 60) = 27 (the limit, not 500 × 1.5).
    (
        OURS,
        "request 500m, limit 2 cores, 4-core node at 10 %",
        pod(containers=[container(requests={"cpu": "500m"}, limits={"cpu": "2"})]),
        state(node("n", cpu="4"), 10),
        27,
    ),
    # Capacity 4 cores, allocatable 2: U = 10 + 100 · 750 / 4000 = 28.75 → 83 (on allocatable
    # it would be 10 + 37.5 = 47.5 → 35).
    (
        OURS,
        "capacity, not allocatable",
        pod(containers=[container(requests={"cpu": "500m"})]),
        state(node("n", cpu="2", capacity_cpu="4"), 10),
        83,
    ),
    # 300m limit + round(100m × 1.5) + 1000m default + 100m overhead = 1550m; the init container
    # and the sidecar (spec.initContainers) are not read: U = 100 · 1550 / 4000 = 38.75 → 98.
    (
        OURS,
        "per container: limit, request × 1.5, default; overhead; init containers ignored",
        pod(
            containers=[
                container("a", {"cpu": "200m"}, limits={"cpu": "300m"}),
                container("b", {"cpu": "100m"}),
                container("c"),
            ],
            init_containers=[
                container("init", {"cpu": "3"}),
                container("sidecar", {"cpu": "2"}, restart_policy="Always"),
            ],
            overhead={"cpu": "100m"},
        ),
        state(node("n", cpu="4"), 0),
        98,
    ),
    # An explicit limit "0" is a set key: predicted 0, not 1000m → U = 0 → T = 40.
    (
        OURS,
        "limit key set to 0",
        pod(containers=[container(limits={"cpu": "0"})]),
        state(node("n", cpu="1"), 0),
        40,
    ),
    # 60 · 15 / 40 + 40 = 62.5 exactly: Go's math.Round gives 63 (numpy's round would give 62).
    (OURS, "a half rounds away from zero", pod(containers=[]), state(GO_NODE, 15), 63),
    # A sample without a CPU metric scores the minimum, like no sample.
    (OURS, "no CPU metric in the sample", pod(containers=[]), state(GO_NODE, None), 0),
]


@pytest.mark.parametrize(
    ("pod_obj", "node_state", "expected"),
    [c[2:] for c in CASES],
    ids=[f"{c[0].split()[0]}: {c[1]}" for c in CASES],
)
def test_target_load_packing_score_table(
    pod_obj: dict[str, Any], node_state: NodeState, expected: int
) -> None:
    plugin = TargetLoadPacking()
    [score] = plugin.score(pod_info_from_k8s(pod_obj), CandidateBatch.of([node_state]))
    assert score == expected


def test_integration_pods_pack_onto_the_node_nearest_the_target() -> None:
    """INTEGRATION: three 2-core nodes at 10 / 60 / 0 %; pods of 300m then 100m (requests, no
    limits) both go to node-1. The first is predicted at 450m: node-1 U = 32.5 → 89,
    node-2 82.5 → 12, node-3 22.5 → 74. The second sees the first as bound since the sample:
    node-1 U = 10 + 22.5 + 7.5 = 40 → 100."""
    nodes = [node(f"node-{i}", cpu="2", memory="256") for i in (1, 2, 3)]
    pct = {"node-1": 10, "node-2": 60, "node-3": 0}
    pods = [
        pod_info_from_k8s(
            pod(f"pod-{i}", containers=[container(requests={"cpu": c, "memory": "50"})])
        )
        for i, c in ((1, "300m"), (2, "100m"))
    ]
    plugin = TargetLoadPacking()
    bound: dict[str, list[PodInfo]] = {n["metadata"]["name"]: [] for n in nodes}
    placed = []
    for p in pods:
        states = [
            state(n, pct[n["metadata"]["name"]], since=bound[n["metadata"]["name"]]) for n in nodes
        ]
        feasible = filter_nodes(p, states).feasible
        scores = plugin.score(p, CandidateBatch.of(feasible))
        chosen = feasible[int(np.argmax(scores))].info.name
        bound[chosen].append(p)
        placed.append((chosen, scores.tolist()))
    assert placed == [("node-1", [89, 12, 74]), ("node-1", [100, 22, 51])]


def test_prediction_per_container() -> None:
    args = TargetLoadPackingArgs()
    p = pod_info_from_k8s(
        pod(containers=[container("a", {"cpu": "333m"}), container("b", limits={"cpu": "1"})])
    )
    assert predicted_pod_millicores(p, args) == 500 + 1000  # round(499.5) = 500, then the limit
    # A PodInfo built from totals only (no containers known): its request × 1.5.
    from scheduler.domain.model import Resources

    by_hand = PodInfo("ns", "p", "u", Resources(cpu_millicores=400, pods=1))
    assert predicted_pod_millicores(by_hand, args) == 600
    assert predicted_pod_millicores(PodInfo("ns", "p", "u", Resources(pods=1)), args) == 1000


def test_kernel_edges_and_arguments() -> None:
    # capacity 0 → U = 0 → the target; no metric (NaN) → 0; exactly 100 % → 0; past 100 % → 0.
    scores = target_load_packing_scores(
        [0.0, np.nan, 100.0, 99.0], [0.0, 1000.0, 1000.0, 1000.0], [500.0, 0.0, 0.0, 20.0]
    )
    assert scores.tolist() == [40, 0, 0, 0]
    # Target 80 %: 20 · 20 / 80 + 80.
    assert target_load_packing_scores([20.0], [1000.0], [0.0], target_pct=80).tolist() == [85]
    for bad in (0, -5, 101):
        with pytest.raises(ValueError):
            TargetLoadPackingArgs(target_utilization_pct=bad)


def test_go_rounding_and_conversion() -> None:
    values = [62.5, 2.5, -2.5, 0.49999999999999994, 1.5, -0.5, 2.4999]
    assert go_round(values).tolist() == [63, 3, -3, 0, 2, -1, 2]
    assert go_int64([1.9, -1.9, 2.0**63, float("nan"), float("-inf")]).tolist() == [
        1,
        -1,
        -(2**63),
        -(2**63),
        -(2**63),
    ]


def test_batch_equals_single_node_calls() -> None:
    rng = random.Random(7)
    nodes = []
    for i in range(40):
        cores = rng.choice(["1", "2", "4", "8", "64"])
        pct = rng.choice([None, rng.uniform(0, 100), rng.choice([0.0, 40.0, 100.0])])
        since = [
            pod_info_from_k8s(
                pod(f"s{i}{j}", containers=[container(requests={"cpu": f"{rng.randint(1, 900)}m"})])
            )
            for j in range(rng.randint(0, 2))
        ]
        nodes.append(state(node(f"n{i}", cpu=cores), pct, since=since, metrics=rng.random() > 0.1))
    p = pod_info_from_k8s(
        pod(containers=[container(requests={"cpu": "700m"}, limits={"cpu": "1500m"})])
    )
    plugin = TargetLoadPacking()
    batch = plugin.score(p, CandidateBatch.of(nodes))
    assert batch.tolist() == [int(plugin.score(p, CandidateBatch.of([n]))[0]) for n in nodes]
    assert batch.min() >= 0 and batch.max() <= 100
    assert len(set(batch.tolist())) > 5  # the batch is not degenerate


def test_pods_and_nodes_carry_what_the_peer_plugins_read() -> None:
    """pod_info_from_k8s keeps each container's requests and limits (absent ≠ "0") with its kind;
    node_info_from_k8s keeps status.capacity beside allocatable."""
    from scheduler.domain.model import (
        APP_CONTAINER,
        INIT_CONTAINER,
        SIDECAR_CONTAINER,
        ContainerResources,
        ShapeError,
    )

    p = pod_info_from_k8s(
        pod(
            containers=[container("a", {"cpu": "250m", "memory": "1Mi"}, limits={"cpu": "0"})],
            init_containers=[
                container("i", {"cpu": "1"}),
                container("s", limits={"memory": "2Mi"}, restart_policy="Always"),
            ],
            overhead={"cpu": "50m"},
        )
    )
    assert p.containers == (
        ContainerResources("a", APP_CONTAINER, 250, 0, 2**20, None),
        ContainerResources("i", INIT_CONTAINER, 1000, None, None, None),
        ContainerResources("s", SIDECAR_CONTAINER, None, None, None, 2 * 2**20),
    )
    assert p.overhead.cpu_millicores == 50
    with pytest.raises(ShapeError, match=r"spec.containers\[0\].resources.limits.cpu"):
        pod_info_from_k8s(pod(containers=[container(limits={"cpu": "lots"})]))
    info = node_info_from_k8s(node("n", cpu="3500m", capacity_cpu="4"))
    assert (info.allocatable.cpu_millicores, info.cpu_capacity_millicores) == (3500, 4000)
    no_capacity = node("m", cpu="2")
    del no_capacity["status"]["capacity"]
    assert node_info_from_k8s(no_capacity).cpu_capacity_millicores == 2000  # falls back


def test_is_a_score_plugin_without_normalize() -> None:
    plugin = TargetLoadPacking()
    assert isinstance(plugin, ScorePlugin) and not hasattr(plugin, "normalize")


def test_a_reused_batch_sees_new_telemetry_and_new_pods() -> None:
    """The framework reuses a batch and patches changed rows (`update`): the plugin's derived
    columns follow, so scores equal those of a fresh batch."""
    p = pod_info_from_k8s(pod(containers=[container(requests={"cpu": "500m"})]))
    nodes = [state(node(f"n{i}", cpu="4"), 10.0 * i) for i in range(3)]
    plugin = TargetLoadPacking()
    batch = CandidateBatch.of(nodes)
    before = plugin.score(p, batch).tolist()
    bound = pod_info_from_k8s(pod("b", containers=[container(requests={"cpu": "1"})]))
    changed = [state(node("n0", cpu="4"), 35.0), state(node("n2", cpu="4"), 20.0, since=[bound])]
    batch.update([0, 2], changed)
    fresh = [changed[0], nodes[1], changed[1]]
    assert plugin.score(p, batch).tolist() == plugin.score(p, CandidateBatch.of(fresh)).tolist()
    assert plugin.score(p, batch).tolist() != before


def test_args_from_the_originals_configuration_keys() -> None:
    assert TargetLoadPackingArgs.from_config({}) == TargetLoadPackingArgs(40, 1000, 1.5)
    args = TargetLoadPackingArgs.from_config(
        {"targetUtilization": 70, "defaultRequests": {"cpu": "2"}, "defaultRequestsMultiplier": "2"}
    )
    assert args == TargetLoadPackingArgs(70, 2000, 2.0)
    p = pod_info_from_k8s(pod(containers=[container(requests={"cpu": "250m"}), container("b")]))
    assert predicted_pod_millicores(p, args) == 500 + 2000
    for bad in (
        {"target": 40},
        {"targetUtilization": "40"},
        {"targetUtilization": 0},
        {"defaultRequests": {"memory": "1Gi"}},
        {"defaultRequests": {"cpu": "lots"}},
        {"defaultRequestsMultiplier": "x"},
    ):
        with pytest.raises(ValueError):
            TargetLoadPackingArgs.from_config(bad)
