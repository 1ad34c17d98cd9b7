"""descheduler's HighNodeUtilization in the simulator (rl/simulation/controllers/descheduler/simulation.py), on
hand-computed cases: its cycles every 120 s, its evictions through the eviction API (a PDB
without room refuses) and the pods' owners, and the policy suffix.

Two always-on 4-core nodes, linear 100–200 W: `a` runs one small pod (0.5 core requested,
12.5 % < 20 %), `b` runs 2 cores of pods (50 %): at t = 120 s the descheduler evicts `a`'s pod
and MostAllocated places the replacement on `b`."""

from __future__ import annotations

import random

import pytest

from common.curves import PowerCurve
from rl.evaluation.benchmark import ClusterModel, run_once
from rl.policies.catalog import make_policy
from rl.simulation.controllers.descheduler.simulation import (
    DeschedulerModel,
    HighNodeUtilizationController,
)
from rl.simulation.controllers.suffixes import ControlledPolicy, split_controllers
from rl.simulation.engine.simulator import Simulation
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import NodeSpec, PdbSpec, PodSpec

LINEAR = PowerCurve.linear(100.0, 200.0)
NODES = [NodeSpec("a", "g", 4, 8, LINEAR), NodeSpec("b", "g", 4, 8, LINEAR, ordinal=1)]


def pod(index: int, duration: float, request: float, owner: str | None,
        workload: str | None = None, safe: bool | None = None) -> PodSpec:
    return PodSpec(index, 0.0, duration, request, 0.5, request, owner_kind=owner,
                   workload=workload, safe_to_evict=safe)


def run(small: PodSpec, pdbs: tuple[PdbSpec, ...] = ()) -> tuple[Simulation, HighNodeUtilizationController]:
    """`small` lands on `a` (placed first, on an empty cluster MostAllocated ties: pin it by
    giving `b` its big pods afterwards), the big pods on `b`."""
    big = [pod(i, 3600.0, 1.0, "ReplicaSet", "big") for i in (1, 2)]
    sim = Simulation(NODES, [small, *big], workloads=WorkloadModel(pdbs))
    controller = HighNodeUtilizationController(DeschedulerModel())
    controller.attach(sim)
    policy = make_policy("mostallocated", NODES)
    policy.reset(sim.state.specs, random.Random(0))
    placements = iter(["a", "b", "b"])
    while (decision := sim.next_decision()) is not None:
        pinned = next(placements, None)
        sim.place(pinned or policy.choose(decision.info, decision.feasible, decision.now))
    return sim, controller


def test_a_replicaset_pod_on_an_underutilized_node_moves_and_keeps_its_lifetime() -> None:
    sim, controller = run(pod(0, 1000.0, 0.5, "ReplicaSet", "small"))
    result = sim.result()
    assert controller.evicted == 1 and result.evictions == 1 and result.restarted_pods == 0
    outcome = next(o for o in result.outcomes if o.index == 0)
    # evicted at 120 s with 880 s left; replaced on b, 10 s startup, then the rest of its life
    assert outcome.node == "b"
    assert outcome.finish_s == pytest.approx(1000.0 + 10.0)


def test_a_job_pod_starts_over_and_its_cpu_is_lost() -> None:
    sim, _ = run(pod(0, 1000.0, 0.5, "Job", "job"))
    result = sim.result()
    assert result.evictions == 1 and result.restarted_pods == 1
    assert result.lost_cpu_seconds == pytest.approx(0.5 * 120.0)
    outcome = next(o for o in result.outcomes if o.index == 0)
    assert outcome.finish_s == pytest.approx(120.0 + 10.0 + 1000.0)


def test_a_pdb_without_room_refuses_the_eviction() -> None:
    sim, controller = run(pod(0, 1000.0, 0.5, "ReplicaSet", "small"),
                          (PdbSpec("small", max_unavailable=0),))
    assert controller.evicted == 0 and sim.result().evictions == 0
    assert controller.cycles >= 8  # it kept trying every 120 s until the end


def test_a_bare_pod_is_protected() -> None:
    sim, controller = run(pod(0, 1000.0, 0.5, None))
    assert controller.cycles >= 1 and sim.result().evictions == 0


def test_cluster_autoscalers_annotation_does_not_stop_descheduler() -> None:
    """descheduler reads no `cluster-autoscaler.kubernetes.io/safe-to-evict`."""
    sim, _ = run(pod(0, 1000.0, 0.5, "ReplicaSet", "small", safe=False))
    assert sim.result().evictions == 1


def test_the_cycles_stop_with_the_run() -> None:
    sim, controller = run(pod(0, 1000.0, 0.5, "ReplicaSet", "small"))
    end = sim.result().end_s
    assert end == 3600.0  # the big pods' end; the cycle due then comes after the run is over
    assert controller.cycles == 29  # at 120, 240, …, 3480 s


def test_the_policy_suffix() -> None:
    assert split_controllers("mostallocated+highnodeutilization") == (
        "mostallocated", ("highnodeutilization",))
    assert split_controllers("default+extender:5+highnodeutilization") == (
        "default+extender:5", ("highnodeutilization",))
    assert split_controllers("default+extender:5") == ("default+extender:5", ())
    policy = make_policy("mostallocated+highnodeutilization", NODES)
    assert isinstance(policy, ControlledPolicy) and policy.name == "mostallocated+highnodeutilization"
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("nosuch+highnodeutilization", NODES)


def test_the_benchmark_runs_the_suffix() -> None:
    pods = [pod(0, 1000.0, 0.5, "ReplicaSet", "small")] + [
        PodSpec(i, 1.0, 3600.0, 1.0, 0.5, 1.0, owner_kind="ReplicaSet", workload="big")
        for i in (1, 2)
    ]
    plain = run_once(NODES, pods, "mostallocated", 0, cluster=ClusterModel())
    with_descheduler = run_once(NODES, pods, "mostallocated+highnodeutilization", 0,
                                cluster=ClusterModel())
    assert plain.evictions == 0
    # MostAllocated already packs: the small pod lands on b with the others, nothing to move
    assert with_descheduler.evictions == 0
    assert with_descheduler.energy_joules == pytest.approx(plain.energy_joules)


def test_a_pod_that_fits_nowhere_does_not_keep_the_run_alive() -> None:
    """The autoscaler stops scanning when nothing but periodic controllers is left to happen,
    and so do the controllers: the run ends with the pod never scheduled."""
    from rl.simulation.autoscaler.model import AutoscalerModel

    pods = [PodSpec(0, 0.0, 100.0, 1.0, 0.5, 1.0, owner_kind="ReplicaSet"),
            PodSpec(1, 0.0, 100.0, 64.0, 0.5, 1.0, owner_kind="ReplicaSet")]
    result = run_once(NODES, pods, "mostallocated+highnodeutilization", 0,
                      cluster=ClusterModel(autoscaler=AutoscalerModel()))
    assert result.never_scheduled == 1 and result.end_s < 10_000
