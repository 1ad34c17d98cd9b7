"""Score plugins by name (`scheduler/plugins/`, and the `learned` plugin of `scheduler/learning/`), and
profiles from configuration entries.

A profile's Score plugins are configured as a list of entries, each
`{name: PLUGIN, weight: W, args: {...}}` (weight optional, default 1; 0 means 1 as in
kube-scheduler; args optional, with the original plugin's argument keys). Filters are always
kube-scheduler's defaults (`scheduler.plugins.defaults.default_filters()`).

| name | args |
|---|---|
| `KubejouleEnergy` | the v3 levers `lifetimes`, `protectRemoval`, `efficiency` (true/false), `scale` (`pod`/`fixed`), `scaleDownUtilizationThreshold` (`scheduler/plugins/energy/levers.py`; any arg given: the others default on / `pod` / 0.5); no args: the plugin as the `scorer:` section configures it |
| `NodeResourcesFit` | `scoringStrategy: {type: LeastAllocated\\|MostAllocated, resources: [{name: cpu, weight: 1}, …]}` |
| `NodeResourcesBalancedAllocation`, `TaintToleration`, `NodeAffinity` | none |
| `Peaks` | `nodePowerModel: {NODE: {k0, k1, k2}}` (else fitted to each node's configured curve) |
| `TargetLoadPacking` | `targetUtilization`, `defaultRequests`, `defaultRequestsMultiplier` |
| `LoadVariationRiskBalancing` | `safeVarianceMargin`, `safeVarianceSensitivity` |
| `learned` | `model: PATH` (a `.npz` model) |

Each plugin has a frozen `Args` dataclass beside it (`TargetLoadPackingArgs`, `PeaksArgs`,
`NodeResourcesFitArgs`, `EnergyArgs`, …: defaults, and validation in `__post_init__`) that
`Args.from_config(mapping)` reads from the entry's `args`; `REGISTRY` maps each name to its
factory with that type, for the standalone scheduler's `profile:`, the configuration check and the
simulator's profiles alike. Building a plugin never changes another: `KubejouleEnergy` with args
is a new energy plugin set up as the given one, with its levers from construction.

An entry may set `extender: true`: the plugin then enters as kube-scheduler sees it through
the extender (0–10 rounded, × weight × 10; `scheduler.plugins.extender.ExtenderScore`).
Errors are ValueErrors naming the entry (`profile[2] (Peaks): …`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Protocol, TypeVar

from common.curves import PowerCurve
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.scheduling_profile import SchedulingProfile, plugin_weight
from scheduler.learning.plugin import NAME as LEARNED
from scheduler.learning.plugin import LearnedArgs, LearnedPlugin, LifetimesLookup, WorkloadLookup
from scheduler.plugins import loadvariation, peaks, trimaran
from scheduler.plugins.defaults import default_filters
from scheduler.plugins.energy import EnergyPlugin
from scheduler.plugins.energy.levers import EnergyArgs
from scheduler.plugins.extender import ExtenderScore
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.noderesources import (
    BALANCED,
    FIT,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    NodeResourcesFitArgs,
)
from scheduler.plugins.tainttoleration import TaintToleration

ENERGY = "KubejouleEnergy"

A = TypeVar("A")
A_co = TypeVar("A_co", covariant=True)
ENTRY_KEYS = ("name", "weight", "args", "extender")


@dataclass(frozen=True)
class PluginContext:
    """What plugins are built from besides their args: the scheduler's energy plugin, the
    configured power curves (PEAKS fits its models to them) and, where the scheduler knows
    them, the nodes' workloads (`workload(name)` → a `NodeWorkload`: the standalone
    scheduler's cluster cache; `learned` computes its v2 features with both)."""

    energy: ScorePlugin | None = None
    curves: Mapping[str, PowerCurve] = field(default_factory=dict)
    workload: WorkloadLookup | None = None
    lifetimes: LifetimesLookup | None = None  # the lifetime predictor (feature schema v3)


class ArgsType(Protocol[A_co]):
    """A plugin's frozen `Args` dataclass: `from_config(mapping)` reads a profile entry's `args`
    (its defaults for what they leave out, ValueError for a bad key or value)."""

    def from_config(self, config: Mapping[str, object]) -> A_co: ...


@dataclass(frozen=True)
class Registration:
    """How a named Score plugin is built: `build(args, context)` from the entry's `args`
    mapping; `takes_args` False: it takes none."""

    build: Callable[[Mapping[str, object], PluginContext], ScorePlugin]
    takes_args: bool = True


def _with_args(args: ArgsType[A], factory: Callable[[A, PluginContext], ScorePlugin]) -> Registration:
    """A plugin built by `factory` from its `Args` (`args`, the type whose `from_config` reads
    the entry's args)."""
    return Registration(lambda config, context: factory(args.from_config(config), context))


def _no_args(factory: Callable[[PluginContext], ScorePlugin]) -> Registration:
    return Registration(lambda _config, context: factory(context), takes_args=False)


def _energy(args: EnergyArgs, context: PluginContext) -> ScorePlugin:
    """The scheduler's energy plugin; with levers in its args (scheduler/plugins/energy/levers.py),
    a new plugin set up as that one but for its levers (`EnergyPlugin.with_levers`: the given
    plugin stays as it is); no args: the plugin as the `scorer:` section configures it."""
    if context.energy is None:
        raise ValueError(f"{ENERGY}: no energy plugin available here")
    if args.levers is None:
        return context.energy
    if not isinstance(context.energy, EnergyPlugin):
        raise ValueError(f"{ENERGY}: args need kubejoule's energy plugin")
    return context.energy.with_levers(args.levers)


def _learned(args: LearnedArgs, context: PluginContext) -> ScorePlugin:
    """The model's features are computed as in training: with the profile's energy plugin (the
    one `KubejouleEnergy` scores with, `score_entries`) and the cluster cache's node workloads."""
    if not isinstance(context.energy, EnergyPlugin):
        raise ValueError("learned: needs the scheduler's energy plugin for its features")
    return LearnedPlugin(args.model, context.energy, context.workload, lifetimes=context.lifetimes)


# Every Score plugin a profile may name: name → (factory, Args type).
REGISTRY: Mapping[str, Registration] = MappingProxyType({
    ENERGY: _with_args(EnergyArgs, _energy),
    FIT: _with_args(NodeResourcesFitArgs, lambda a, _: NodeResourcesFit(a.strategy, a.resources)),
    BALANCED: _no_args(lambda _: NodeResourcesBalancedAllocation()),
    "TaintToleration": _no_args(lambda _: TaintToleration()),
    "NodeAffinity": _no_args(lambda _: NodeAffinity()),
    peaks.NAME: _with_args(peaks.PeaksArgs, lambda a, c: peaks.Peaks(peaks.power_models(a, c.curves))),
    trimaran.NAME: _with_args(trimaran.TargetLoadPackingArgs, lambda a, _: trimaran.TargetLoadPacking(a)),
    loadvariation.NAME: _with_args(
        loadvariation.LoadVariationArgs, lambda a, _: loadvariation.LoadVariationRiskBalancing(a)
    ),
    LEARNED: _with_args(LearnedArgs, _learned),
})


def build_plugin(name: str, args: Mapping[str, object], context: PluginContext) -> ScorePlugin:
    """The plugin `name` with the entry's `args` (its `Args.from_config`)."""
    registration = REGISTRY.get(name)
    if registration is None:
        raise ValueError(f"unknown Score plugin {name!r}; known: {sorted(REGISTRY)}")
    if not registration.takes_args and args:
        raise ValueError(f"{name} takes no args, got {sorted(args)}")
    return registration.build(args, context)


def _built(label: str, name: str, args: Mapping[str, object], weight: object, context: PluginContext) -> ScorePlugin:
    try:
        plugin_weight(weight)
        return build_plugin(name, args, context)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from exc


def score_entries(
    entries: object, context: PluginContext, where: str = "profile"
) -> list[tuple[ScorePlugin, int]]:
    """The weighted Score plugins of configuration `entries` (module docstring). `learned` is
    built last, with the energy plugin the profile's `KubejouleEnergy` entry built (its features
    are computed with the plugin the profile scores with)."""
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{where}: expected a non-empty list of {{name, weight, args}}, got {entries!r}")
    built: list[tuple[ScorePlugin, int] | None] = []
    deferred: list[tuple[int, str, str, Mapping[str, object], bool, object]] = []
    for i, entry in enumerate(entries):
        label = f"{where}[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{label}: expected {{name, weight, args}}, got {entry!r}")
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown:
            raise ValueError(f"{label}: unknown key(s) {unknown}; known: {list(ENTRY_KEYS)}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{label}: 'name' must be a plugin name, got {name!r}")
        label = f"{label} ({name})"
        args = entry.get("args") or {}
        if not isinstance(args, Mapping):
            raise ValueError(f"{label}: 'args' must be a mapping, got {args!r}")
        extender = entry.get("extender", False)
        if not isinstance(extender, bool):
            raise ValueError(f"{label}: 'extender' must be true or false, got {extender!r}")
        if name == LEARNED:
            deferred.append((len(built), label, name, args, extender, entry.get("weight", 1)))
            built.append(None)
            continue
        plugin = _built(label, name, args, entry.get("weight", 1), context)
        if name == ENERGY:
            context = replace(context, energy=plugin)
        built.append((ExtenderScore(plugin) if extender else plugin, plugin_weight(entry.get("weight", 1))))
    for index, label, name, args, extender, weight in deferred:
        plugin = _built(label, name, args, weight, context)
        built[index] = (ExtenderScore(plugin) if extender else plugin, plugin_weight(weight))
    scores = [score for score in built if score is not None]
    names = [plugin.name for plugin, _ in scores]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{where}: a plugin is listed twice: {twice}")
    return scores


def profile_from_entries(
    entries: Sequence[Mapping[str, object]], context: PluginContext, name: str = "configured"
) -> SchedulingProfile:
    """kube-scheduler's default filters and the configured Score plugins."""
    return SchedulingProfile(name, default_filters(), score_entries(list(entries), context))
