"""kubejoule's energy Score plugin (`KubejouleEnergy`), one module per concern: the plugin and its
batch kernel (`plugin`), its v3 levers and the cluster outlook they read (`levers`), what it knows
of each node's power curve (`curves`), the online fit of a node's (u, P) history (`history`) and
its consolidation prices (`price`, also the autoscaler expander's).

Its modules import each other in that order, downwards: plugin → levers | curves → price |
history. The folder may import domain/, framework/ and lifetimes/ (as plugins/ may), never
another plugin's module nor learning/, config/ or the ways the scheduler runs.

The plugin's public names are re-exported here: `from scheduler.plugins.energy import
EnergyPlugin`."""

from scheduler.plugins.energy.plugin import (
    CURVE_FROM_CONFIG,
    CURVE_FROM_FIT,
    CURVE_FROM_TELEMETRY,
    DEFAULT_CONSOLIDATION_UTILIZATION,
    MAX_PREPARED_NODES,
    NAME,
    NEUTRAL_SCORE,
    REASON_MISSING,
    REASON_NO_CURVE,
    REASON_OK,
    REASON_STALE,
    REASONS,
    EnergyPlugin,
    EnergyScores,
    LinearFit,
    NodeHistory,
    request_cores,
)

__all__ = [
    "CURVE_FROM_CONFIG", "CURVE_FROM_FIT", "CURVE_FROM_TELEMETRY", "DEFAULT_CONSOLIDATION_UTILIZATION",
    "MAX_PREPARED_NODES", "NAME", "NEUTRAL_SCORE", "REASONS", "REASON_MISSING", "REASON_NO_CURVE",
    "REASON_OK", "REASON_STALE", "EnergyPlugin", "EnergyScores", "LinearFit", "NodeHistory",
    "request_cores",
]
