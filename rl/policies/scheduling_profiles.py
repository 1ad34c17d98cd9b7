"""Scheduling profiles as simulator policies: the named ones and profile YAML files.

Named profiles (built by `scheduler.plugins.defaults`, the code the scheduler itself runs):

| policy | profile |
|---|---|
| `default` | kube-scheduler's default profile (`default_profile()`): TaintToleration 3, NodeAffinity 2, NodeResourcesFit LeastAllocated 1, NodeResourcesBalancedAllocation 1 |
| `mostallocated` | the same with NodeResourcesFit's MostAllocated strategy (bin packing) |
| `kubejoule` | the standalone scheduler's shipped profile (`shipped_kubejoule_profile()`): the energy plugin with its v3 lifetimes lever and per-pod scale × 3, NodeResourcesFit MostAllocated × 1 |
| `default+extender:W` | kube-scheduler's default profile plus the energy plugin through the extender at weight W (`extender_profile()`): its 0–10 answer × W × 10 |
| `heuristic` | the energy plugin alone, weight 1 |
| `peaks`, `trimaran` | scheduler-plugins' PEAKS (fitted to the simulated curves) or TargetLoadPacking alone |
| `profile:FILE` | a profile YAML file (below) |

Every profile runs kube-scheduler's default filters. The profiles that model kube-scheduler
(`default`, `mostallocated`, `default+extender:W`, `peaks`, `trimaran`) score its adaptive
nodes to score (percentageOfNodesToScore), as kube-scheduler does unless configured; kubejoule's own
scheduler (`kubejoule`, `heuristic`, profile files) scores every feasible node, as it ships,
unless a profile file sets `percentage_of_nodes_to_score` (the standalone configuration's key).

The energy plugin (`scheduler.plugins.energy.EnergyPlugin`) is configured as the cluster runs
it: consolidation on exactly where nodes power off (the autoscaler, or the visible power-off
ablation), at its default reference load; no `curves:` (the agents export each node's), unless
the cluster model says its configuration names them (`ClusterModel.configured_curves`, as where
nodes run no agent: the fidelity check's simulated side). ΔP_ref, the extra watts that score 0:

* `kubejoule` ranks by its v3 per-pod scale, which has no ΔP_ref (scheduler/plugins/energy/levers.py),
  and reads the simulation's outlook (rl/policies/outlook_sim.py: lifetimes learned from the pods that end
  in the run); so do profile files whose `KubejouleEnergy` entry sets the v3 levers (`args:`);
* `default+extender:W` and profile files model deployments, so they take the
  shipped configuration's 20 W (`ScorerConfig`, `scheduler/examples/extender-config.yaml`);
  through the extender that is what sets the 0–10 rounding (docs/scheduler.md, "Choosing
  ΔP_ref"), and alone it saturates: nodes that cost more than 20 W all score 0 and tie;
* `heuristic` keeps the simulator's own choice, the cluster's largest full-load power (≥ 20 W),
  so the score never saturates and ranks by ΔP itself (the difference between the two is the
  price of saturation: docs/rl.md).

A profile file is the scheduler configuration's `profile:` list — Score plugins in order, each
`{name, weight, args, extender}` (`scheduler.config.registry`, the code that reads the
standalone scheduler's configuration; the simulator has already filtered):

    - {name: TaintToleration, weight: 3}
    - {name: NodeAffinity, weight: 2}
    - {name: NodeResourcesFit, weight: 1, args: {scoringStrategy: {type: MostAllocated}}}
    - {name: NodeResourcesBalancedAllocation, weight: 1}
    - {name: KubejouleEnergy, weight: 5, extender: true}    # through the extender at weight 5

or a mapping with that list under `profile:`, optionally `percentage_of_nodes_to_score`, and the
configuration's `scorer:` section beside it
(`delta_p_ref_watts`, `consolidation`, `consolidation_utilization`), which configures
`KubejouleEnergy`: ΔP_ref defaults to the shipped 20 W and consolidation to the cluster's
(on where nodes power off). PEAKS fits its models to the simulated nodes' curves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from common.curves import PowerCurve
from rl.simulation.engine.simulator import PowerOffModel
from rl.simulation.traces.scenario import NodeSpec, scenario_path
from scheduler.config.parse import ConfigError, ScorerConfig, config_from_dict
from scheduler.config.registry import PluginContext, build_plugin, score_entries
from scheduler.framework import SchedulingProfile
from scheduler.plugins.defaults import (
    default_filters,
    default_profile,
    extender_profile,
    shipped_kubejoule_profile,
)
from scheduler.plugins.energy import EnergyPlugin
from scheduler.plugins.extender import ExtenderScore
from scheduler.plugins.noderesources import MOST_ALLOCATED
from scheduler.plugins.peaks import NAME as PEAKS
from scheduler.plugins.trimaran import NAME as TARGET_LOAD_PACKING

# The shipped configuration's ΔP_ref (scheduler/examples/extender-config.yaml, ScorerConfig).
DEPLOYED_DELTA_P_REF_WATTS = ScorerConfig().delta_p_ref_watts
EXTENDER_POLICY = "default+extender:"
PROFILE_POLICY = "profile:"
SCORER_KEYS = ("delta_p_ref_watts", "consolidation", "consolidation_utilization")
PERCENTAGE_KEY = "percentage_of_nodes_to_score"
FILE_KEYS = ("profile", "scorer", PERCENTAGE_KEY)


class ProfileFileError(ValueError):
    """A profile file that does not follow the format."""


def energy_plugins(profile: SchedulingProfile) -> list[EnergyPlugin]:
    """The energy plugins a profile scores with (also through the extender)."""
    found = []
    for plugin, _ in profile.scores:
        inner = plugin.plugin if isinstance(plugin, ExtenderScore) else plugin
        if isinstance(inner, EnergyPlugin) and inner not in found:
            found.append(inner)
    return found


def largest_full_load_watts(nodes: Sequence[NodeSpec]) -> float:
    """ΔP_ref of `heuristic` (module docstring)."""
    return max(20.0, max((n.curve.max_watts for n in nodes), default=20.0))


def energy_plugin(
    nodes: Sequence[NodeSpec],
    power_off: PowerOffModel | None,
    delta_p_ref_watts: float | None = None,
    scorer: Mapping[str, object] | None = None,
    curves: Mapping[str, PowerCurve] | None = None,
) -> EnergyPlugin:
    """The energy plugin as the simulated cluster runs it (module docstring). `scorer` is a
    configuration's `scorer:` section (a profile file's), read by the scheduler's own parser;
    what it leaves out follows the cluster. `curves`: the configuration's `curves:`."""
    section = dict(scorer or {})
    unknown = sorted(set(section) - set(SCORER_KEYS))
    if unknown:
        raise ValueError(f"scorer: unknown key(s) {unknown}; known: {list(SCORER_KEYS)}")
    section.setdefault("consolidation", power_off is not None)
    if delta_p_ref_watts is not None:
        section.setdefault("delta_p_ref_watts", delta_p_ref_watts)
    try:
        config = config_from_dict({"scorer": section}).scorer
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc
    return EnergyPlugin(
        delta_p_ref_watts=config.delta_p_ref_watts,
        consolidation=config.consolidation,
        consolidation_utilization=config.consolidation_utilization,
        curves=curves,
    )


def heuristic_energy(
    nodes: Sequence[NodeSpec], power_off: PowerOffModel | None, curves: Mapping[str, PowerCurve] | None = None
) -> EnergyPlugin:
    """The energy plugin of the `heuristic` policy, which the simulator's features (DQN
    episodes, the gym environment, the decision log) also use: ΔP_ref is the largest full-load
    power in the cluster, so the 0–100 scale does not saturate and every candidate's extra
    watts stay distinguishable; consolidation is on exactly when nodes can power off, at the
    plugin's default reference load (not tuned to any trace)."""
    return energy_plugin(nodes, power_off, largest_full_load_watts(nodes), curves=curves)


def extender_weight(name: str) -> int:
    """W of `default+extender:W` (an integer ≥ 1, as an extender's weight must be)."""
    text = name[len(EXTENDER_POLICY) :]
    try:
        weight = int(text)
    except ValueError:
        weight = 0
    if weight < 1 or str(weight) != text:
        raise ValueError(f"{name!r}: the extender weight must be a positive integer, e.g. {EXTENDER_POLICY}5")
    return weight


@dataclass(frozen=True)
class ProfileSetup:
    """A profile and how many feasible nodes its scheduler scores: kube-scheduler's
    percentageOfNodesToScore (0: its adaptive default), None for every feasible node (the
    standalone scheduler's shipped default)."""

    profile: SchedulingProfile
    percentage_of_nodes_to_score: int | None = None


# kube-scheduler scores an adaptive share of the feasible nodes (nodes to score) unless configured otherwise
# (KubeSchedulerConfiguration percentageOfNodesToScore unset: 0): the policies that model it.
KUBE_SCHEDULER_PERCENTAGE = 0


def named_profile(
    name: str,
    nodes: Sequence[NodeSpec],
    power_off: PowerOffModel | None,
    curves: Mapping[str, PowerCurve] | None = None,
) -> ProfileSetup | None:
    """The profile of a named policy (module docstring), or None if `name` is not one;
    `curves` (the configuration's `curves:`) go to its energy plugin."""
    kube = KUBE_SCHEDULER_PERCENTAGE
    if name == "default":
        return ProfileSetup(default_profile("default"), kube)
    if name == "mostallocated":
        return ProfileSetup(default_profile("mostallocated", MOST_ALLOCATED), kube)
    if name in ("peaks", "trimaran"):  # the registry's plugin with its default args
        context = PluginContext(curves={n.name: n.curve for n in nodes})
        plugin = build_plugin(PEAKS if name == "peaks" else TARGET_LOAD_PACKING, {}, context)
        return ProfileSetup(SchedulingProfile(name, default_filters(), [(plugin, 1)]), kube)
    if name.startswith(EXTENDER_POLICY):
        plugin = energy_plugin(nodes, power_off, DEPLOYED_DELTA_P_REF_WATTS, curves=curves)
        return ProfileSetup(extender_profile(plugin, extender_weight(name), name), kube)
    if name == "kubejoule":
        return ProfileSetup(
            shipped_kubejoule_profile(energy_plugin(nodes, power_off, DEPLOYED_DELTA_P_REF_WATTS, curves=curves))
        )
    if name == "heuristic":
        energy = heuristic_energy(nodes, power_off, curves)
        return ProfileSetup(SchedulingProfile("heuristic", default_filters(), [(energy, 1)]))
    if name.startswith(PROFILE_POLICY):
        return load_profile_file(name[len(PROFILE_POLICY) :], nodes, power_off, name, curves)
    return None


# --- profile files -----------------------------------------------------------------------------


def profile_from_data(
    data: object,
    nodes: Sequence[NodeSpec],
    power_off: PowerOffModel | None,
    name: str = "profile",
    curves: Mapping[str, PowerCurve] | None = None,
) -> ProfileSetup:
    """A profile from a parsed profile file (module docstring). ProfileFileError on bad input."""
    scorer: Mapping[str, object] | None = None
    percentage: object = None
    entries = data
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - set(FILE_KEYS))
        if unknown:
            raise ProfileFileError(f"unknown key(s) {unknown}; known: {', '.join(FILE_KEYS)}")
        entries, scorer = data.get("profile"), data.get("scorer")
        percentage = data.get(PERCENTAGE_KEY)
        if scorer is not None and not isinstance(scorer, Mapping):
            raise ProfileFileError("scorer: expected a mapping")
    try:
        energy = energy_plugin(nodes, power_off, DEPLOYED_DELTA_P_REF_WATTS, scorer, curves)
        context = PluginContext(energy, {n.name: n.curve for n in nodes})
        profile = SchedulingProfile(name, default_filters(), score_entries(entries, context))
        config = config_from_dict({PERCENTAGE_KEY: percentage})
    except (ValueError, ConfigError) as exc:
        raise ProfileFileError(str(exc)) from exc
    return ProfileSetup(profile, config.percentage_of_nodes_to_score)


def profile_file_path(path: str) -> Path:
    """The file `profile:PATH` names: PATH, or a bare name bundled in rl/scenarios/."""
    if not path:
        raise ProfileFileError(f"give a file: {PROFILE_POLICY}FILE")
    file = Path(path)
    if not file.exists() and file.name == path and scenario_path(path).exists():
        file = scenario_path(path)
    return file


def load_profile_file(
    path: str,
    nodes: Sequence[NodeSpec],
    power_off: PowerOffModel | None,
    name: str | None = None,
    curves: Mapping[str, PowerCurve] | None = None,
) -> ProfileSetup:
    file = profile_file_path(path)
    try:
        data = yaml.safe_load(file.read_text())
    except OSError as exc:
        raise ProfileFileError(f"cannot read profile file {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ProfileFileError(f"{path} is not valid YAML: {exc}") from exc
    try:
        return profile_from_data(data, nodes, power_off, name or f"{PROFILE_POLICY}{path}", curves)
    except ProfileFileError as exc:
        raise ProfileFileError(f"{path}: {exc}") from exc
