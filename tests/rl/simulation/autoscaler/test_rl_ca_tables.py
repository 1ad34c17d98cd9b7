"""cluster-autoscaler's own Go test tables, translated: each case cites its file at
kubernetes/autoscaler f7bb0c3623750695e1bb7f9f52269590f2974cbf (paths under cluster-autoscaler/).
The implementations are rl/simulation/autoscaler/scan.py, rl/simulation/autoscaler/scaledown.py and rl/simulation/engine/workloads.py."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rl.simulation.autoscaler.scaledown import (
    CA_COMMIT,
    crop_to_budgets,
    node_utilization,
    still_unremovable,
    within_min_sizes,
)
from rl.simulation.autoscaler.scan import ScaleUpOption, least_waste_score, make_expander
from rl.simulation.engine.workloads import blocking_reason
from rl.simulation.traces.scenario import PodSpec
from scheduler.domain.model import ContainerResources, NodeInfo, PodInfo, Resources

assert CA_COMMIT == "f7bb0c3623750695e1bb7f9f52269590f2974cbf"
MIB = 1024 * 1024


def pod_info(cpu_m: int, memory: int) -> PodInfo:
    return PodInfo(
        namespace="ns", name="p", uid="p",
        requests=Resources(cpu_millicores=cpu_m, memory_bytes=memory, pods=1),
        containers=(ContainerResources(cpu_request_millicores=cpu_m, memory_request_bytes=memory),),
    )


def template(cpu_m: int, memory: int) -> NodeInfo:
    # makeNodeInfo: capacity = allocatable.
    capacity = Resources(cpu_millicores=cpu_m, memory_bytes=memory, pods=100)
    return NodeInfo(name="t", allocatable=capacity, capacity=capacity)


def test_least_waste_table():
    """expander/waste/waste_test.go TestLeastWaste."""
    cpu_per_pod, memory_per_pod = 500, 1000 * MIB
    infos = {0: pod_info(cpu_per_pod, memory_per_pod)}
    balanced = template(16 * cpu_per_pod, 16 * memory_per_pod)
    highmem = template(16 * cpu_per_pod, 32 * memory_per_pod)
    lowcpu = template(8 * cpu_per_pod, 16 * memory_per_pod)
    choose = make_expander("least-waste", infos.__getitem__)
    rng = random.Random(0)
    # "without any pods, one node info" and "one pod, one node info": the only option.
    empty = ScaleUpOption("balanced", 1, (), balanced)
    assert choose([empty], rng) is empty
    with_pod = ScaleUpOption("balanced", 1, (0,), balanced)
    assert choose([with_pod], rng) is with_pod
    # "one pod, two node infos, one that has lots of RAM one that has less": balanced.
    high = ScaleUpOption("highmem", 1, (0,), highmem)
    assert choose([with_pod, high], rng) is with_pod
    # "... and one that has less CPU": lowcpu.
    low = ScaleUpOption("lowcpu", 1, (0,), lowcpu)
    assert choose([with_pod, high, low], rng) is low
    # The score itself (waste.go): 15/16 idle CPU + 15/16 idle memory on balanced.
    assert least_waste_score(with_pod, infos.__getitem__) == pytest.approx(2 * 15 / 16)


def test_least_waste_reads_capacity_not_allocatable():
    """expander/waste/waste.go resourcesForNode reads node.Status.Capacity."""
    infos = {0: pod_info(1000, 1024 * MIB)}
    node = NodeInfo(
        name="t",
        allocatable=Resources(cpu_millicores=2000, memory_bytes=2048 * MIB, pods=10),
        capacity=Resources(cpu_millicores=4000, memory_bytes=4096 * MIB, pods=10),
    )
    option = ScaleUpOption("g", 1, (0,), node)
    assert least_waste_score(option, infos.__getitem__) == pytest.approx(0.75 + 0.75)


@pytest.mark.parametrize(
    ("pods", "daemons", "ignore", "expected"),
    [
        # simulator/utilization/info_test.go TestCalculate, on node1 (2000m, 2,000,000 B):
        # pod, pod, pod2 (no requests): memory 400,000 / 2,000,000 = 0.2 (CPU 0.1).
        (Resources(200, 400_000), Resources(), False, 0.2),
        # + two DaemonSet pods (100m, 200,000 each) with skipDaemonSetPods: 400,000 / 1,600,000.
        (Resources(400, 800_000), Resources(200, 400_000), True, 0.25),
        # pod, pod2, a DaemonSet pod, DaemonSet pods counted (the default): 400,000 / 2,000,000.
        (Resources(200, 400_000), Resources(100, 200_000), False, 0.2),
        # pod + a DaemonSet pod + a mirror pod, both skipped: 200,000 / 1,600,000 (the simulator
        # has no mirror pods: here it stands in the DaemonSet share).
        (Resources(300, 600_000), Resources(200, 400_000), True, 0.125),
    ],
)
def test_utilization_table(pods, daemons, ignore, expected):
    node = Resources(cpu_millicores=2000, memory_bytes=2_000_000)
    assert node_utilization(pods, node, daemons, ignore) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("requests", "daemons", "ignore", "unneeded"),
    [
        # core/scaledown/eligibility/eligibility_test.go getTestCases, node "regular" 1000m:
        ((600, 0), (0, 0), False, False),  # "highly utilized node is filtered out"
        ((100, 0), (0, 0), False, True),  # "underutilized node stays"
        # "high utilization daemonsets node is filtered out, when IgnoreDaemonSets is disabled"
        ((600, 0), (500, 0), False, False),
        ((600, 0), (500, 0), True, True),  # "high utilization daemonsets node stays"
    ],
)
def test_eligibility_table(requests, daemons, ignore, unneeded):
    node = Resources(cpu_millicores=1000, memory_bytes=10)
    utilization = node_utilization(Resources(*requests), node, Resources(*daemons), ignore)
    assert (utilization <= 0.5) is unneeded  # the default threshold, at or below


def trace_pod(owner: str | None, safe: bool | None = None) -> PodSpec:
    return PodSpec(0, 0, 1, 1, 1, 1, owner_kind=owner, safe_to_evict=safe)


@pytest.mark.parametrize(
    ("owner", "safe", "pdb_room", "reason"),
    [
        # simulator/drainability/rules/replicated/rule_test.go
        ("ReplicationController", None, None, None),  # "RC-managed pod"
        ("Job", None, None, None),  # "Job-managed pod"
        ("StatefulSet", None, None, None),  # "SS-managed pod"
        ("ReplicaSet", None, None, None),  # "RS-managed pod"
        (None, None, None, "NotReplicated"),  # "naked pod"
        ("CustomController", None, None, "NotReplicated"),  # "custom-controller-managed blocking pod"
        # simulator/drainability/rules/safetoevict/rule_test.go "safe to evict pod"
        (None, True, None, None),
        # simulator/drainability/rules/notsafetoevict/rule_test.go
        ("ReplicationController", False, None, "NotSafeToEvict"),  # "RC-managed pod with PodSafeToEvict=false annotation"
        ("Job", False, None, "NotSafeToEvict"),  # "job-managed pod with PodSafeToEvict=false annotation"
        # simulator/drainability/rules/daemonset/rule_test.go "daemonset pod"
        ("DaemonSet", None, 0, None),
        # simulator/drainability/rules/pdb/rule_test.go "no pdbs", "pdb prevents scale-down"
        ("ReplicaSet", None, None, None),
        ("ReplicaSet", None, 0, "NotEnoughPdb"),
        ("ReplicaSet", None, 1, None),
        # rules.go order: safetoevict comes before pdb, so the annotation wins over the PDB.
        ("ReplicaSet", True, 0, None),
    ],
)
def test_drainability_table(owner, safe, pdb_room, reason):
    assert blocking_reason(trace_pod(owner, safe), pdb_room) == reason


@pytest.mark.parametrize(
    ("empty_in_progress", "drain_in_progress", "empty", "drain", "want_empty", "want_drain"),
    [
        # core/scaledown/budgets/budgets_test.go TestCropNodesToBudgets, MaxScaleDownParallelism
        # 10 and MaxDrainParallelism 5 (the regular, not atomic, node-group cases):
        (0, 0, 0, 0, 0, 0),  # "no nodes"
        (0, 0, 10, 0, 10, 0),  # "empty nodes within max limit, no deletions in progress"
        (0, 0, 11, 0, 10, 0),  # "empty nodes exceeding max limit, no deletions in progress"
        (1, 1, 8, 0, 8, 0),  # "empty nodes with deletions in progress, within budget"
        (1, 1, 10, 0, 8, 0),  # "empty nodes with deletions in progress, exceeding budget"
        (5, 5, 10, 0, 0, 0),  # "empty nodes with deletions in progress, 0 budget left"
        (50, 50, 10, 0, 0, 0),  # "empty nodes with deletions in progress, budget exceeded"
        (0, 0, 0, 5, 0, 5),  # "drain nodes within max limit, no deletions in progress"
        (0, 0, 0, 10, 0, 5),  # "multiple drain node groups"
        (0, 0, 0, 6, 0, 5),  # "drain nodes exceeding max limit, no deletions in progress"
        (1, 2, 0, 3, 0, 3),  # "drain nodes with deletions in progress, within budget"
        (1, 2, 0, 5, 0, 3),  # "drain nodes with deletions in progress, exceeding drain budget"
        (1, 5, 0, 5, 0, 0),  # "drain nodes with deletions in progress, 0 drain budget left"
        (1, 50, 0, 5, 0, 0),  # "drain nodes with deletions in progress, drain budget exceeded"
        (7, 1, 0, 4, 0, 2),  # "drain nodes with deletions in progress, exceeding overall budget"
        (10, 0, 0, 4, 0, 0),  # "drain nodes with deletions in progress, 0 overall budget left"
        (50, 0, 0, 4, 0, 0),  # "drain nodes with deletions in progress, overall budget exceeded"
        (0, 0, 5, 5, 5, 5),  # "empty&drain nodes within max limits, no deletions in progress"
        (0, 0, 8, 8, 8, 2),  # "empty&drain nodes exceeding overall limit, no deletions in progress"
    ],
)
def test_budgets_table(empty_in_progress, drain_in_progress, empty, drain, want_empty, want_drain):
    empties = [f"empty-{i}" for i in range(empty)]
    drains = [f"drain-{i}" for i in range(drain)]
    got_empty, got_drain = crop_to_budgets(
        empties, drains, empty_in_progress, drain_in_progress, 10, 5
    )
    assert got_empty == empties[:want_empty] and got_drain == drains[:want_drain]


@pytest.mark.parametrize(
    ("empty", "drain", "min_size", "target", "ongoing", "want_empty", "want_drain"),
    [
        # core/scaledown/unneeded/nodes_test.go TestRemovableAt
        (3, 2, 1, 10, 2, 3, 2),  # "Node group min size is not reached"
        (3, 5, 1, 10, 2, 3, 4),  # "Node group min size is reached for drain nodes"
        (3, 5, 1, 5, 2, 2, 0),  # "Node group min size is reached for empty and drain nodes"
    ],
)
def test_removable_at_min_size_table(empty, drain, min_size, target, ongoing, want_empty, want_drain):
    nodes = [("ng", min_size)] * (empty + drain)
    allowed = within_min_sizes(nodes, Counter(ng=target), Counter(ng=ongoing))
    assert sum(allowed[:empty]) == want_empty and sum(allowed[empty:]) == want_drain


# core/scaledown/unremovable/nodes_test.go: its instants as offsets from updateTime (ms).
BEFORE_UPDATE, UPDATE, AFTER_UPDATE = -1.111, 0.0, 1.111


@pytest.mark.parametrize(
    ("unremovable", "nodes", "want"),
    [
        # core/scaledown/unremovable/nodes_test.go TestUpdate
        ({}, (), 0),  # "empty"
        ({"n1": BEFORE_UPDATE, "n2": AFTER_UPDATE}, ("n1", "n2"), 1),  # "one removed via ttl"
        ({"n1": AFTER_UPDATE, "n2": AFTER_UPDATE}, ("n2",), 1),  # "one missing from cluster"
        ({"n1": AFTER_UPDATE, "n2": AFTER_UPDATE}, ("n1", "n2"), 2),  # "all stay"
    ],
)
def test_unremovable_update_table(unremovable, nodes, want):
    assert len(still_unremovable(unremovable, set(nodes), UPDATE)) == want


def test_unremovable_update_drops_a_timeout_at_the_update_instant():
    # nodes.go Update keeps a node while `ttl.After(timestamp)`: one due exactly now is rechecked
    assert still_unremovable({"n1": UPDATE, "n2": AFTER_UPDATE}, {"n1", "n2"}, UPDATE) == {"n2": AFTER_UPDATE}
