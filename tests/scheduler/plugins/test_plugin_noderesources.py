"""kube-scheduler's NodeResourcesFit (LeastAllocated, MostAllocated) and
NodeResourcesBalancedAllocation scores against kubernetes/kubernetes' own test tables.

Each case cites its source as (repository, path, test function, case name) and keeps the Go
inputs and expected scores: quantities are the Go strings ("4000" CPU is 4,000 cores there and
here), pods and nodes are the same objects as JSON, existing pods are bound to their node.
Cases the model cannot express are left out, each with its reason:

- least/most_allocated_test.go "bypass extended resource if the pod does not request",
  "honor extended resource if the pod request(s)", "if the node doesn't have a resource":
  extended resources (scheduler-plugins' extendedRes) — NodeResourcesFit here scores cpu,
  memory and ephemeral-storage only, and refuses other resource names.
- balanced_allocation_test.go "scalar resource is included in the score computation if pod
  requests the scalar resource" (nvidia.com/gpu requested) and the two "include DRA resource …"
  cases (DRA).
- balanced_allocation_test.go "… if PreScore not called": the same inputs as "resources
  requested, pods scheduled with resources"; the plugins here have no PreScore step.

least/most_allocated_test.go were read at kubernetes/kubernetes master in the 1.35 cycle;
balanced_allocation_test.go at v1.36.3 (the kube-scheduler the project builds and runs), whose
scores are 1.36's "improvement in balance" (kubernetes/kubernetes#135573; the Go comments give
each node's balance before -> after, kept below).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from benchmarks.harness.standalone_objects import container, node, node_state, pod
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.framework import CandidateBatch
from scheduler.plugins.noderesources import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
)

K8S = "kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources"
LEAST = f"{K8S}/least_allocated_test.go TestLeastAllocatedScoringStrategy"
MOST = f"{K8S}/most_allocated_test.go TestMostAllocatedScoringStrategy"
BALANCED = f"{K8S}/balanced_allocation_test.go TestNodeResourcesBalancedAllocation (v1.36.3)"

DEFAULT = {"cpu": 1, "memory": 1}  # defaultResources
MEMORY_TWICE = {"memory": 2, "cpu": 1}


def req_pod(*requests: Mapping[str, str], name: str = "p") -> dict[str, Any]:
    """st.MakePod().Req(r1).Req(r2)…: one container per Req, requests only."""
    return pod(name, containers=[container(f"c{i}", r) for i, r in enumerate(requests)])


def empty_pod(name: str = "p") -> dict[str, Any]:
    """st.MakePod().Obj(): no containers at all."""
    return pod(name, containers=[])


def cap_node(name: str, cpu: str | None, memory: str | None) -> dict[str, Any]:
    """st.MakeNode().Capacity({cpu, memory}) (capacity = allocatable); None = no resources."""
    obj = node(name, cpu=cpu or "0", memory=memory or "0")
    if cpu is None and memory is None:  # st.MakeNode().Name(n).Obj(): no status resources
        obj["status"].pop("allocatable")
        obj["status"].pop("capacity")
    return obj


TWO_CONTAINERS = ({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})


def cpu_mem(cpu: str, memory: str, name: str) -> dict[str, Any]:
    return req_pod({"cpu": cpu, "memory": memory}, name=name)


# The node setups the Go tables share (node1, node2 with their existing pods).
IDLE_4000 = [(cap_node("node1", "4000", "10000"), []), (cap_node("node2", "4000", "10000"), [])]
IDLE_4000_6000 = [
    (cap_node("node1", "4000", "10000"), []),
    (cap_node("node2", "6000", "10000"), []),
]
EMPTY_PODS_4000 = [
    (cap_node("node1", "4000", "10000"), [empty_pod("a"), empty_pod("b")]),
    (cap_node("node2", "4000", "10000"), [empty_pod("c"), empty_pod("d")]),
]
TWO_PODS_EACH = [
    (cap_node("node1", "10000", "20000"), [cpu_mem("3000", "0", "a"), cpu_mem("3000", "0", "b")]),
    (
        cap_node("node2", "10000", "20000"),
        [cpu_mem("3000", "0", "c"), cpu_mem("3000", "5000", "d")],
    ),
]


def one_pod_each(cpu: str, memory: str, node2_memory: str) -> list[Any]:
    return [
        (cap_node("node1", cpu, memory), [cpu_mem("3000", "0", "a")]),
        (cap_node("node2", cpu, node2_memory), [cpu_mem("3000", "5000", "b")]),
    ]


NO_RESOURCES = [
    (cap_node("node1", None, None), [cpu_mem("3000", "0", "a")]),
    (cap_node("node2", None, None), [cpu_mem("3000", "5000", "b")]),
]
# st.MakePod().Container("container"): one container without requests, so the non-zero
# defaults (100m, 200 MiB) count: node1 300m of 250m → 100, 600 Mi of 1000 Mi → 60: 80;
# node2 40 and 20: 30.
NONZERO_POD = pod(containers=[container("container")])
NONZERO_NODES = [
    (
        cap_node("node1", "250m", "1000Mi"),
        [
            pod("a", containers=[container("container")]),
            pod("b", containers=[container("container")]),
        ],
    ),
    (cap_node("node2", "250m", "1000Mi"), []),
]

L, M = LEAST_ALLOCATED, MOST_ALLOCATED
# fmt: off
FIT_CASES: list[tuple[str, str, str, dict[str, Any], list[Any], Mapping[str, int], list[int]]] = [
    # (strategy, source, case, pod, [(node, existing pods)], resource weights, expected)
    (L, LEAST, "nothing scheduled, nothing requested", empty_pod(), IDLE_4000, DEFAULT, [100, 100]),
    (L, LEAST, "nothing scheduled, resources requested, differently sized nodes",
     req_pod(*TWO_CONTAINERS), IDLE_4000_6000, DEFAULT, [37, 50]),
    (L, LEAST, "no resources requested, pods scheduled", empty_pod(), EMPTY_PODS_4000, DEFAULT,
     [100, 100]),
    (L, LEAST, "no resources requested, pods scheduled with resources", empty_pod(),
     TWO_PODS_EACH, DEFAULT, [70, 57]),
    (L, LEAST, "resources requested, pods scheduled with resources", req_pod(*TWO_CONTAINERS),
     one_pod_each("10000", "20000", "20000"), DEFAULT, [57, 45]),
    (L, LEAST, "resources requested, pods scheduled with resources, differently sized nodes",
     req_pod(*TWO_CONTAINERS), one_pod_each("10000", "20000", "50000"), DEFAULT, [57, 60]),
    (L, LEAST, "requested resources exceed node capacity", req_pod({"cpu": "3000", "memory": "0"}),
     one_pod_each("4000", "10000", "10000"), DEFAULT, [50, 25]),
    (L, LEAST, "zero node resources, pods scheduled with resources", empty_pod(), NO_RESOURCES,
     DEFAULT, [0, 0]),
    (L, LEAST, "nothing scheduled, resources requested with different weight on CPU and memory, "
     "differently sized nodes", req_pod(*TWO_CONTAINERS), IDLE_4000_6000, MEMORY_TWICE, [41, 50]),
    (M, MOST, "nothing scheduled, nothing requested", empty_pod(), IDLE_4000, DEFAULT, [0, 0]),
    (M, MOST, "nothing scheduled, resources requested, differently sized nodes",
     req_pod(*TWO_CONTAINERS), IDLE_4000_6000, DEFAULT, [62, 50]),
    (M, MOST, "no resources requested, pods scheduled with resources", empty_pod(), TWO_PODS_EACH,
     DEFAULT, [30, 42]),
    (M, MOST, "resources requested, pods scheduled with resources", req_pod(*TWO_CONTAINERS),
     one_pod_each("10000", "20000", "20000"), DEFAULT, [42, 55]),
    (M, MOST, "resources requested equal node capacity",
     req_pod({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
     [(cap_node("node1", "5000", "10000"), []), (cap_node("node2", "10000", "9000"), [])],
     DEFAULT, [95, 75]),
    (M, MOST, "nothing scheduled, resources requested, differently sized nodes (memory weight 2)",
     req_pod(*TWO_CONTAINERS), IDLE_4000_6000, MEMORY_TWICE, [58, 50]),
    (M, MOST, "no resources requested, pods scheduled, nonzero request for resource", NONZERO_POD,
     NONZERO_NODES, DEFAULT, [80, 30]),
]
# fmt: on


def _scores(
    plugin: Any,
    pod_obj: dict[str, Any],
    nodes: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]],
) -> list[int]:
    p = pod_info_from_k8s(pod_obj)
    states = [node_state(n, bound) for n, bound in nodes]
    batch = plugin.score(p, CandidateBatch.of(states))
    singles = [int(plugin.score(p, CandidateBatch.of([s]))[0]) for s in states]
    assert batch.tolist() == singles  # a batch scores each node as a batch of one does
    return [int(s) for s in batch]


@pytest.mark.parametrize(
    ("strategy", "pod_obj", "nodes", "weights", "expected"),
    [(c[0], *c[3:]) for c in FIT_CASES],
    ids=[f"{c[1].split()[1].rsplit('/', 1)[-1]}: {c[2]}" for c in FIT_CASES],
)
def test_node_resources_fit_score_table(
    strategy: str,
    pod_obj: dict[str, Any],
    nodes: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    weights: Mapping[str, int],
    expected: list[int],
) -> None:
    assert _scores(NodeResourcesFit(strategy, weights), pod_obj, nodes) == expected


ARGS_CASES = [
    # (source, case, resource weights): NewFit refuses them (Go: wantErrs, or an error status)
    (LEAST, "Resources not set, pods scheduled with error", {}),
    (LEAST, "resource with negative weight", {"memory": -1, "cpu": 1}),
    (LEAST, "resource with zero weight", {"memory": 1, "cpu": 0}),
    (LEAST, "resource weight larger than MaxNodeScore", {"memory": 1, "cpu": 101}),
    (MOST, "Resources not set, pods scheduled with error", {}),
    (MOST, "resource with negative weight", {"memory": -1, "cpu": 1}),
    (MOST, "resource with zero weight", {"memory": 1, "cpu": 0}),
    (MOST, "resource weight larger than MaxNodeScore", {"memory": 101}),
]


@pytest.mark.parametrize(
    ("source", "weights"),
    [(c[0], c[2]) for c in ARGS_CASES],
    ids=[f"{c[0].split()[1].rsplit('/', 1)[-1]}: {c[1]}" for c in ARGS_CASES],
)
def test_node_resources_fit_refuses_bad_weights(source: str, weights: Mapping[str, int]) -> None:
    strategy = LEAST_ALLOCATED if source == LEAST else MOST_ALLOCATED
    with pytest.raises(ValueError):
        NodeResourcesFit(strategy, weights)


CPU_AND_MEMORY = ({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
CPU_ONLY = ({"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})


def make_node(name: str, milli_cpu: int, memory: int) -> dict[str, Any]:
    """balanced_allocation_test.go's makeNode(name, milliCPU, memory)."""
    return node(name, cpu=f"{milli_cpu}m", memory=str(memory))


BALANCED_CASES = [
    # (source, case, pod, [(node, existing pods)], expected)
    (
        # Go: PreScore returns Skip (no score at all); the plugin here scores 0 everywhere,
        # which adds nothing to any node's total — the same outcome.
        BALANCED,
        "nothing scheduled, nothing requested, skip in PreScore",
        empty_pod(),
        [(make_node("node1", 4000, 10000), []), (make_node("node2", 4000, 10000), [])],
        [0, 0],
    ),
    (
        BALANCED,
        "nothing scheduled, resources requested, differently sized nodes",
        req_pod(*CPU_AND_MEMORY),
        [(make_node("node1", 4000, 10000), []), (make_node("node2", 6000, 10000), [])],
        [68, 75],  # balance 100 -> 87, 100 -> 100
    ),
    (
        BALANCED,
        "resources requested, pods scheduled with resources",
        req_pod(*CPU_AND_MEMORY),
        [
            (make_node("node1", 10000, 20000), [req_pod(*CPU_ONLY, name="a")]),
            (make_node("node2", 10000, 20000), [req_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [73, 74],  # 85 -> 82, 97 -> 95
    ),
    (
        BALANCED,
        "resources requested, pods scheduled with resources, differently sized nodes",
        req_pod(*CPU_AND_MEMORY),
        [
            (make_node("node1", 10000, 20000), [req_pod(*CPU_ONLY, name="a")]),
            (make_node("node2", 10000, 50000), [req_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [73, 70],  # 85 -> 82, 90 -> 80
    ),
    (
        BALANCED,
        "requested resources at node capacity",
        req_pod(*CPU_ONLY),
        [
            (make_node("node1", 6000, 10000), [req_pod(*CPU_ONLY, name="a")]),
            (make_node("node2", 6000, 10000), [req_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [62, 62],  # 75 -> 50, 100 -> 75
    ),
    (
        BALANCED,
        "resources requested, pods scheduled with resources, nodes to reach min/max score",
        req_pod({"memory": "2000"}, {"memory": "3000"}),
        [(make_node("node1", 3000, 5000), [req_pod(*CPU_ONLY, name="a")]), (make_node("node2", 3000, 5000), [])],
        [100, 50],  # 50 -> 100, 100 -> 50
    ),
    (
        # node1 also has 8 nvidia.com/gpu, which the pod does not request, so the plugin skips
        # it (the model here has no extended resources: the same thing).
        BALANCED,
        "scalar resource is not included in the score computation if pod doesn't request the scalar resource",
        req_pod(*CPU_AND_MEMORY),
        [(make_node("node1", 3500, 40000), []), (make_node("node2", 3500, 40000), [])],
        [56, 56],  # 100 -> 63
    ),
]


@pytest.mark.parametrize(
    ("pod_obj", "nodes", "expected"),
    [c[2:] for c in BALANCED_CASES],
    ids=[f"balanced_allocation_test.go: {c[1]}" for c in BALANCED_CASES],
)
def test_balanced_allocation_score_table(
    pod_obj: dict[str, Any],
    nodes: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    expected: list[int],
) -> None:
    assert _scores(NodeResourcesBalancedAllocation(), pod_obj, nodes) == expected
