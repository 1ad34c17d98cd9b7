"""Placement policies for the simulator, built on the scheduler's own scoring code.

| name | what it is |
|---|---|
| `default` | kube-scheduler's default profile (`scheduler.plugins.defaults.default_profile`): TaintToleration 3, NodeAffinity 2, NodeResourcesFit LeastAllocated 1, BalancedAllocation 1 |
| `mostallocated` | the same with NodeResourcesFit's MostAllocated strategy (bin packing) |
| `kubejoule` | the standalone scheduler's shipped profile (`shipped_kubejoule_profile`: the energy plugin's v3 levers, MostAllocated beside it) |
| `default+extender:W` | kube-scheduler's default profile plus kubejoule's energy plugin through the extender at weight W (`extender_profile`; the 0–10 answer × W × 10) |
| `profile:FILE` | a profile YAML file: a list of `{name, weight, args}` (`rl.policies.scheduling_profiles`) |
| `roundrobin` | the next feasible node after the last one used, in node order (the old DQN project's baseline) |
| `peaks` | a profile of the PEAKS Score plugin alone (`scheduler.plugins.peaks`, with its NormalizeScore), each node's (k0, k1, k2) fitted to its curve |
| `trimaran` | a profile of the TargetLoadPacking Score plugin alone (`scheduler.plugins.trimaran`), target 40 % |
| `heuristic` | a profile of kubejoule's energy plugin alone (`scheduler.plugins.energy`) |
| `learned:PATH` | the `learned` Score plugin (`scheduler.learning.plugin`) serving a model (`.npz`, or a `.pt` with its `.npz` beside it), feature schema v2 with the simulator's node workloads |
| `hindsight` | NOT DEPLOYABLE, a reference: `kubejoule` told each pod's true end instead of the lifetime predictor's guess (`rl.policies.hindsight`) |
| `py:MODULE:ATTR` | any Score plugin (a model's, say): ATTR is a ScorePlugin or a callable returning one, called with the node list |
| `POLICY+highnodeutilization`, `POLICY+rebalancer` | POLICY with a controller beside it: descheduler's HighNodeUtilization, kubejoule's energy rebalancer (`rl.simulation.controllers.suffixes`) |

How the energy plugin is configured for each: `rl.policies.scheduling_profiles`. Every profile decides through the
standalone scheduler's own `ProfileDecider` (`scheduler/decisions/placement.py`, active mode;
`rl.policies.profile_policy.ProfilePolicy`): the profile's filters, kube-scheduler's nodes to score (percentageOfNodesToScore) for the policies that model
kube-scheduler (adaptive, its default; every feasible node for kubejoule's own scheduler, as it
ships), the highest weighted total, ties uniformly at random among the best with
kube-scheduler's reservoir sampling (`scheduler.framework.select_best`) on the run's seeded RNG
— which also breaks the ties of kube-scheduler's default profile, scored beside it for
comparison as the standalone scheduler does. Plugin policies (`learned:`, `py:`) pick the
highest score of their Score plugin over the feasible nodes with the same tie-breaking.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from common.curves import PowerCurve
from rl.policies.hindsight import hindsight_policy
from rl.policies.profile_policy import ProfilePolicy
from rl.policies.scheduling_profiles import (
    EXTENDER_POLICY,
    PROFILE_POLICY,
    heuristic_energy,
    named_profile,
)
from rl.simulation.controllers.suffixes import ControlledPolicy, split_controllers
from rl.simulation.engine.simulator import Policy, PowerOffModel, Simulation
from rl.simulation.traces.scenario import NodeSpec
from scheduler.domain.model import NodeState, NodeWorkload, PodInfo
from scheduler.framework import CandidateBatch, ScorePlugin, select_best
from scheduler.learning.features_v2 import FEATURE_SCHEMA_V2
from scheduler.learning.plugin import LearnedPlugin
from scheduler.lifetimes import LifetimePredictor

if TYPE_CHECKING:
    from rl.policies.sim_features import SimLifetimes

BUILTIN_POLICIES = (
    "default", "roundrobin", "mostallocated", "peaks", "trimaran", "heuristic", "kubejoule",
)


class RoundRobinPolicy:
    """The first feasible node at or after the one following the last choice, in node order."""

    name = "roundrobin"

    def __init__(self) -> None:
        self._order: dict[str, int] = {}
        self._next = 0

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self._order = {n.name: i for i, n in enumerate(nodes)}
        self._next = 0

    def choose(
        self,
        pod: PodInfo,
        feasible: Sequence[NodeState],
        now: float,
        candidates: Sequence[NodeState] = (),
    ) -> str:
        count = len(self._order)
        ranked = sorted(feasible, key=lambda s: (self._order[s.info.name] - self._next) % count)
        chosen = ranked[0].info.name
        self._next = (self._order[chosen] + 1) % count
        return chosen


class PluginPolicy:
    """Any Score plugin as a policy: its best score over the feasible nodes wins, ties broken
    at random like kube-scheduler."""

    def __init__(self, plugin: ScorePlugin, name: str | None = None) -> None:
        self.plugin = plugin
        self.name = name or plugin.name
        self._rng = random.Random(0)

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self._rng = rng

    def choose(
        self,
        pod: PodInfo,
        feasible: Sequence[NodeState],
        now: float,
        candidates: Sequence[NodeState] = (),
    ) -> str:
        batch = CandidateBatch.of(feasible, now)
        return batch.names[select_best(self.plugin.score(pod, batch), self._rng)]


class LearnedPolicy(PluginPolicy):
    """The `learned` plugin as a policy; `attach(sim)` gives it the simulator's node
    workloads and, for a v3 model, its autoscaler marks and a lifetime predictor learning from
    the run's finished pods (`rl.policies.sim_features`)."""

    def __init__(self, path: str, nodes: Sequence[NodeSpec], power_off: PowerOffModel | None):
        self._sim: Simulation | None = None
        self._lifetimes: SimLifetimes[LifetimePredictor] | None = None
        plugin = LearnedPlugin(
            path,
            heuristic_energy(nodes, power_off),
            workloads=self._workloads,
            lifetimes=self._predictor,
        )
        self._v2 = plugin.model.schema.version == FEATURE_SCHEMA_V2.version
        super().__init__(plugin, f"learned:{path}")

    def attach(self, sim: Simulation) -> None:
        from rl.policies.sim_features import sim_lifetimes

        self._sim = sim
        self._lifetimes = sim_lifetimes(sim)

    def _workloads(self) -> dict[str, NodeWorkload] | None:
        if self._sim is None or self._lifetimes is None:
            return None
        if self._v2:
            return self._sim.view.workloads()  # bit for bit what v2 models were trained on
        return self._lifetimes.workloads()

    def _predictor(self) -> LifetimePredictor | None:
        return self._lifetimes.predictor if self._lifetimes is not None else None


def _load_plugin(spec: str, nodes: Sequence[NodeSpec]) -> ScorePlugin:
    parts = spec.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise ValueError(f"model policy must be py:MODULE:ATTR, got {spec!r}")
    _, module_name, attr = parts
    target: Any = getattr(importlib.import_module(module_name), attr)
    plugin = target if isinstance(target, ScorePlugin) and not isinstance(target, type) else target(list(nodes))
    if not isinstance(plugin, ScorePlugin):
        raise ValueError(f"{spec} did not give a Score plugin (name, score(pod, batch))")
    return plugin


def make_policy(
    name: str,
    nodes: Sequence[NodeSpec],
    power_off: PowerOffModel | None = None,
    curves: Mapping[str, PowerCurve] | None = None,
) -> Policy:
    """A fresh policy by name (see the module docstring); `POLICY+CONTROLLER` adds controllers
    (rl/simulation/controllers/suffixes.py). `curves`: the nodes' curves named in the configuration of
    the named profiles' energy plugin (`rl.policies.scheduling_profiles.energy_plugin`)."""
    base, controllers = split_controllers(name)
    if controllers:
        return ControlledPolicy(make_policy(base, nodes, power_off, curves), controllers, name)
    setup = named_profile(name, nodes, power_off, curves)
    if setup is not None:
        return ProfilePolicy(setup.profile, name, setup.percentage_of_nodes_to_score)
    if name == "roundrobin":
        return RoundRobinPolicy()
    if name == "hindsight":  # a reference, not deployable: rl/policies/hindsight.py
        return hindsight_policy(nodes, power_off)
    if name.startswith("learned:"):
        return LearnedPolicy(name[len("learned:") :], nodes, power_off)
    if name.startswith("py:"):
        return PluginPolicy(_load_plugin(name, nodes), name)
    raise ValueError(
        f"unknown policy {name!r}; known: {', '.join(BUILTIN_POLICIES)}, {EXTENDER_POLICY}W, "
        f"{PROFILE_POLICY}FILE, learned:PATH, py:MODULE:ATTR, hindsight (a reference)"
    )
