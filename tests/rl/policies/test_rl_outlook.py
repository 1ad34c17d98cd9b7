"""The energy plugin's outlook in the simulator (rl/policies/outlook_sim.py): predictions learned only
from pods that end in the simulation, never from the trace's durations; the nodes' predicted
empty time and cluster-autoscaler's unneeded timer; the `kubejoule` policy wired to it."""

from __future__ import annotations

import random

from common.curves import PowerCurve
from rl.policies.catalog import make_policy
from rl.policies.outlook_sim import SimulationOutlook
from rl.policies.profile_policy import ProfilePolicy
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.autoscaler.scan import Autoscaler, autoscaling
from rl.simulation.engine.simulator import Simulation
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from scheduler.lifetimes import LifetimePredictor
from scheduler.plugins.defaults import SHIPPED_ENERGY_WEIGHT, SHIPPED_PACKING_WEIGHT
from scheduler.plugins.energy import EnergyPlugin
from scheduler.plugins.energy.levers import SHIPPED_LEVERS
from tests.helpers.outlook import one_node

NODES = [NodeSpec("a", "g1", 8, 16, PowerCurve.linear(50.0, 150.0)),
         NodeSpec("b", "g2", 8, 16, PowerCurve.linear(50.0, 150.0), ordinal=1)]
PRIOR_JOB = LifetimePredictor().prior_seconds("Job")


def job(index: int, submit: float, duration: float) -> PodSpec:
    return PodSpec(index, submit, duration, 1.0, 1.0, 1.0, owner_kind="Job", workload="batch")


def step_to(sim: Simulation, until: float, node: str = "a") -> None:
    while sim.next_decision(until) is not None:
        sim.place(node)


def test_predictions_come_from_pods_that_ended_never_from_the_trace() -> None:
    sim = Simulation(NODES, [job(0, 0.0, 100.0), job(1, 0.0, 100.0), job(2, 500.0, 100.0)])
    outlook = SimulationOutlook(sim)
    step_to(sim, 50.0)
    probe = sim.pod_info(2)
    # Nothing has ended: the owner kind's prior, though the trace says every pod runs 100 s.
    assert outlook.pod_lifetime(probe) == PRIOR_JOB
    node = one_node(outlook, "a")
    assert node is not None and node.empty_in_s > 1_000.0  # the prior at age 50, not 50 s
    assert one_node(outlook, "b").empty_in_s == 0.0  # nothing on it
    step_to(sim, 200.0)  # both pods have ended: 100 s each, learned
    learned = outlook.pod_lifetime(probe)
    assert learned < PRIOR_JOB / 2
    assert outlook.source.version > 0


def test_unneeded_is_the_simulated_autoscalers_timer() -> None:
    sim = Simulation(NODES, [job(0, 0.0, 100.0)])
    assert not one_node(SimulationOutlook(sim), "b").unneeded  # no autoscaler: never
    scaled = Simulation(NODES, [job(0, 0.0, 100.0)], autoscaler=autoscaling(AutoscalerModel()))
    assert isinstance(scaled.autoscaler, Autoscaler)
    outlook = SimulationOutlook(scaled)
    assert not one_node(outlook, "b").unneeded
    scaled.autoscaler.scale_down.unneeded_since["b"] = 0.0
    assert one_node(outlook, "b").unneeded and not one_node(outlook, "a").unneeded
    assert one_node(outlook, "nowhere").empty_in_s is None


def test_the_kubejoule_policy_reads_the_simulations_outlook() -> None:
    policy = make_policy("kubejoule", NODES, None)
    assert isinstance(policy, ProfilePolicy)
    (energy,) = [p for p, _ in policy.profile.scores if isinstance(p, EnergyPlugin)]
    assert energy.levers == SHIPPED_LEVERS and energy.levers.lifetimes
    assert [(p.name, w) for p, w in policy.profile.scores] == [
        ("KubejouleEnergy", SHIPPED_ENERGY_WEIGHT), ("NodeResourcesFit", SHIPPED_PACKING_WEIGHT)]
    assert policy.profile.scores[1][0].strategy == "MostAllocated"
    sim = Simulation(NODES, [job(0, 0.0, 100.0)])
    policy.reset(sim.state.specs, random.Random(0))
    policy.attach(sim)
    assert isinstance(energy.outlook, SimulationOutlook) and energy.outlook.sim is sim
    # The v2 plugin (no levers) needs no outlook.
    v2 = make_policy("heuristic", NODES, None)
    v2.attach(sim)
    (plain,) = [p for p, _ in v2.profile.scores]
    assert plain.outlook is None
