"""kube-scheduler's default filters on plain data: table-driven (tolerations, node conditions,
taints, the failure summary; node affinity and resources have their own modules)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.harness.standalone_objects import node, node_state, pod
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.filters import (
    REASON_UNSCHEDULABLE,
    failure_summary,
    filter_nodes,
    tolerates,
)
from scheduler.domain.model import Taint, Toleration
from tests.helpers.filter_table import FilterCase, check_filter_case, filter_table

# --- tolerations vs taints ---------------------------------------------------------------------

TOLERATION_CASES = [
    # (toleration, taint, tolerated)
    (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
    (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "w", "NoSchedule"), False),
    (Toleration("k", "", "v", ""), Taint("k", "v", "NoExecute"), True),  # "" operator = Equal
    (Toleration("k", "Equal", "", ""), Taint("k", "", "NoSchedule"), True),
    (Toleration("k", "Exists", "", ""), Taint("k", "anything", "NoExecute"), True),
    (Toleration("k", "Exists", "", "NoSchedule"), Taint("k", "x", "NoExecute"), False),
    (Toleration("", "Exists", "", ""), Taint("any", "x", "NoSchedule"), True),  # wildcard
    (Toleration("", "Exists", "", "NoExecute"), Taint("any", "x", "NoSchedule"), False),
    (Toleration("other", "Exists", "", ""), Taint("k", "", "NoSchedule"), False),
    (Toleration("k", "Gt", "1", ""), Taint("k", "2", "NoSchedule"), False),  # unknown op
    (Toleration("", "Exists", "", "NoSchedule"), Taint("any", "x", "NoSchedule"), True),
    (Toleration("", "Exists", "", "NoSchedule"), Taint("any", "", "NoExecute"), False),
    (Toleration("k", "Exists", "ignored", ""), Taint("k", "other", "NoSchedule"), True),
    (Toleration("k", "Equal", "v", "NoExecute"), Taint("k", "v", "PreferNoSchedule"), False),
    (Toleration("K", "Exists", "", ""), Taint("k", "", "NoSchedule"), False),  # keys are exact
]


@pytest.mark.parametrize(("toleration", "taint", "expected"), TOLERATION_CASES)
def test_toleration_matching(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


# --- the filter chain on whole pods and nodes ---------------------------------------------------

NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "maintenance", "value": "", "effect": "NoExecute"}
PREFER = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}

FILTER_CASES: list[FilterCase] = [
    # (id, pod, node, pods already bound, expected reasons)
    ("plain fit", pod(requests={"cpu": "1"}), node("n"), [], ()),
    (
        "not ready",
        pod(),
        node("n", ready=False),
        [],
        ("node(s) had untolerated taint {node.kubernetes.io/not-ready: }",),
    ),
    (
        "not ready but tolerated",
        pod(tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]),
        node("n", ready=False),
        [],
        (),
    ),
    ("cordoned", pod(), node("n", unschedulable=True), [], (REASON_UNSCHEDULABLE,)),
    (
        "cordoned, tolerated",
        pod(
            tolerations=[
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
            ]
        ),
        node("n", unschedulable=True),
        [],
        (),
    ),
    (
        "NoSchedule taint",
        pod(),
        node("n", taints=[NO_SCHEDULE]),
        [],
        ("node(s) had untolerated taint {dedicated: gpu}",),
    ),
    (
        "NoExecute taint",
        pod(),
        node("n", taints=[NO_EXECUTE]),
        [],
        ("node(s) had untolerated taint {maintenance: }",),
    ),
    ("PreferNoSchedule never filters", pod(), node("n", taints=[PREFER]), [], ()),
    (
        "NoExecute tolerated for a while is tolerated (tolerationSeconds does not filter)",
        pod(
            tolerations=[
                {
                    "key": "maintenance",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ]
        ),
        node("n", taints=[NO_EXECUTE]),
        [],
        (),
    ),
    (
        "a NoExecute toleration does not cover a NoSchedule taint of the same key",
        pod(tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]),
        node("n", taints=[NO_SCHEDULE]),
        [],
        ("node(s) had untolerated taint {dedicated: gpu}",),
    ),
    (
        "empty key with Exists tolerates every taint",
        pod(tolerations=[{"operator": "Exists"}]),
        node("n", taints=[NO_SCHEDULE, NO_EXECUTE], unschedulable=True),
        [],
        (),
    ),
    (
        "empty key with Exists and an effect tolerates only that effect",
        pod(tolerations=[{"operator": "Exists", "effect": "NoExecute"}]),
        node("n", taints=[NO_EXECUTE, NO_SCHEDULE]),
        [],
        ("node(s) had untolerated taint {dedicated: gpu}",),
    ),
    (
        # Every pod carries these two (the DefaultTolerationSeconds admission plugin adds them):
        # they must not let it onto a node that is not Ready.
        "not ready: the default NoExecute tolerations are not enough",
        pod(
            tolerations=[
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
            ]
        ),
        node("n", ready=False),
        [],
        ("node(s) had untolerated taint {node.kubernetes.io/not-ready: }",),
    ),
    (
        "taint tolerated by Equal",
        pod(
            tolerations=[
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
            ]
        ),
        node("n", taints=[NO_SCHEDULE]),
        [],
        (),
    ),
    (
        "one of two taints untolerated",
        pod(tolerations=[{"key": "dedicated", "operator": "Exists"}]),
        node("n", taints=[NO_SCHEDULE, NO_EXECUTE]),
        [],
        ("node(s) had untolerated taint {maintenance: }",),
    ),
    (
        "taint checked before resources",
        pod(requests={"cpu": "64"}),
        node("n", taints=[NO_SCHEDULE]),
        [],
        ("node(s) had untolerated taint {dedicated: gpu}",),
    ),
]


@filter_table(FILTER_CASES)
def test_filter_table(
    pod_obj: dict[str, Any],
    node_obj: dict[str, Any],
    bound: list[dict[str, Any]],
    expected: tuple[str, ...],
) -> None:
    check_filter_case(pod_obj, node_obj, bound, expected)


def test_summary_counts_and_sorts_like_kube_scheduler() -> None:
    nodes = [node(f"small-{i}", cpu="1", labels={"zone": "b"}) for i in range(3)]
    nodes += [node(f"other-{i}", labels={"zone": "a"}) for i in range(9)]
    p = pod_info_from_k8s(pod(requests={"cpu": "2"}, node_selector={"zone": "b"}))
    result = filter_nodes(p, [node_state(n) for n in nodes])
    assert result.feasible == []
    assert result.summary() == (
        "0/12 nodes are available: 3 Insufficient cpu, "
        "9 node(s) didn't match Pod's node affinity/selector."
    )
    p = pod_info_from_k8s(pod(requests={"cpu": "2", "memory": "10Gi"}))
    mixed = [node_state(n) for n in nodes] + [node_state(node("cordoned", unschedulable=True))]
    result = filter_nodes(p, mixed)
    # "12 Insufficient memory" sorts before "3 Insufficient cpu": string order, as Go's sort.
    assert result.summary() == (
        "0/13 nodes are available: 1 node(s) were unschedulable, 12 Insufficient memory, "
        "3 Insufficient cpu."
    )


def test_summary_without_nodes() -> None:
    """kube-scheduler's ErrNoNodesAvailable, not "0/0 nodes are available"."""
    assert failure_summary(0, {}) == "no nodes available to schedule pods"
    assert filter_nodes(pod_info_from_k8s(pod()), []).summary() == failure_summary(0, {})


def test_feasible_nodes_keep_their_order() -> None:
    nodes = [node_state(node(f"n{i}", cpu=str(i + 1))) for i in range(5)]
    result = filter_nodes(pod_info_from_k8s(pod(requests={"cpu": "3"})), nodes)
    assert [n.info.name for n in result.feasible] == ["n2", "n3", "n4"]
    assert set(result.failures) == {"n0", "n1"}
    assert result.total == 5
