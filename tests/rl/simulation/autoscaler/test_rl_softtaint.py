"""cluster-autoscaler's soft taint on unneeded nodes (rl/simulation/autoscaler/softtaint.py):
its update translated from CA's test, and what it does to a placement."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from common.curves import PowerCurve
from rl.evaluation.benchmark import run_once
from rl.simulation.autoscaler.model import AutoscalerModel, old_defaults
from rl.simulation.autoscaler.softtaint import update_soft_taints
from rl.simulation.cluster import ClusterModel, simulation
from rl.simulation.engine.node import DELETION_CANDIDATE, SimNode
from rl.simulation.traces.scenario import NodeSpec, PodSpec

LINEAR = PowerCurve.linear(100.0, 200.0)


def spec(name: str, group: str, cores: float, min_count: int = 0) -> NodeSpec:
    return NodeSpec(name, group, cores, 8, LINEAR, min_count=min_count)


class Cluster:
    """The part of ClusterAPI the soft taint uses: the nodes, and the taint as the engine puts
    it on (rl/simulation/engine/actions.py `soft_taint`)."""

    def __init__(self, nodes: Sequence[SimNode]) -> None:
        self.nodes = list(nodes)

    def soft_taint(self, node: SimNode, on: bool) -> None:
        node.deletion_candidate = on


def tainted(cluster: Cluster) -> set[str]:
    return {n.spec.name for n in cluster.nodes if DELETION_CANDIDATE in n.scheduling_info.taints}


def test_soft_taint_update_as_cluster_autoscaler_tests_it():
    # core/scaledown/actuation/softtaint_test.go TestSoftTaintUpdate: two ready nodes of ng1,
    # MaxBulkSoftTaintCount 1.
    cluster = Cluster([SimNode(s, s.node_info(), s.curve.as_points()) for s in
                       (spec("n1000", "ng1", 1), spec("n2000", "ng1", 2))])
    update_soft_taints(cluster, set(), 1)  # "no superfluous nodes"
    assert tainted(cluster) == set()
    update_soft_taints(cluster, {"n1000"}, 1)  # "one unneeded node"
    assert tainted(cluster) == {"n1000"}
    update_soft_taints(cluster, set(), 1)  # "remove soft taint"
    assert tainted(cluster) == set()
    both = {"n1000", "n2000"}
    update_soft_taints(cluster, both, 1)  # "bulk update taint limit": one a call
    assert len(tainted(cluster)) == 1
    update_soft_taints(cluster, both, 1)
    assert tainted(cluster) == both
    update_soft_taints(cluster, set(), 1)  # "bulk update untaint limit"
    assert len(tainted(cluster)) == 1
    update_soft_taints(cluster, set(), 1)
    assert tainted(cluster) == set()


def test_untainting_comes_first_and_a_draining_node_is_left_as_it_is():
    # softtaint.go: the needed nodes are untainted before the unneeded are tainted, within one
    # budget; a node with the ToBeDeleted taint (`deleting`) is skipped both ways.
    cluster = Cluster([SimNode(s, s.node_info(), s.curve.as_points()) for s in
                       (spec("a", "g", 1), spec("b", "g", 1), spec("c", "g", 1))])
    cluster.nodes[0].deletion_candidate = True
    cluster.nodes[2].deleting = True
    update_soft_taints(cluster, {"b", "c"}, 1)
    assert tainted(cluster) == set()
    update_soft_taints(cluster, {"b", "c"}, 1)
    assert tainted(cluster) == {"b"}
    update_soft_taints(cluster, {"b", "c"}, 0)  # 0: the taint is off
    assert tainted(cluster) == {"b"}


@pytest.mark.parametrize(("soft_taints", "pod_2_on"), [(10, "a-0"), (0, "b-0")])
def test_a_new_pod_goes_past_an_unneeded_node(soft_taints, pod_2_on):
    # Pod 0 (2 cores) holds a-0 (4 cores, its group's minimum); pod 1 (3 cores) fits nowhere:
    # b-0 boots at 13, is ready at 133 and empty from 233, when the loop finds it unneeded and
    # cluster-autoscaler soft-taints it. Pod 2 (1 core) arrives at 300 and fits both. By
    # LeastAllocated the empty b-0 scores best (cpu 75 + memory 93 against a-0's 25 + 87);
    # kube-scheduler's TaintToleration (weight 3) gives b-0, alone with an intolerable
    # PreferNoSchedule taint, 0 where a-0 has 100 × 3: pod 2 goes to a-0. Without the soft
    # taint (--max-bulk-soft-taint-count 0) it goes to b-0.
    nodes = [spec("a-0", "a", 4, min_count=1), spec("b-0", "b", 4)]
    pods = [PodSpec(0, 0, 2_000, 2, 0.5, 1), PodSpec(1, 3, 100, 3, 0.5, 1), PodSpec(2, 300, 100, 1, 0.5, 1)]
    model = AutoscalerModel(boot_seconds=120.0, boot_joules=6_000.0, max_bulk_soft_taint_count=soft_taints)
    result = run_once(nodes, pods, "default", 0, cluster=ClusterModel(autoscaler=model))
    assert {o.index: o.node for o in result.outcomes} == {0: "a-0", 1: "b-0", 2: pod_2_on}
    assert {o.index: o.start_s for o in result.outcomes}[2] == 300.0


def test_the_old_defaults_ablation_has_no_soft_taint():
    assert old_defaults(AutoscalerModel()).max_bulk_soft_taint_count == 0
    assert AutoscalerModel().max_bulk_soft_taint_count == 10  # config/flags/flags.go
    with pytest.raises(ValueError, match="soft-taint"):
        AutoscalerModel(max_bulk_soft_taint_count=-1)


def test_only_a_ready_node_takes_the_soft_taint_and_powering_off_takes_it_off():
    nodes = [spec("a-0", "a", 4, min_count=1), spec("b-0", "b", 4)]
    sim = simulation(nodes, [PodSpec(0, 0, 100, 1, 0.5, 1)], ClusterModel(autoscaler=AutoscalerModel()), 0)
    on, off = sim.nodes
    sim.actions.soft_taint(off, True)  # b-0 is off: no node object to taint
    sim.actions.soft_taint(on, True)
    assert (on.deletion_candidate, off.deletion_candidate) == (True, False)
    seen = sim.view.node_state(on).info
    assert DELETION_CANDIDATE in seen.taints and DELETION_CANDIDATE not in on.info.taints
    assert sim.view.node_state(on).info is seen  # one object while tainted, as a cache keeps it
    sim.lifecycle.power_down(on)
    assert not on.deletion_candidate and sim.view.node_state(on).info is on.info
