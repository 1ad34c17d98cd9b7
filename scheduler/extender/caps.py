"""Power caps: a node whose predicted power with the pod exceeds its cap fails `/filter`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from common.curves import columns_watts
from scheduler.domain.model import REASON_OK, REASONS, PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.learning.features import feature_values
from scheduler.plugins.energy import EnergyPlugin

_OK = REASONS.index(REASON_OK)


def predicted_watts(energy: EnergyPlugin, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
    """Each node's power with the pod on it: the measured watts, plus what the pods placed
    since the sample add on the curve, plus ΔP (the node's own power change: no consolidation
    price); without measured watts, the curve at the new utilization. NaN when unknown (which
    never filters a node)."""
    scores = energy.evaluate(pod, batch, with_idle=False)
    cols = energy.columns(batch)
    values = feature_values(batch, energy)
    ok = scores.reason == _OK
    now_watts = cols["watts_before"]  # the curve at the sample's u plus the CPU placed since
    at_sample = columns_watts(cols, np.maximum(np.nan_to_num(values["utilization"]), 0.0))
    measured = values["watts"]
    predicted = np.where(
        np.isnan(measured),
        now_watts + scores.delta_watts,
        measured + np.maximum(now_watts - at_sample, 0.0) + scores.delta_watts,
    )
    return np.where(ok, predicted, np.nan)


def over_caps(
    energy: EnergyPlugin,
    pod: PodInfo,
    batch: CandidateBatch,
    caps_watts: Mapping[str, float],
    default_cap_watts: float | None,
) -> dict[str, str]:
    """node → why the pod would take it over its cap, for the nodes it would."""
    caps = [caps_watts.get(name, default_cap_watts) for name in batch.names]
    if all(cap is None for cap in caps):
        return {}
    predicted = predicted_watts(energy, pod, batch)
    failed: dict[str, str] = {}
    for name, cap, watts in zip(batch.names, caps, predicted.tolist(), strict=True):
        if cap is not None and watts == watts and watts > cap:
            failed[name] = (
                f"kubejoule: the pod would take the node to {watts:.0f} W, "
                f"over its {cap:.0f} W power cap"
            )
    return failed
