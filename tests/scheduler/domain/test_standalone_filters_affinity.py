"""kube-scheduler's default filters on plain data: nodeSelector and node affinity, table-driven."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.standalone_objects import node, pod
from scheduler.domain.filters import (
    REASON_NODE_AFFINITY,
)
from tests.helpers.filter_table import FilterCase, check_filter_case, filter_table

# --- node selector and node affinity --------------------------------------------------------

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

FILTER_CASES: list[FilterCase] = [
    # (id, pod, node, pods already bound, expected reasons)
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
]


@filter_table(FILTER_CASES)
def test_filter_table(
    pod_obj: dict[str, Any],
    node_obj: dict[str, Any],
    bound: list[dict[str, Any]],
    expected: tuple[str, ...],
) -> None:
    check_filter_case(pod_obj, node_obj, bound, expected)
