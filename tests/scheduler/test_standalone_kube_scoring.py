"""kube-scheduler's default scoring: the cases of its own plugin tables (least_allocated_test.go,
most_allocated_test.go, balanced_allocation_test.go), rebuilt as real-shaped pods and nodes."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from scheduler.kube_scoring import (
    MOST_ALLOCATED,
    KubeDefaultScorer,
    balanced_allocation,
    default_choice,
    default_scores,
    least_allocated,
    least_requested_score,
    most_allocated,
    most_requested_score,
    select_host,
)
from scheduler.model import DEFAULT_MEMORY_REQUEST_BYTES, PodInfo
from tests.helpers.standalone_objects import container, node, node_state, pod

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
    p = PodInfo.from_k8s(pod_obj)
    assert [least_allocated(p, node_state(n, bound)) for n, bound in nodes] == expected


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
    p = PodInfo.from_k8s(pod_obj)
    assert [most_allocated(p, node_state(n, bound)) for n, bound in nodes] == expected


BALANCED_CASES = [
    (
        "nothing scheduled, differently sized nodes",
        _pod(*CPU_AND_MEMORY),
        [(_n("n1", 4000, 10000), []), (_n("n2", 6000, 10000), [])],
        [87, 100],
    ),
    (
        "pods scheduled with resources",
        _pod(*CPU_AND_MEMORY),
        [
            (_n("n1", 10000, 20000), [_pod(*CPU_ONLY, name="a")]),
            (_n("n2", 10000, 20000), [_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [82, 95],
    ),
    (
        "differently sized nodes",
        _pod(*CPU_AND_MEMORY),
        [
            (_n("n1", 10000, 20000), [_pod(*CPU_ONLY, name="a")]),
            (_n("n2", 10000, 50000), [_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [82, 80],
    ),
    (
        "requested resources at node capacity",
        _pod(*CPU_ONLY),
        [
            (_n("n1", 6000, 10000), [_pod(*CPU_ONLY, name="a")]),
            (_n("n2", 6000, 10000), [_pod(*CPU_AND_MEMORY, name="b")]),
        ],
        [50, 75],
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
    p = PodInfo.from_k8s(pod_obj)
    assert [balanced_allocation(p, node_state(n, bound)) for n, bound in nodes] == expected


@pytest.mark.parametrize(
    ("requested", "capacity", "least", "most"),
    [(0, 0, 0, 0), (0, 10, 100, 0), (3, 10, 70, 30), (1, 3, 66, 33), (11, 10, 0, 100)],
)
def test_per_resource_integer_arithmetic(
    requested: int, capacity: int, least: int, most: int
) -> None:
    assert least_requested_score(requested, capacity) == least
    assert most_requested_score(requested, capacity) == most


def test_missing_request_counts_kube_scheduler_defaults_for_fit_scoring_only() -> None:
    # One container without requests, one with only cpu: the scoring request is
    # 100m + 1000m cpu and 200 MiB + 200 MiB memory; the fit filter's request stays 1000m / 0.
    p = PodInfo.from_k8s(pod(containers=[container("a"), container("b", {"cpu": "1"})]))
    assert p.requests.cpu_millicores == 1000 and p.requests.memory_bytes == 0
    assert p.nonzero_requests is not None
    assert p.nonzero_requests.cpu_millicores == 1100
    assert p.nonzero_requests.memory_bytes == 2 * DEFAULT_MEMORY_REQUEST_BYTES
    n = node_state(node("n", cpu="11", memory=str(4 * DEFAULT_MEMORY_REQUEST_BYTES)))
    # cpu (11000-1100)*100//11000 = 90, memory (4-2)/4 → 50 → (90+50)//2 = 70
    assert least_allocated(p, n) == 70


def test_default_total_is_fit_plus_balanced() -> None:
    p = PodInfo.from_k8s(_pod(*CPU_AND_MEMORY))
    states = [node_state(_n("n1", 4000, 10000)), node_state(_n("n2", 6000, 10000))]
    scores = default_scores(p, states)
    assert [(s.fit, s.balanced, s.total) for s in scores] == [(37, 87, 124), (50, 100, 150)]
    most = default_scores(p, states, strategy=MOST_ALLOCATED)
    assert [s.fit for s in most] == [62, 50]
    scorer = KubeDefaultScorer()
    assert [r.score for r in scorer.score(p, states, now=0.0)] == [62.0, 75.0]


def test_select_host_picks_the_best() -> None:
    assert select_host([("a", 10), ("b", 30), ("c", 20)], random.Random(1)) == "b"
    assert select_host([], random.Random(1)) is None


def test_select_host_breaks_ties_uniformly_and_reproducibly() -> None:
    scores = [("a", 50), ("b", 90), ("c", 90), ("d", 10), ("e", 90)]
    rng = random.Random(7)
    picks = Counter(select_host(scores, rng) for _ in range(3000))
    assert set(picks) == {"b", "c", "e"}
    for name in ("b", "c", "e"):
        assert 850 < picks[name] < 1150  # 1000 expected each
    first = [select_host(scores, random.Random(42)) for _ in range(5)]
    assert len(set(first)) == 1  # same seed, same choice


def test_default_choice_spreads_like_least_allocated() -> None:
    p = PodInfo.from_k8s(pod(requests={"cpu": "1", "memory": "1Gi"}))
    busy = node_state(
        node("busy"), [pod("x", requests={"cpu": "3", "memory": "6Gi"}, node_name="busy")]
    )
    idle = node_state(node("idle"))
    assert default_choice(p, [busy, idle], random.Random(0)) == "idle"
    assert default_choice(p, [], random.Random(0)) is None
