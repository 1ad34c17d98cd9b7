"""kube-scheduler's default filters on plain data: table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.harness.standalone_objects import container, node, node_state, pod
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.filters import (
    REASON_NODE_AFFINITY,
    REASON_TOO_MANY_PODS,
    REASON_UNSCHEDULABLE,
    failure_summary,
    filter_nodes,
    node_failures,
    tolerates,
)
from scheduler.domain.model import Taint, Toleration

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


def _term(*exprs: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        term["matchFields"] = list(fields)
    return term


def _expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


LABELS = {"zone": "a", "gen": "5", "disk": "ssd"}

FILTER_CASES: list[
    tuple[str, dict[str, Any], dict[str, Any], list[dict[str, Any]], tuple[str, ...]]
] = [
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
    ("nodeSelector match", pod(node_selector={"zone": "a"}), node("n", labels=LABELS), [], ()),
    (
        "nodeSelector mismatch",
        pod(node_selector={"zone": "b"}),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "nodeSelector missing label",
        pod(node_selector={"rack": "1"}),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "In",
        pod(affinity_terms=[_term(_expr("zone", "In", "a", "b"))]),
        node("n", labels=LABELS),
        [],
        (),
    ),
    (
        "In no match",
        pod(affinity_terms=[_term(_expr("zone", "In", "c"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "NotIn",
        pod(affinity_terms=[_term(_expr("zone", "NotIn", "b"))]),
        node("n", labels=LABELS),
        [],
        (),
    ),
    (
        "NotIn on missing label matches",
        pod(affinity_terms=[_term(_expr("rack", "NotIn", "1"))]),
        node("n", labels=LABELS),
        [],
        (),
    ),
    (
        "NotIn excluded",
        pod(affinity_terms=[_term(_expr("zone", "NotIn", "a"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "Exists",
        pod(affinity_terms=[_term(_expr("disk", "Exists"))]),
        node("n", labels=LABELS),
        [],
        (),
    ),
    (
        "Exists missing",
        pod(affinity_terms=[_term(_expr("gpu", "Exists"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "DoesNotExist",
        pod(affinity_terms=[_term(_expr("gpu", "DoesNotExist"))]),
        node("n", labels=LABELS),
        [],
        (),
    ),
    (
        "DoesNotExist present",
        pod(affinity_terms=[_term(_expr("disk", "DoesNotExist"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    ("Gt", pod(affinity_terms=[_term(_expr("gen", "Gt", "4"))]), node("n", labels=LABELS), [], ()),
    (
        "Gt equal fails",
        pod(affinity_terms=[_term(_expr("gen", "Gt", "5"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    ("Lt", pod(affinity_terms=[_term(_expr("gen", "Lt", "6"))]), node("n", labels=LABELS), [], ()),
    (
        "Lt on non-integer label",
        pod(affinity_terms=[_term(_expr("zone", "Lt", "6"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "Gt with two values is invalid",
        pod(affinity_terms=[_term(_expr("gen", "Gt", "1", "2"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "Gt parses integers, not strings (\"10\" > \"9\")",
        pod(affinity_terms=[_term(_expr("gen", "Gt", "9"))]),
        node("n", labels={"gen": "10"}),
        [],
        (),
    ),
    (
        "Lt parses integers: \"10\" is not below \"9\"",
        pod(affinity_terms=[_term(_expr("gen", "Lt", "9"))]),
        node("n", labels={"gen": "10"}),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    ("Gt with signs", pod(affinity_terms=[_term(_expr("t", "Gt", "-3"))]), node("n", labels={"t": "+2"}), [], ()),
    (
        "Gt with a non-integer value is invalid (even where the label would pass)",
        pod(affinity_terms=[_term(_expr("gen", "Gt", "4.5"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "Lt past int64 is invalid",
        pod(affinity_terms=[_term(_expr("gen", "Lt", "9223372036854775808"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "Gt on a missing label does not match",
        pod(affinity_terms=[_term(_expr("rack", "Gt", "0"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "Lt on a decimal label does not match",
        pod(affinity_terms=[_term(_expr("v", "Lt", "9"))]),
        node("n", labels={"v": "1.5"}),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "In without values is invalid",
        pod(affinity_terms=[_term(_expr("zone", "In"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "Exists with values is invalid",
        pod(affinity_terms=[_term(_expr("zone", "Exists", "a"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "expressions ANDed",
        pod(affinity_terms=[_term(_expr("zone", "In", "a"), _expr("disk", "In", "hdd"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "terms ORed",
        pod(affinity_terms=[_term(_expr("zone", "In", "z")), _term(_expr("disk", "In", "ssd"))]),
        node("n", labels=LABELS),
        [],
        (),
    ),
    (
        "invalid term does not spoil a valid one",
        pod(affinity_terms=[_term(_expr("zone", "Bogus", "a")), _term(_expr("zone", "In", "a"))]),
        node("n", labels=LABELS),
        [],
        (),
    ),
    (
        "empty term matches nothing",
        pod(affinity_terms=[{}]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "matchFields metadata.name",
        pod(
            affinity_terms=[
                _term(fields=({"key": "metadata.name", "operator": "In", "values": ["n"]},))
            ]
        ),
        node("n"),
        [],
        (),
    ),
    (
        "matchFields other node",
        pod(
            affinity_terms=[
                _term(fields=({"key": "metadata.name", "operator": "In", "values": ["m"]},))
            ]
        ),
        node("n"),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    (
        "selector and affinity both needed",
        pod(node_selector={"zone": "a"}, affinity_terms=[_term(_expr("disk", "In", "hdd"))]),
        node("n", labels=LABELS),
        [],
        (REASON_NODE_AFFINITY,),
    ),
    ("cpu exceeds", pod(requests={"cpu": "5"}), node("n", cpu="4"), [], ("Insufficient cpu",)),
    (
        "cpu exactly fits",
        pod(requests={"cpu": "3"}),
        node("n", cpu="4"),
        [pod("b", requests={"cpu": "1"}, node_name="n")],
        (),
    ),
    (
        "cpu taken by bound pods",
        pod(requests={"cpu": "1500m"}),
        node("n", cpu="4"),
        [pod("b", requests={"cpu": "2600m"}, node_name="n")],
        ("Insufficient cpu",),
    ),
    (
        "cpu and memory both short",
        pod(requests={"cpu": "8", "memory": "16Gi"}),
        node("n"),
        [],
        ("Insufficient cpu", "Insufficient memory"),
    ),
    (
        "ephemeral storage",
        pod(requests={"ephemeral-storage": "2Gi"}),
        node("n", ephemeral_storage="1Gi"),
        [],
        ("Insufficient ephemeral-storage",),
    ),
    (
        "zero request fits an over-committed node",
        pod(requests={}),
        node("n", cpu="1"),
        [pod("b", requests={"cpu": "2"}, node_name="n")],
        (),
    ),
    (
        "too many pods",
        pod(),
        node("n", pods="1"),
        [pod("b", node_name="n")],
        (REASON_TOO_MANY_PODS,),
    ),
    # init containers: max(Σ app containers + sidecars, each init + sidecars before it)
    (
        "init container larger than app",
        pod(
            containers=[container(requests={"cpu": "1"})],
            init_containers=[container("init", {"cpu": "3"})],
        ),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        "init container smaller than app",
        pod(
            containers=[container(requests={"cpu": "2"})],
            init_containers=[container("init", {"cpu": "1"})],
        ),
        node("n", cpu="2"),
        [],
        (),
    ),
    (
        "sidecar adds to app containers",
        pod(
            containers=[container(requests={"cpu": "1500m"})],
            init_containers=[container("sidecar", {"cpu": "600m"}, restart_policy="Always")],
        ),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        # app 500m + sidecar 1 = 1.5; the init container runs beside the sidecar started
        # before it: 1 + 1.5 = 2.5 > 2.
        "init container after a sidecar runs beside it",
        pod(
            containers=[container(requests={"cpu": "500m"})],
            init_containers=[
                container("sidecar", {"cpu": "1"}, restart_policy="Always"),
                container("init", {"cpu": "1500m"}),
            ],
        ),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        # The same containers, init first: it runs alone (1.5), then app + sidecar (1.5).
        "init container before a sidecar runs alone",
        pod(
            containers=[container(requests={"cpu": "500m"})],
            init_containers=[
                container("init", {"cpu": "1500m"}),
                container("sidecar", {"cpu": "1"}, restart_policy="Always"),
            ],
        ),
        node("n", cpu="2"),
        [],
        (),
    ),
    (
        "the largest init container counts, not their sum",
        pod(
            containers=[container(requests={"memory": "1Gi"})],
            init_containers=[
                container("a", {"memory": "6Gi"}),
                container("b", {"memory": "6Gi"}),
            ],
        ),
        node("n", memory="8Gi"),
        [],
        (),
    ),
    (
        "init containers and overhead together",
        pod(
            containers=[container(requests={"cpu": "1"})],
            init_containers=[container("init", {"cpu": "1800m"})],
            overhead={"cpu": "250m"},
        ),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        "overhead counted",
        pod(requests={"cpu": "1800m"}, overhead={"cpu": "250m"}),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        "taint checked before resources",
        pod(requests={"cpu": "64"}),
        node("n", taints=[NO_SCHEDULE]),
        [],
        ("node(s) had untolerated taint {dedicated: gpu}",),
    ),
]


@pytest.mark.parametrize(
    ("pod_obj", "node_obj", "bound", "expected"),
    [c[1:] for c in FILTER_CASES],
    ids=[c[0] for c in FILTER_CASES],
)
def test_filter_table(
    pod_obj: dict[str, Any],
    node_obj: dict[str, Any],
    bound: list[dict[str, Any]],
    expected: tuple[str, ...],
) -> None:
    assert node_failures(pod_info_from_k8s(pod_obj), node_state(node_obj, bound)) == expected


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
