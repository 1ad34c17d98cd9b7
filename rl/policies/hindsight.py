"""The `hindsight` reference: kubejoule's energy plugin told each pod's true end instead of the
lifetime predictor's guess — how much better perfect lifetime knowledge would do. Not
deployable: no scheduler knows when a pod will end. It lives in rl/ (the scheduler image never
imports it) and is reported beside the oracle bound.

`HindsightPredictor(sim)` answers the lifetime predictor's questions (`predict`,
`predict_remaining`: scheduler/lifetimes) from the simulation's truth: a trace pod placed
`age_s` seconds ago runs for its current incarnation's run plan minus that age — its startup
(a replacement's) plus the lifetime it has left (`PodLedger.run_plan_s`: an evicted Deployment
pod's replacement the rest of its lifetime, a restarted Job all of it again). That is the end at
full speed; the stretch of CPU contention is not foreseen (it depends on later placements). A
pod that is not the trace's (a DaemonSet pod) is answered by a predictor of priors. It learns
nothing: `observe_end` is refused, and its `version` never moves.

The policy `hindsight` (`hindsight@kubejoule`, `hindsight+rebalancer@kubejoule`) is the
standalone scheduler's default profile as shipped (`kubejoule`), its energy plugin's lifetime
lever on (scheduler/plugins/energy/levers.py; the others as shipped), whose outlook
(rl/policies/outlook_sim.py, the simulation's view of nodes and lifetimes) asks this predictor instead of
one that learns from the pods that end. Every other input — telemetry, the autoscaler's
unneeded nodes, the tie-breaking — is the same as `kubejoule`'s, so the difference between the
two rows is what the lifetime predictor's errors cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rl.policies.profile_policy import ProfilePolicy
from rl.policies.scheduling_profiles import energy_plugins, named_profile
from scheduler.domain.model import PodInfo
from scheduler.lifetimes import LEVEL_CONTROLLER, LifetimePredictor, Prediction

if TYPE_CHECKING:
    from rl.simulation.engine.simulator import PowerOffModel, Simulation
    from rl.simulation.traces.scenario import NodeSpec

HINDSIGHT = "hindsight"
UID_PREFIX = "sim-"  # a trace pod's uid: sim-<index> (rl/simulation/traces/trace.py, PodSpec.pod_object)


class HindsightPredictor:
    """The lifetime predictor's read API, answered from the simulation's truth (module
    docstring)."""

    version = 0  # nothing is ever learned

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim
        self._priors = LifetimePredictor()  # for pods that are not the trace's
        self.priors = self._priors.priors

    def trace_index(self, pod: PodInfo) -> int | None:
        """The trace index of `pod`, None when it is not a trace pod of this simulation."""
        uid = pod.uid or ""
        if not uid.startswith(UID_PREFIX) or not uid[len(UID_PREFIX):].isdigit():
            return None
        index = int(uid[len(UID_PREFIX):])
        return index if index < len(self._sim.pods) else None

    def predict(self, pod: PodInfo, age_s: float) -> Prediction:
        index = self.trace_index(pod)
        if index is None:
            return self._priors.predict(pod, age_s)
        age = age_s if age_s > 0.0 else 0.0  # also NaN
        remaining = self._sim.state.ledger.run_plan_s(index) - age
        return Prediction(remaining if remaining > 0.0 else 0.0, LEVEL_CONTROLLER, 1)

    def predict_remaining(self, pod: PodInfo, age_s: float) -> float:
        return self.predict(pod, age_s).remaining_s

    def observe_end(self, pod: PodInfo, lifetime_s: float, disrupted: bool = False) -> bool:
        return False  # the truth needs no learning


class HindsightPolicy(ProfilePolicy):
    """The `kubejoule` profile, its energy plugins' outlook answering from the truth."""

    def attach(self, sim: Simulation) -> None:
        from rl.policies.outlook_sim import SimulationOutlook

        outlook = SimulationOutlook(sim, HindsightPredictor(sim))
        for plugin in energy_plugins(self.profile):
            plugin.outlook = outlook


def hindsight_policy(nodes: Sequence[NodeSpec], power_off: PowerOffModel | None) -> HindsightPolicy:
    setup = named_profile("kubejoule", nodes, power_off)
    assert setup is not None  # its energy plugin prices lifetimes already (SHIPPED_LEVERS)
    return HindsightPolicy(setup.profile, HINDSIGHT, setup.percentage_of_nodes_to_score)
