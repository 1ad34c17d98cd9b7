"""descheduler's HighNodeUtilization, its own Go test tables translated (rl/simulation/controllers/descheduler/).

Sources: kubernetes-sigs/descheduler at 7d2b28bf2b6a12810317936d909af0270ff38fa3 —
HNU = pkg/framework/plugins/nodeutilization/highnodeutilization_test.go,
NU = pkg/framework/plugins/nodeutilization/nodeutilization_test.go,
VAL = pkg/framework/plugins/nodeutilization/validation_test.go. Each case keeps its Go name;
`evicted` is the table's expectedPodsEvicted (and, where the table names them, the pods).
TestHighNodeUtilization runs with DefaultEvictorArgs{NodeFit: true}; the taint table with the
defaults and a per-node eviction limit of its expected count, as the Go tests do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from rl.simulation.controllers.descheduler import DESCHEDULER_COMMIT
from rl.simulation.controllers.descheduler.evictor import DefaultEvictor, DefaultEvictorArgs
from rl.simulation.controllers.descheduler.highnodeutilization import (
    EvictionLimits,
    HighNodeUtilizationArgs,
    PodEvictor,
    balance,
    sort_by_usage,
    usage_percentages,
)
from tests.helpers.descheduler_objects import (
    EXTENDED,
    MIRROR_ANNOTATIONS,
    annotations,
    best_effort,
    ds_owner,
    local_storage,
    node_extended,
    node_json,
    node_labels,
    node_selector,
    node_taint,
    nodes_and_pods,
    normal_owner,
    pod_extended,
    pod_json,
    priority,
    rs_owner,
    tolerations,
    unschedulable,
)

HNU = "highnodeutilization_test.go TestHighNodeUtilization"
CRITICAL = 2_000_000_000
LOW, HIGH = 0, 10000  # NU: lowPriority, highPriority
WEST = {"datacenter": "west"}


def critical(pod: dict[str, Any]) -> None:
    normal_owner(pod)
    pod["metadata"]["namespace"] = "kube-system"
    priority(CRITICAL)(pod)


def mirror_with_storage(pod: dict[str, Any]) -> None:
    normal_owner(pod)
    local_storage(pod)
    annotations(MIRROR_ANNOTATIONS)(pod)


def n(name: str, cpu: int, mem: int, pods: int, *apply: Callable[[dict[str, Any]], None]) -> Any:
    return node_json(name, cpu, mem, pods, *apply)


def p(name: str, cpu: int, mem: int, node: str, *apply: Callable[[dict[str, Any]], None]) -> Any:
    return pod_json(name, cpu, mem, node, *apply)


def rs_pods(names: str, cpu: int, node: str) -> list[Any]:
    return [p(name, cpu, 0, node, rs_owner) for name in names.split()]


@dataclass(frozen=True)
class Case:
    name: str
    thresholds: dict[str, float]
    nodes: list[Any]
    pods: list[Any]
    evicted: int
    evicted_pods: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()


CASES = [
    Case("no node below threshold usage", {"cpu": 20, "pods": 20},
         [n("n1", 4000, 3000, 10), n("n2", 4000, 3000, 10), n("n3", 4000, 3000, 10)],
         rs_pods("p1 p2 p3", 400, "n1") + rs_pods("p4 p5 p6", 400, "n2")
         + rs_pods("p7 p8 p9", 400, "n3"), 0),
    Case("no evictable pods", {"cpu": 40, "pods": 40},
         [n("n1", 4000, 3000, 9), n("n2", 4000, 3000, 10), n("n3", 4000, 3000, 10)],
         [p("p1", 400, 0, "n1", mirror_with_storage), p("p2", 400, 0, "n1", critical),
          p("p3", 400, 0, "n2", ds_owner), p("p4", 400, 0, "n2", ds_owner)]
         + rs_pods("p5 p6 p7 p8", 400, "n3"), 0),
    Case("no node to schedule evicted pods", {"cpu": 20, "pods": 20},
         [n("n1", 4000, 3000, 10), n("n2", 4000, 3000, 10), n("n3", 4000, 3000, 10, unschedulable)],
         rs_pods("p1", 400, "n1") + rs_pods("p2", 400, "n2") + rs_pods("p3 p4 p5", 400, "n3"), 0),
    Case("without priorities", {"cpu": 30, "pods": 30},
         [n("n1", 4000, 3000, 10), n("n2", 4000, 3000, 10), n("n3", 4000, 3000, 10, unschedulable)],
         [p("p1", 400, 0, "n1", rs_owner), p("p2", 400, 0, "n1", critical)]
         + rs_pods("p3 p4 p5 p6", 400, "n2") + rs_pods("p7", 400, "n3"), 2, ("p1", "p7")),
    Case("without priorities stop when resource capacity is depleted", {"cpu": 30, "pods": 30},
         [n("n1", 2000, 3000, 10), n("n2", 2000, 3000, 10), n("n3", 2000, 3000, 10, unschedulable)],
         rs_pods("p1", 400, "n1") + rs_pods("p2 p3 p4 p5", 400, "n2") + rs_pods("p6", 400, "n3"),
         1),
    Case("with priorities", {"cpu": 30},
         [n("n1", 4000, 3000, 10), n("n2", 2000, 3000, 10), n("n3", 2000, 3000, 10, unschedulable)],
         [p("p1", 400, 0, "n1", rs_owner, priority(LOW)),
          p("p2", 400, 0, "n1", rs_owner, priority(HIGH))]
         + rs_pods("p5 p6 p7 p8", 400, "n2") + [p("p9", 400, 0, "n3", ds_owner)], 1, ("p1",)),
    Case("without priorities evicting best-effort pods only", {"cpu": 30},
         [n("n1", 3000, 3000, 10), n("n2", 3000, 3000, 5), n("n3", 3000, 3000, 10, unschedulable)],
         [p("p1", 0, 0, "n1", rs_owner, best_effort), p("p2", 400, 0, "n1", rs_owner)]
         + rs_pods("p3 p4 p5 p6", 400, "n2"), 1, ("p1",)),
    Case("with extended resource", {"cpu": 20, EXTENDED: 40},
         [n("n1", 4000, 3000, 10, node_extended(8)), n("n2", 4000, 3000, 10, node_extended(8)),
          n("n3", 4000, 3000, 10, unschedulable)],
         [p(name, 100, 0, "n1", rs_owner, pod_extended(1)) for name in ("p1", "p2")]
         + [p(name, 500, 0, "n2", rs_owner, pod_extended(1)) for name in ("p3", "p4", "p5", "p6")],
         2, ("p1", "p2")),
    Case("with extended resource in some of nodes", {"cpu": 40, EXTENDED: 40},
         [n("n1", 4000, 3000, 10, node_extended(8)), n("n2", 4000, 3000, 10),
          n("n3", 4000, 3000, 10, unschedulable)],
         [p(name, 100, 0, "n1", rs_owner, pod_extended(1)) for name in ("p1", "p2")]
         + rs_pods("p3 p4 p5 p6", 500, "n2"), 0),
    Case("Other node match pod node selector", {"cpu": 30, "pods": 30},
         [n("n1", 4000, 3000, 9, node_labels(WEST)), n("n2", 4000, 3000, 10)],
         rs_pods("p1 p2 p3", 400, "n1") + [p("p4", 400, 0, "n1", ds_owner),
                                           p("p5", 400, 0, "n2", rs_owner, node_selector(WEST))],
         1),
    Case("Other node does not match pod node selector", {"cpu": 30, "pods": 30},
         [n("n1", 4000, 3000, 9), n("n2", 4000, 3000, 10)],
         rs_pods("p1 p2 p3", 400, "n1") + [p("p4", 400, 0, "n1", ds_owner),
                                           p("p5", 400, 0, "n2", rs_owner, node_selector(WEST))],
         0),
    Case("Other node does not have enough Memory", {"cpu": 30, "pods": 30},
         [n("n1", 4000, 200, 9), n("n2", 4000, 3000, 10)],
         [p(name, 400, 50, "n1", rs_owner) for name in ("p1", "p2", "p3")]
         + [p("p4", 400, 50, "n1", ds_owner), p("p5", 400, 100, "n2", rs_owner)], 0),
    Case("with extended resource threshold and no extended resource pods", {EXTENDED: 40},
         [n(name, 4000, 3000, 10, node_extended(10)) for name in ("n1", "n2", "n3")],
         [p(name, 100, 0, "n1", rs_owner, pod_extended(3)) for name in ("p1", "p2")]
         + rs_pods("p3 p4 p5 p6", 500, "n2"), 0, modes=("OnlyThresholdingResources",)),
]


def run(case_nodes: list[Any], case_pods: list[Any], args: HighNodeUtilizationArgs,
        evictor_args: DefaultEvictorArgs, limits: EvictionLimits | None = None) -> list[str]:
    nodes, pods = nodes_and_pods(case_nodes, case_pods)
    evictor = DefaultEvictor(evictor_args, nodes=lambda: nodes, pods_on=lambda name: pods[name])
    evicted = balance(nodes, pods, args, evictor, PodEvictor(lambda pod: True, limits))
    return [pod.name for pod in evicted]


def test_commit_is_the_one_cited() -> None:
    assert DESCHEDULER_COMMIT.startswith("7d2b28bf")


@pytest.mark.parametrize("case", CASES, ids=[f"{HNU}: {c.name}" for c in CASES])
def test_high_node_utilization(case: Case) -> None:
    args = HighNodeUtilizationArgs(thresholds=case.thresholds, eviction_modes=case.modes)
    evicted = run(case.nodes, case.pods, args, DefaultEvictorArgs(node_fit=True))
    assert len(evicted) == case.evicted
    if case.evicted_pods:
        assert sorted(evicted) == sorted(case.evicted_pods)


TOLERATE = {"key": "key", "value": "value"}
TAINT_CASES = [  # highnodeutilization_test.go TestHighNodeUtilizationWithTaints
    ("No taints", [n("n1", 1000, 3000, 10), n("n2", 1000, 3000, 10), n("n3", 1000, 3000, 10)],
     [p(f"pod_{i}_n1", 200, 0, "n1", rs_owner) for i in (1, 2, 3)]
     + [p("pod_4_n2", 200, 0, "n2", rs_owner)], 1),
    ("No pod tolerates node taint",
     [n("n1", 1000, 3000, 10), n("n3", 1000, 3000, 10, node_taint("key", "value"))],
     [p("pod_1_n1", 200, 0, "n1", rs_owner), p("pod_2_n3", 200, 0, "n3", rs_owner)], 0),
    ("Pod which tolerates node taint",
     [n("n1", 1000, 3000, 10), n("n3", 1000, 3000, 10, node_taint("key", "value"))],
     [p("pod_1_n1", 100, 0, "n1", rs_owner),
      p("tolerate_pod", 200, 0, "n1", rs_owner, tolerations(TOLERATE)),
      p("pod_9_n3", 500, 0, "n3", rs_owner)], 1),
]


@pytest.mark.parametrize(
    "nodes,pods,expected", [c[1:] for c in TAINT_CASES],
    ids=[f"highnodeutilization_test.go TestHighNodeUtilizationWithTaints: {c[0]}" for c in TAINT_CASES],
)
def test_high_node_utilization_with_taints(nodes: list[Any], pods: list[Any], expected: int) -> None:
    args = HighNodeUtilizationArgs(thresholds={"cpu": 40})
    evicted = run(nodes, pods, args, DefaultEvictorArgs(), EvictionLimits(per_node=expected))
    assert len(evicted) == expected
    if any(raw["metadata"]["name"] == "tolerate_pod" for raw in pods):
        assert evicted == ["tolerate_pod"]  # the only pod that may go to the tainted node


VALIDATION = [  # validation_test.go TestValidateHighNodeUtilizationPluginConfig
    ("valid configuration with CPU and memory", {"cpu": 80, "memory": 90},
     ("OnlyThresholdingResources",), (), None),
    ("valid configuration with extended resource", {"cpu": 85, EXTENDED: 95},
     ("OnlyThresholdingResources",), (), None),
    ("empty thresholds", {}, (), (), "no resource threshold is configured"),
    ("threshold below minimum (0%)", {"cpu": -1}, (), (), "cpu threshold not in [0, 100] range"),
    ("threshold above maximum (100%)", {"memory": 101}, (), (),
     "memory threshold not in [0, 100] range"),
    ("multiple thresholds with one out of range", {"cpu": 50, "memory": 150}, (), (),
     "memory threshold not in [0, 100] range"),
    ("evictableNamespaces with Exclude (allowed)", {"cpu": 80}, (), ("ns1", "ns2"), None),
    ("invalid eviction mode", {"cpu": 80}, ("InvalidMode",), (),
     "invalid eviction mode InvalidMode"),
    ("missing eviction modes (nil) - should be allowed (treated as empty)", {"cpu": 80}, (), (),
     None),
]


@pytest.mark.parametrize("name,thresholds,modes,exclude,message", VALIDATION,
                         ids=[v[0] for v in VALIDATION])
def test_validation(name: str, thresholds: dict[str, float], modes: tuple[str, ...],
                    exclude: tuple[str, ...], message: str | None) -> None:
    def build() -> HighNodeUtilizationArgs:
        return HighNodeUtilizationArgs(thresholds=thresholds, eviction_modes=modes,
                                       exclude_namespaces=exclude)

    if message is None:
        assert build().thresholds == thresholds
    else:
        with pytest.raises(ValueError) as error:
            build()
        assert str(error.value) == message


SORT_CASES = [  # nodeutilization_test.go TestSortNodesByUsage (the ascending half)
    ("cpu memory pods", [("node1", {"cpu": 1730, "memory": 3038982964, "pods": 25}),
                         ("node2", {"cpu": 1220, "memory": 3038982964, "pods": 11}),
                         ("node3", {"cpu": 1530, "memory": 5038982964, "pods": 20})],
     ["node2", "node1", "node3"]),
    ("memory", [("node1", {"memory": 3038982964}), ("node2", {"memory": 2038982964}),
                ("node3", {"memory": 5038982964})], ["node2", "node1", "node3"]),
]


@pytest.mark.parametrize("name,usages,order", SORT_CASES, ids=[c[0] for c in SORT_CASES])
def test_sort_nodes_by_usage(name: str, usages: list[Any], order: list[str]) -> None:
    assert sort_by_usage(usages) == order


PERCENT_CASES = [  # nodeutilization_test.go TestResourceUsageToResourceThreshold
    ("10 percent", {"cpu": 100}, {"cpu": 1000}, {"cpu": 10.0}),
    ("zeroed out capacity", {"cpu": 100}, {"cpu": 0}, {"cpu": 0.0}),
    ("non existing usage", {"does-not-exist": 100}, {"cpu": 100, "memory": 100}, {}),
    ("existing and non existing usage", {"does-not-exist": 100, "cpu": 200},
     {"cpu": 1000, "memory": 1000}, {"cpu": 20.0}),
    ("nil usage", {"cpu": None}, {"cpu": 1000}, {}),
    ("nil capacity", {"cpu": 100}, {"cpu": None}, {}),
]


@pytest.mark.parametrize("name,usage,capacity,expected", PERCENT_CASES, ids=[c[0] for c in PERCENT_CASES])
def test_usage_percentages(name: str, usage: dict[str, Any], capacity: dict[str, Any],
                           expected: dict[str, float]) -> None:
    assert usage_percentages(usage, capacity) == expected


# -- rules the Go tables above leave open, on hand-computed cases of our own ------------------


def test_a_node_exactly_at_the_threshold_is_under_utilized() -> None:
    """isNodeBelowThreshold: `threshold < usage` is the only failure, so 40 % of a 40 %
    threshold is under-utilized (n2's pod goes to n1, the only destination)."""
    nodes = [n("n1", 1000, 3000, 10), n("n2", 1000, 3000, 10)]
    pods = rs_pods("a b c d e", 100, "n1") + rs_pods("f g h i", 100, "n2")
    evicted = run(nodes, pods, HighNodeUtilizationArgs(thresholds={"cpu": 40}), DefaultEvictorArgs())
    assert evicted == ["f", "g", "h", "i"]


def test_pods_go_in_priority_then_qos_order() -> None:
    """SortPodsBasedOnPriorityLowToHigh: no priority first, then low to high; on a tie
    BestEffort before Burstable. n2 has room for three more pods: the first three go."""
    nodes = [n("n1", 4000, 3000, 10), n("n2", 2000, 3000, 10)]
    pods = [
        p("high", 100, 0, "n1", rs_owner, priority(HIGH)),
        p("low", 100, 0, "n1", rs_owner, priority(LOW)),
        p("low-best-effort", 0, 0, "n1", rs_owner, priority(LOW), best_effort),
        p("unset", 100, 0, "n1", rs_owner),
    ] + rs_pods("x1 x2 x3 x4 x5 x6 x7", 200, "n2")
    evicted = run(nodes, pods, HighNodeUtilizationArgs(thresholds={"cpu": 30}), DefaultEvictorArgs())
    assert evicted == ["unset", "low-best-effort", "low"]
