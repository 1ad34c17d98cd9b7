"""Grams of CO2-equivalent over every Snapshot: each interval's energy, as the energy ledger
resolved it into series (`IntervalEnergy`, agent/monitor/energy_ledger.py: the same joules the
energy counters add), times the grid's carbon intensity over the interval (common/carbon.py),
summed for the node, each pod and each namespace.

The counters' rules (agent/monitor/counters.py) hold for grams too, and one more: an interval
whose energy is known but whose intensity is not (before or after a CSV's rows, a stale or
missing value, a negative one) adds nothing — the counters hold, the view `add` returns says why
(`gap`), and the accounts count it (`kubejoule_agent_errors_total{kind="carbon"}`). A
namespace's grams are the sum of its pods' grams (those gone included), by construction.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from agent.monitor.counters import EntityTotals, add_energy
from agent.monitor.energy_ledger import IntervalEnergy, Labels
from common.carbon import JOULES_PER_KWH, CarbonIntensity, Reading, interval_grams
from common.carbon_file import IntensityFile

log = logging.getLogger("kubejoule.agent.carbon")


@dataclass(frozen=True)
class CarbonView:
    """What the ledger publishes after each interval, for readers: the grams so far, and each
    pod series of the interval with its grams so far, labels resolved."""

    source: str
    zone: str
    intensity: float | None  # g/kWh over the latest interval; None: unknown
    node: Mapping[str, float]  # by energy source
    pods: Mapping[tuple[str, str], float]  # by (uid, component)
    namespaces: Mapping[str, float]
    # the interval's pod series that have grams: (namespace, pod, uid, component), grams so far
    pod_series: tuple[tuple[Labels, float], ...]
    # why this interval's grams were not counted (its energy known, the intensity not); None: counted
    gap: str | None


class CarbonLedger:
    """The grams over every interval added. Not locked: its owner (agent/monitor/accounts.py)
    adds under its lock and publishes what `add` returns, as it does the EnergyLedger's."""

    def __init__(self, intensity: CarbonIntensity | IntensityFile, pods: bool = True) -> None:
        self.intensity = intensity
        self.pods_exported = pods
        self.node: dict[str, float] = {}
        self.pods: EntityTotals[tuple[str, str]] = EntityTotals()
        self.namespaces: EntityTotals[str] = EntityTotals()
        self.latest = Reading(None, "no interval yet")
        self._gap: str | None = None  # the current gap's reason; None: known

    def add(self, energy: IntervalEnergy) -> CarbonView:
        """Add one interval's grams; what readers see of them now."""
        if isinstance(self.intensity, IntensityFile):
            self._log_reload(self.intensity.refresh())
        seconds = energy.seconds
        end = energy.timestamp
        start = end - seconds
        span = end - start  # the interval on the wall clock, as rounded there: the integral's own span
        integral = self.intensity.integral(start, end)
        self.latest = Reading(integral.value / span, None) if integral.value is not None and span > 0 else integral
        node_grams = interval_grams(energy.node, integral, span)
        # grams per watt of the interval: one product per pod (interval_grams' rule, hoisted)
        per_watt = None if self.latest.value is None else seconds / JOULES_PER_KWH * self.latest.value
        pods = [
            (pod, None if pod.watts is None or per_watt is None else max(pod.watts, 0.0) * per_watt)
            for pod in energy.pods
        ] if self.pods_exported else []
        add_energy(self.node, energy.source, node_grams)
        if self.pods_exported:
            self.pods.advance((pod.key, grams) for pod, grams in pods)
            by_namespace: dict[str, float | None] = {}
            for pod, grams in pods:
                if grams is not None:
                    by_namespace[pod.namespace] = (by_namespace.get(pod.namespace) or 0.0) + grams
                else:
                    by_namespace.setdefault(pod.namespace, None)
            self.namespaces.advance(by_namespace.items())
        reason = integral.reason if integral.value is None and energy.node is not None else None
        self._log_change(reason)
        # EntityTotals replace their maps on every advance: no copy needed.
        live = self.pods.live
        return CarbonView(
            self.intensity.source, self.intensity.zone, self.latest.value, dict(self.node), live,
            self.namespaces.live,
            tuple((pod.labels, live[pod.key]) for pod, _ in pods if pod.key in live), reason,
        )

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
