"""NodeResourcesFit and NodeResourcesBalancedAllocation on real-shaped pods and nodes: the cases
of kube-scheduler's plugin tables (pkg/scheduler/framework/plugins/noderesources/
least_allocated_test.go, most_allocated_test.go, balanced_allocation_test.go at v1.36.3) rebuilt as Pod and
Node objects, parsed as the scheduler parses them, each plugin scoring the whole batch and each
node as a batch of one; kube-scheduler's default profile on them."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from benchmarks.harness.standalone_objects import container, node, node_state, pod
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.model import DEFAULT_MEMORY_REQUEST_BYTES, PodInfo
from scheduler.framework import CandidateBatch, ScorePlugin, normalized, select_best
from scheduler.plugins.defaults import default_profile
from scheduler.plugins.noderesources import (
    MOST_ALLOCATED,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    least_requested,
    most_requested,
)


def _scores(
    plugin: ScorePlugin,
    p: PodInfo,
    nodes: list[tuple[dict[str, Any], list[dict[str, Any]]]],
) -> list[int]:
    """The plugin's scores over all nodes; each node as a batch of one must score the same."""
    states = [node_state(n, bound) for n, bound in nodes]
    batch = normalized(plugin, p, CandidateBatch.of(states)).tolist()
    single = [normalized(plugin, p, CandidateBatch.of([s])).tolist()[0] for s in states]
    assert batch == single
    return batch


# Go's tests use cpu "4000" meaning cores; we use the same numbers as millicores, which keeps
# every ratio (and every expected score) and keeps the fixtures readable.


def _pod(*reqs: dict[str, str], name: str = "p", node_name: str | None = None) -> dict[str, Any]:
    return pod(
        name, containers=[container(f"c{i}", r) for i, r in enumerate(reqs)], node_name=node_name
    )


CPU_AND_MEMORY = ({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
CPU_ONLY = ({"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})


def _n(name: str, cpu_m: int, mem: int) -> dict[str, Any]:
    return node(name, cpu=f"{cpu_m}m", memory=str(mem))


LEAST_CASES = [
    # (id, pod, [(node, bound pods)], expected scores)
    (
        "nothing scheduled, nothing requested",
        pod(containers=[]),
        [(_n("n1", 4000, 10000), []), (_n("n2", 4000, 10000), [])],
        [100, 100],
    ),
    (
        "nothing scheduled, differently sized nodes",
        _pod(*CPU_AND_MEMORY),
        [(_n("n1", 4000, 10000), []), (_n("n2", 6000, 10000), [])],
        [37, 50],
    ),
    (
        "no resources requested, pods scheduled with resources",
        pod(containers=[]),
        [
            (
                _n("n1", 10000, 20000),
                [
                    _pod({"cpu": "3000m", "memory": "0"}, name="a"),
                    _pod({"cpu": "3000m", "memory": "0"}, name="b"),
                ],
            ),
            (
                _n("n2", 10000, 20000),
                [
                    _pod({"cpu": "3000m", "memory": "0"}, name="c"),
                    _pod({"cpu": "3000m", "memory": "5000"}, name="d"),
                ],
            ),
        ],
        [70, 57],
    ),
    (
        "resources requested, pods scheduled with resources",
        _pod(*CPU_AND_MEMORY),
        [
            (_n("n1", 10000, 20000), [_pod({"cpu": "3000m", "memory": "0"}, name="a")]),
            (_n("n2", 10000, 20000), [_pod({"cpu": "3000m", "memory": "5000"}, name="b")]),
        ],
        [57, 45],
    ),
    (
        "differently sized nodes",
        _pod(*CPU_AND_MEMORY),
        [
            (_n("n1", 10000, 20000), [_pod({"cpu": "3000m", "memory": "0"}, name="a")]),
            (_n("n2", 10000, 50000), [_pod({"cpu": "3000m", "memory": "5000"}, name="b")]),
        ],
        [57, 60],
    ),
    (
        "requested resources exceed node capacity",
        _pod({"cpu": "3000m", "memory": "0"}),
        [
            (_n("n1", 4000, 10000), [_pod({"cpu": "3000m", "memory": "0"}, name="a")]),
            (_n("n2", 4000, 10000), [_pod({"cpu": "3000m", "memory": "5000"}, name="b")]),
        ],
        [50, 25],
    ),
]


@pytest.mark.parametrize(
    ("pod_obj", "nodes", "expected"), [c[1:] for c in LEAST_CASES], ids=[c[0] for c in LEAST_CASES]
)
def test_least_allocated_matches_kube_scheduler(
    pod_obj: dict[str, Any],
    nodes: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    expected: list[int],
) -> None:
    assert _scores(NodeResourcesFit(), pod_info_from_k8s(pod_obj), nodes) == expected


MOST_CASES = [
    (
        "nothing scheduled, nothing requested",
        pod(containers=[]),
        [(_n("n1", 4000, 10000), []), (_n("n2", 4000, 10000), [])],
        [0, 0],
    ),
    (
        "nothing scheduled, differently sized nodes",
        _pod(*CPU_AND_MEMORY),
        [(_n("n1", 4000, 10000), []), (_n("n2", 6000, 10000), [])],
        [62, 50],
    ),
    (
        "resources requested, pods scheduled with resources",
        _pod({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}),
        [
            (_n("n1", 10000, 20000), [_pod({"cpu": "3000m", "memory": "0"}, name="a")]),
            (_n("n2", 10000, 20000), [_pod({"cpu": "3000m", "memory": "5000"}, name="b")]),
        ],
        [42, 55],
    ),
]


@pytest.mark.parametrize(
    ("pod_obj", "nodes", "expected"), [c[1:] for c in MOST_CASES], ids=[c[0] for c in MOST_CASES]
)
def test_most_allocated_matches_kube_scheduler(
    pod_obj: dict[str, Any],
    nodes: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    expected: list[int],
) -> None:
    assert _scores(NodeResourcesFit(MOST_ALLOCATED), pod_info_from_k8s(pod_obj), nodes) == expected


BALANCED_CASES = [
    (
        "nothing scheduled, differently sized nodes",
        _pod(*CPU_AND_MEMORY),
        [(_n("n1", 4000, 10000), []), (_n("n2", 6000, 10000), [])],
        [68, 75],
    ),
    (
        "pods scheduled with resources",
        _pod(*CPU_AND_MEMORY),
        [
            (_n("n1", 10000, 20000), [_pod(*CPU_ONLY, name="a")]),
            (_n("n2", 10000, 20000), [_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [73, 74],
    ),
    (
        "differently sized nodes",
        _pod(*CPU_AND_MEMORY),
        [
            (_n("n1", 10000, 20000), [_pod(*CPU_ONLY, name="a")]),
            (_n("n2", 10000, 50000), [_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [73, 70],
    ),
    (
        "requested resources at node capacity",
        _pod(*CPU_ONLY),
        [
            (_n("n1", 6000, 10000), [_pod(*CPU_ONLY, name="a")]),
            (_n("n2", 6000, 10000), [_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [62, 62],
    ),
    (
        "best-effort pod is skipped",
        pod(containers=[container()]),
        [(_n("n1", 6000, 10000), [_pod(*CPU_ONLY, name="a")])],
        [0],
    ),
]


@pytest.mark.parametrize(
    ("pod_obj", "nodes", "expected"),
    [c[1:] for c in BALANCED_CASES],
    ids=[c[0] for c in BALANCED_CASES],
)
def test_balanced_allocation_matches_kube_scheduler(
    pod_obj: dict[str, Any],
    nodes: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    expected: list[int],
) -> None:
    plugin = NodeResourcesBalancedAllocation()
    assert _scores(plugin, pod_info_from_k8s(pod_obj), nodes) == expected


@pytest.mark.parametrize(
    ("requested", "capacity", "least", "most"),
    [(0, 0, 0, 0), (0, 10, 100, 0), (3, 10, 70, 30), (1, 3, 66, 33), (11, 10, 0, 100)],
)
def test_per_resource_integer_arithmetic(
    requested: int, capacity: int, least: int, most: int
) -> None:
    req, cap = np.array([requested]), np.array([capacity])
    assert least_requested(req, cap).tolist() == [least]
    assert most_requested(req, cap).tolist() == [most]


def test_missing_request_counts_kube_scheduler_defaults_for_fit_scoring_only() -> None:
    # One container without requests, one with only cpu: the scoring request is
    # 100m + 1000m cpu and 200 MiB + 200 MiB memory; the fit filter's request stays 1000m / 0.
    p = pod_info_from_k8s(pod(containers=[container("a"), container("b", {"cpu": "1"})]))
    assert p.requests.cpu_millicores == 1000 and p.requests.memory_bytes == 0
    assert p.nonzero_requests is not None
    assert p.nonzero_requests.cpu_millicores == 1100
    assert p.nonzero_requests.memory_bytes == 2 * DEFAULT_MEMORY_REQUEST_BYTES
    n = node_state(node("n", cpu="11", memory=str(4 * DEFAULT_MEMORY_REQUEST_BYTES)))
    # cpu (11000-1100)*100//11000 = 90, memory (4-2)/4 → 50 → (90+50)//2 = 70
    assert NodeResourcesFit().score(p, CandidateBatch.of([n])).tolist() == [70]


def test_default_profile_total_is_fit_plus_balanced() -> None:
    """Without taints or preferred affinity, TaintToleration scores 100 everywhere (× 3) and
    NodeAffinity 0: the default profile's ranking is NodeResourcesFit + BalancedAllocation."""
    p = pod_info_from_k8s(_pod(*CPU_AND_MEMORY))
    batch = CandidateBatch.of([node_state(_n("n1", 4000, 10000)), node_state(_n("n2", 6000, 10000))])
    scored = default_profile().score(p, batch)
    assert scored.of("NodeResourcesFit").tolist() == [37, 50]
    assert scored.of("NodeResourcesBalancedAllocation").tolist() == [68, 75]
    assert scored.total.tolist() == [300 + 37 + 68, 300 + 50 + 75]
    most = default_profile(strategy=MOST_ALLOCATED).score(p, batch)
    assert most.of("NodeResourcesFit").tolist() == [62, 50]


def test_default_profile_spreads_like_least_allocated() -> None:
    p = pod_info_from_k8s(pod(requests={"cpu": "1", "memory": "1Gi"}))
    busy = node_state(
        node("busy"), [pod("x", requests={"cpu": "3", "memory": "6Gi"}, node_name="busy")]
    )
    idle = node_state(node("idle"))
    batch = CandidateBatch.of([busy, idle])
    assert select_best(default_profile().score(p, batch).total, random.Random(0)) == 1  # idle
