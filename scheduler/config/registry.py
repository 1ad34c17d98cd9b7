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

Any entry may set `extender: true`: the plugin then enters as kube-scheduler sees it through
the extender (0–10 rounded, × weight × 10; `scheduler.plugins.extender.ExtenderScore`).
Errors are ValueErrors naming the entry (`profile[2] (Peaks): …`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from common.curves import PowerCurve
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.scheduling_profile import SchedulingProfile, plugin_weight
from scheduler.plugins import loadvariation, peaks, trimaran
from scheduler.plugins.defaults import default_filters
from scheduler.plugins.extender import ExtenderScore
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.noderesources import (
    BALANCED,
    FIT,
    LEAST_ALLOCATED,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
)
from scheduler.plugins.tainttoleration import TaintToleration

ENERGY = "KubejouleEnergy"
ENTRY_KEYS = ("name", "weight", "args", "extender")


@dataclass(frozen=True)
class PluginContext:
    """What plugins are built from besides their args: the scheduler's energy plugin, the
    configured power curves (PEAKS fits its models to them) and, where the scheduler knows
    them, the nodes' workloads (`workload(name)` → a `NodeWorkload`: the standalone
    scheduler's cluster cache; `learned` computes its v2 features with both)."""

    energy: ScorePlugin | None = None
    curves: Mapping[str, PowerCurve] = field(default_factory=dict)
    workload: Callable[[str], Any] | None = None
    lifetimes: Callable[[], Any] | None = None  # the lifetime predictor (feature schema v3)


def _no_args(name: str, plugin: Callable[[], ScorePlugin]) -> Callable[..., ScorePlugin]:
    def build(args: Mapping[str, Any], context: PluginContext) -> ScorePlugin:
        if args:
            raise ValueError(f"{name} takes no args, got {sorted(args)}")
        return plugin()

    return build


def _energy(args: Mapping[str, Any], context: PluginContext) -> ScorePlugin:
    """The scheduler's energy plugin; args set its v3 levers (scheduler/plugins/energy/levers.py),
    those left out on; no args: the plugin as the `scorer:` section configures it."""
    if context.energy is None:
        raise ValueError(f"{ENERGY}: no energy plugin available here")
    if args:
        from scheduler.plugins.energy import EnergyPlugin
        from scheduler.plugins.energy.levers import levers_from_args

        levers = levers_from_args(args)
        if not isinstance(context.energy, EnergyPlugin):
            raise ValueError(f"{ENERGY}: args need kubejoule's energy plugin")
        context.energy.levers = levers
    return context.energy


def _fit(args: Mapping[str, Any], context: PluginContext) -> ScorePlugin:
    """NodeResourcesFitArgs.scoringStrategy, as kube-scheduler's configuration writes it."""
    unknown = sorted(set(args) - {"scoringStrategy"})
    if unknown:
        raise ValueError(f"unknown args {unknown}; known: ['scoringStrategy']")
    strategy = args.get("scoringStrategy") or {}
    if not isinstance(strategy, Mapping) or set(strategy) - {"type", "resources"}:
        raise ValueError(f"scoringStrategy must be {{type, resources}}, got {strategy!r}")
    resources = strategy.get("resources")
    weights: dict[str, int] = {"cpu": 1, "memory": 1}
    if resources is not None:
        if not isinstance(resources, list) or not all(
            isinstance(r, Mapping) and set(r) <= {"name", "weight"} and "name" in r
            for r in resources
        ):
            raise ValueError(
                f"scoringStrategy.resources must be a list of {{name, weight}}, got {resources!r}"
            )
        weights = {str(r["name"]): r.get("weight", 1) for r in resources}
    return NodeResourcesFit(str(strategy.get("type", LEAST_ALLOCATED)), weights)


def _peaks(args: Mapping[str, Any], context: PluginContext) -> ScorePlugin:
    return peaks.Peaks(peaks.models_from_config(args, context.curves))


def _trimaran(args: Mapping[str, Any], context: PluginContext) -> ScorePlugin:
    return trimaran.TargetLoadPacking(trimaran.args_from_config(args))


def _load_variation(args: Mapping[str, Any], context: PluginContext) -> ScorePlugin:
    return loadvariation.LoadVariationRiskBalancing(loadvariation.args_from_config(args))


def _learned(args: Mapping[str, Any], context: PluginContext) -> ScorePlugin:
    """The model's features are computed as in training: with the scheduler's configured energy
    plugin (the one `KubejouleEnergy` scores with) and the cluster cache's node workloads."""
    from scheduler.learning.plugin import from_args
    from scheduler.plugins.energy import EnergyPlugin

    if not isinstance(context.energy, EnergyPlugin):
        raise ValueError("learned: needs the scheduler's energy plugin for its features")
    return from_args(args, context.energy, context.workload, context.lifetimes)


BUILDERS: dict[str, Callable[[Mapping[str, Any], PluginContext], ScorePlugin]] = {
    ENERGY: _energy,
    FIT: _fit,
    BALANCED: _no_args(BALANCED, NodeResourcesBalancedAllocation),
    "TaintToleration": _no_args("TaintToleration", TaintToleration),
    "NodeAffinity": _no_args("NodeAffinity", NodeAffinity),
    peaks.NAME: _peaks,
    trimaran.NAME: _trimaran,
    loadvariation.NAME: _load_variation,
    "learned": _learned,
}


def build_plugin(name: str, args: Mapping[str, Any], context: PluginContext) -> ScorePlugin:
    builder = BUILDERS.get(name)
    if builder is None:
        raise ValueError(f"unknown Score plugin {name!r}; known: {sorted(BUILDERS)}")
    return builder(args, context)


def score_entries(
    entries: Any, context: PluginContext, where: str = "profile"
) -> list[tuple[ScorePlugin, int]]:
    """The weighted Score plugins of configuration `entries` (module docstring)."""
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{where}: expected a non-empty list of {{name, weight, args}}, got {entries!r}")
    scores: list[tuple[ScorePlugin, int]] = []
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
        try:
            weight = plugin_weight(entry.get("weight", 1))
            plugin = build_plugin(name, args, context)
        except ValueError as exc:
            raise ValueError(f"{label}: {exc}") from exc
        scores.append((ExtenderScore(plugin) if extender else plugin, weight))
    names = [plugin.name for plugin, _ in scores]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{where}: a plugin is listed twice: {twice}")
    return scores


def profile_from_entries(
    entries: Sequence[Mapping[str, Any]], context: PluginContext, name: str = "configured"
) -> SchedulingProfile:
    """kube-scheduler's default filters and the configured Score plugins."""
    return SchedulingProfile(name, default_filters(), score_entries(list(entries), context))
