"""The agent's running accounts: every Snapshot's interval added, once, as it is published.

`EnergyAccounts` owns the `EnergyLedger` (joules and errors by kind) and, with a carbon
intensity configured, the `CarbonLedger` (grams), and keeps the latest Snapshot. The sampling
loop adds to it (`add`, `count_error`); readers — the Prometheus collector, once per scrape —
take one consistent `AccountsView` under its lock and compute nothing. So cumulative energy
lives here, in the monitor, and the exporter is a pure reader of what this hands it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from agent.monitor.carbon_ledger import CarbonLedger, CarbonView
from agent.monitor.energy_ledger import EnergyLedger, ExportLevels, TotalsView
from agent.monitor.snapshot import Snapshot


@dataclass(frozen=True)
class AccountsView:
    """One reader's consistent copy: the latest Snapshot (None before the first) with the totals
    over every Snapshot added, and the grams when carbon is configured."""

    latest: Snapshot | None
    totals: TotalsView
    carbon: CarbonView | None
    # the provenance of estimated node power (ccf:aws:m5.xlarge), kept through gaps so that the
    # estimated energy counter keeps its series
    estimate: str | None = None


class EnergyAccounts:
    """Thread-safe: the sampling thread adds while scrapes read."""

    def __init__(self, levels: ExportLevels | None = None, carbon: CarbonLedger | None = None) -> None:
        self.levels = levels or ExportLevels()
        self._lock = threading.Lock()
        self._latest: Snapshot | None = None
        self._ledger = EnergyLedger(self.levels)
        self._carbon = carbon
        self._estimate: str | None = None
        if carbon is not None:
            self._ledger.count_error("carbon", 0)

    @property
    def latest(self) -> Snapshot | None:
        return self._latest

    def add(self, snapshot: Snapshot) -> None:
        """Add one published Snapshot: its interval's energy (and grams) to the totals."""
        with self._lock:
            self._ledger.add(snapshot)
            if self._carbon is not None and self._carbon.add(snapshot) is not None:
                self._ledger.count_error("carbon")  # energy known, intensity not: the reason is logged
            self._latest = snapshot
            self._estimate = snapshot.estimate or self._estimate

    def count_error(self, kind: str, count: int = 1) -> None:
        """Count errors that are not in a snapshot (a failed sample, an unreachable API); a count
        of 0 makes the kind's series exist from the start."""
        with self._lock:
            self._ledger.count_error(kind, count)

    def read(self) -> AccountsView:
        with self._lock:
            return AccountsView(
                self._latest, self._ledger.view(), self._carbon.view() if self._carbon is not None else None,
                self._estimate,
            )
