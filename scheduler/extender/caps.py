"""Power caps: a node whose predicted power with the pod exceeds its cap fails `/filter`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.model import REASON_OK, NodeState, PodInfo
from scheduler.plugins.energy import EnergyPlugin


def predicted_watts(
    energy: EnergyPlugin, pod: PodInfo, node: NodeState, now: float
) -> float | None:
    """The node's power with the pod on it: the measured watts, plus what the pods placed
    since the sample add on the curve, plus ΔP; without measured watts, the curve at the new
    utilization. None when unknown (which never filters a node)."""
    telemetry = node.telemetry
    delta, reason = energy.delta_watts(pod, node, now, with_idle=False)
    if delta is None or reason != REASON_OK or telemetry is None:
        return None
    found = energy.curve_for(node.info.name, telemetry)
    now_u = energy.utilization_with_assumed(node)
    # delta_watts() was OK: a curve, the sample's utilization and the cores are known.
    assert found is not None and now_u is not None and telemetry.utilization is not None
    curve = found[0]
    if telemetry.watts is None:
        return curve.extended_watts(now_u) + delta
    since = curve.extended_watts(now_u) - curve.extended_watts(max(0.0, telemetry.utilization))
    return telemetry.watts + max(0.0, since) + delta


def over_caps(
    energy: EnergyPlugin,
    pod: PodInfo,
    nodes: Sequence[NodeState],
    now: float,
    caps_watts: Mapping[str, float],
    default_cap_watts: float | None,
) -> dict[str, str]:
    """node → why the pod would take it over its cap, for the nodes it would."""
    failed: dict[str, str] = {}
    for node in nodes:
        cap = caps_watts.get(node.info.name, default_cap_watts)
        if cap is None:
            continue
        predicted = predicted_watts(energy, pod, node, now)
        if predicted is not None and predicted > cap:
            failed[node.info.name] = (
                f"kubejoule: the pod would take the node to {predicted:.0f} W, "
                f"over its {cap:.0f} W power cap"
            )
    return failed
