"""The energy rebalancer in the simulator (rl/simulation/controllers/rebalancer.py): the decision's moves carried
out through the eviction API and the pods' owners, and doubt that stops it.

Two always-on nodes: `old` (4 cores, linear 100–200 W) runs one 1-core pod, `new` (8 cores,
50–150 W) four; every pod lives 3600 s. The predictor here is a stand-in that knows each pod's
remaining lifetime (scheduler/lifetimes' predictor with its answer replaced), except where the
test is that the real one learns from the pods that end."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from common.curves import PowerCurve
from rl.simulation.controllers.rebalancer import RebalancerController
from rl.simulation.engine.simulator import Simulation
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import NodeSpec, PdbSpec, PodSpec
from scheduler.config.rebalancer import RebalancerConfig
from scheduler.domain.model import NodeState, PodInfo
from scheduler.lifetimes import LEVEL_CONTROLLER, LEVEL_PRIOR, LifetimePredictor, Prediction

NODES = [NodeSpec("old", "g1", 4, 16, PowerCurve.linear(100.0, 200.0)),
         NodeSpec("new", "g2", 8, 16, PowerCurve.linear(50.0, 150.0), ordinal=1)]
LIFE = 3600.0


class Known(LifetimePredictor):
    """Remaining lifetime from the pods' known 3600 s, at the controller level (or at the
    prior's, a fallback; or a NaN, no usable answer)."""

    def __init__(self, fallback: bool = False, none: bool = False) -> None:
        super().__init__()
        self.at_prior, self.none = fallback, none

    def predict(self, pod: PodInfo, age_s: float) -> Prediction:
        seconds = float("nan") if self.none else LIFE - age_s
        return Prediction(seconds, LEVEL_PRIOR if self.at_prior else LEVEL_CONTROLLER, 10)


class Pinned:
    """Pod 0 on `old` the first time, every other placement on `new` when it fits."""

    name = "pinned"

    def __init__(self) -> None:
        self.first = True

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        pass

    def choose(self, pod: PodInfo, feasible: Sequence[NodeState], now: float, *args: object) -> str:
        names = [s.info.name for s in feasible]
        if pod.name == "pod-0" and self.first:
            self.first = False
            return "old"
        return "new" if "new" in names else names[0]


def run(owner: str = "ReplicaSet", predictor: Known | None = None, pdbs: tuple[PdbSpec, ...] = (),
        missing: frozenset[str] = frozenset(), mode: str = "active",
        annotations: bool = False) -> tuple[Simulation, RebalancerController]:
    pods = [PodSpec(0, 0.0, LIFE, 1.0, 1.0, 1.0, owner_kind=owner, workload="w0",
                    safe_to_evict=False if annotations else None)]
    pods += [PodSpec(i, 0.0, LIFE, 1.0, 1.0, 1.0, owner_kind="ReplicaSet", workload="w")
             for i in range(1, 5)]
    sim = Simulation(NODES, pods, workloads=WorkloadModel(pdbs), missing_telemetry=missing)
    config = RebalancerConfig(mode=mode, scale_down_utilization_threshold=None)
    controller = RebalancerController(predictor or Known(), config)
    controller.attach(sim)
    policy = Pinned()
    while (decision := sim.next_decision()) is not None:
        sim.place(policy.choose(decision.info, decision.feasible, decision.now))
    return sim, controller


def test_the_pod_moves_once_and_keeps_its_lifetime() -> None:
    sim, controller = run()
    result = sim.result()
    assert controller.moves == 1 and controller.evicted == 1 and result.evictions == 1
    outcome = next(o for o in result.outcomes if o.index == 0)
    assert outcome.node == "new"
    assert outcome.finish_s == pytest.approx(LIFE + 10.0)  # evicted at 60 s, 10 s to start


def test_a_job_pod_is_moved_only_if_its_lost_work_is_worth_it() -> None:
    sim, controller = run(owner="Job")
    result = sim.result()
    # at 60 s its lost minute costs far less than an hour of the old node: it moves, restarts
    assert controller.evicted == 1 and result.restarted_pods == 1
    assert result.lost_cpu_seconds == pytest.approx(60.0)


@pytest.mark.parametrize(
    "kwargs,reason",
    [
        ({"predictor": Known(fallback=True)}, "prediction_fallback"),
        ({"predictor": Known(none=True)}, "prediction"),
        ({"missing": frozenset({"old"})}, "telemetry"),
        ({"pdbs": (PdbSpec("w0", max_unavailable=0),)}, "pdb"),
        ({"annotations": True}, "not_safe_to_evict"),
        ({"owner": None}, "bare"),
    ],
)
def test_in_doubt_or_protected_it_never_evicts(kwargs: dict[str, object], reason: str) -> None:
    sim, controller = run(**kwargs)  # type: ignore[arg-type]
    assert sim.result().evictions == 0 and controller.evicted == 0
    assert controller.skipped.get(reason, 0) >= 1


def test_a_destination_without_telemetry_takes_nothing() -> None:
    sim, controller = run(missing=frozenset({"new"}))
    assert sim.result().evictions == 0 and controller.skipped.get("no_room", 0) >= 1


def test_shadow_mode_decides_and_evicts_nothing() -> None:
    sim, controller = run(mode="shadow")
    assert sim.result().evictions == 0 and controller.moves == 0
    assert controller.rounds > 0


def test_the_runs_settings_come_from_the_simulation() -> None:
    from rl.simulation.autoscaler.model import AutoscalerModel
    from rl.simulation.autoscaler.scan import autoscaling

    sim = Simulation(NODES, [PodSpec(0, 0.0, 10.0, 1.0, 1.0, 1.0, owner_kind="ReplicaSet")],
                     autoscaler=autoscaling(AutoscalerModel(scale_down_unneeded_s=300.0)),
                     workloads=WorkloadModel(pod_startup_s=5.0))
    controller = RebalancerController(Known())
    controller.attach(sim)
    assert controller.config.scale_down_unneeded_seconds == 300.0
    assert controller.config.scale_down_utilization_threshold == 0.5
    assert controller.config.pod_startup_seconds == 5.0
    assert replace(controller.config).active


def test_its_predictor_learns_the_pods_that_end_in_the_simulation() -> None:
    """The default controller owns scheduler/lifetimes' predictor and tells it, each round,
    every pod that finished since the last one (never the trace's durations)."""
    pods = [PodSpec(i, 0.0, 100.0 + 50 * i, 1.0, 1.0, 1.0, owner_kind="ReplicaSet", workload="w")
            for i in range(4)] + [PodSpec(4, 0.0, 1000.0, 1.0, 1.0, 1.0, owner_kind="Job")]
    sim = Simulation(NODES, pods)
    controller = RebalancerController()
    controller.attach(sim)
    while (decision := sim.next_decision()) is not None:
        sim.place(decision.feasible[0].info.name)
    # rounds at 60, 120, …, 960 s: the four service pods (ended by 250 s) were learned
    assert controller.predictor.observed == 4
    assert controller.rounds == 16


def test_the_policy_suffix_with_a_settings_file(tmp_path: object) -> None:
    from pathlib import Path

    from rl.policies.catalog import make_policy
    from rl.simulation.controllers.suffixes import (
        ControlledPolicy,
        make_controller,
        split_controllers,
    )

    path = Path(str(tmp_path)) / "scheduler.yaml"
    path.write_text("rebalancer: {margin: 3, interval_seconds: 120}\n")
    name = f"kubejoule+rebalancer:{path}"
    assert split_controllers(name) == ("kubejoule", (f"rebalancer:{path}",))
    assert isinstance(make_policy(name, NODES), ControlledPolicy)
    controller = make_controller(f"rebalancer:{path}")
    assert controller.config.margin == 3 and controller.config.interval_seconds == 120
    assert controller.config.active  # the simulator acts unless the file says shadow
    path.write_text("rebalancer: {margin: -3}\n")
    with pytest.raises(ValueError, match="rebalancer.margin"):
        make_policy(name, NODES)
    with pytest.raises(ValueError, match="no such file|No such file"):
        make_policy("kubejoule+rebalancer:/nonexistent.yaml", NODES)
    with pytest.raises(ValueError, match="takes no argument"):
        make_policy("kubejoule+highnodeutilization:x", NODES)


def test_a_forked_simulation_gets_its_own_rebalancer() -> None:
    """Simulation.fork copies the run with its controllers: the copy's rebalancer learns and
    acts apart from the original's, and both runs end alike."""
    pods = [PodSpec(i, 0.0, 100.0 + 50 * i, 1.0, 1.0, 1.0, owner_kind="ReplicaSet", workload="w")
            for i in range(4)] + [PodSpec(4, 0.0, 1000.0, 1.0, 1.0, 1.0, owner_kind="Job")]
    sim = Simulation(NODES, pods)
    controller = RebalancerController()
    controller.attach(sim)
    while (decision := sim.next_decision(until=300.0)) is not None:
        sim.place(decision.feasible[0].info.name)
    fork = sim.fork()
    for run in (sim, fork):
        while (decision := run.next_decision()) is not None:
            run.place(decision.feasible[0].info.name)
    assert fork.result().energy_joules == pytest.approx(sim.result().energy_joules)
    assert controller.predictor.observed == 4  # the original's learned its own four, once
