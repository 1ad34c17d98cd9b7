"""Grams of CO2-equivalent over every Snapshot: each interval's energy (the same joules the
energy counters add, agent/monitor/energy_ledger.py) times the grid's carbon intensity over the
interval (common/carbon.py), summed for the node, each pod and each namespace.

The rules of the energy counters (agent/monitor/energy_ledger.py) hold for grams too, and one
more: an interval whose energy is known but whose intensity is not (before or after a CSV's
rows, a stale or missing value, a negative one) adds nothing — the counters hold, `add` returns
the reason, and the collector counts it (`kubejoule_agent_errors_total{kind="carbon"}`). A
namespace's grams are the sum of its pods' grams (those gone included), by construction.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from agent.monitor.energy_ledger import (
    EntityTotals,
    add_energy,
    interval_joules,
    label,
    pod_components,
)
from agent.monitor.snapshot import Snapshot
from common.carbon import JOULES_PER_KWH, CarbonIntensity, Reading, interval_grams
from common.carbon_file import IntensityFile

log = logging.getLogger("kubejoule.agent.carbon")


@dataclass(frozen=True)
class CarbonView:
    """A copy taken under the collector's lock, for one scrape to read."""

    source: str
    zone: str
    intensity: float | None  # g/kWh over the latest interval; None: unknown
    node: Mapping[str, float]  # by energy source
    pods: Mapping[tuple[str, str], float]  # by (uid, component)
    namespaces: Mapping[str, float]


class CarbonLedger:
    """The grams over every snapshot added. Not locked: its owner (the collector) adds and
    reads under one lock, as it does the EnergyLedger."""

    def __init__(self, intensity: CarbonIntensity | IntensityFile, pods: bool = True) -> None:
        self.intensity = intensity
        self.pods_exported = pods
        self.node: dict[str, float] = {}
        self.pods: EntityTotals[tuple[str, str]] = EntityTotals()
        self.namespaces: EntityTotals[str] = EntityTotals()
        self.latest = Reading(None, "no interval yet")
        self._gap: str | None = None  # the current gap's reason; None: known

    def add(self, snapshot: Snapshot) -> str | None:
        """Add one interval's grams; the reason when energy was known but the intensity was not."""
        if isinstance(self.intensity, IntensityFile):
            self._log_reload(self.intensity.refresh())
        seconds = snapshot.interval_seconds
        end = snapshot.timestamp
        start = end - seconds
        span = end - start  # the interval on the wall clock, as rounded there: the integral's own span
        integral = self.intensity.integral(start, end)
        self.latest = Reading(integral.value / span, None) if integral.value is not None and span > 0 else integral
        add_energy(self.node, snapshot.source, interval_grams(interval_joules(snapshot.node_watts, seconds), integral, span))
        if self.pods_exported:
            # grams per watt of the interval: one product per pod (interval_grams' rule, hoisted)
            per_watt = None if self.latest.value is None else seconds / JOULES_PER_KWH * self.latest.value
            pods = [
                ((pod.uid, component), label(pod.namespace),
                 None if watts is None or per_watt is None else max(watts, 0.0) * per_watt)
                for pod in snapshot.pods
                for component, watts in pod_components(pod)
            ]
            self.pods.advance((key, grams) for key, _, grams in pods)
            by_namespace: dict[str, float | None] = {}
            for _, namespace, grams in pods:
                if grams is not None:
                    by_namespace[namespace] = (by_namespace.get(namespace) or 0.0) + grams
                else:
                    by_namespace.setdefault(namespace, None)
            self.namespaces.advance(by_namespace.items())
        reason = integral.reason if integral.value is None and snapshot.node_watts is not None else None
        self._log_change(reason)
        return reason

    @staticmethod
    def _log_reload(change: tuple[bool, str] | None) -> None:
        if change is not None:
            reloaded, message = change
            (log.info if reloaded else log.warning)(message)

    def _log_change(self, reason: str | None) -> None:
        # Once per change between known and unknown (a reason names its time: it changes every interval).
        if (reason is None) != (self._gap is None):
            if reason is not None:
                log.warning("carbon intensity unknown: grams not counted", extra={"fields": {"reason": reason}})
            else:
                log.info("carbon intensity known again: grams counted")
        self._gap = reason

    def view(self) -> CarbonView:
        # EntityTotals replace their maps on every advance: no copy needed.
        return CarbonView(
            self.intensity.source, self.intensity.zone, self.latest.value, dict(self.node), self.pods.live,
            self.namespaces.live,
        )
