"""The agent's running accounts: every Snapshot's interval added, once, as it is published.

`EnergyAccounts` owns the `EnergyLedger` (joules and errors by kind) and, with a carbon
intensity configured, the `CarbonLedger` (grams). The sampling loop adds to it (`add`,
`count_error`): the energy ledger resolves the interval's series and adds their joules, hands the
interval to the carbon ledger for grams, and what both return is published as one immutable
`AccountsView` with the Snapshot. Readers — the Prometheus collector, once per scrape — take the
latest view (`read`) and compute nothing. So cumulative energy lives here, in the monitor, and
the exporter is a pure reader of what this publishes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace

from agent.monitor.carbon_ledger import CarbonLedger, CarbonView
from agent.monitor.energy_ledger import EnergyLedger, ExportLevels, TotalsView
from agent.monitor.snapshot import Snapshot


@dataclass(frozen=True)
class AccountsView:
    """What one interval published: the latest Snapshot with the totals over every Snapshot added
    (both None before the first), the grams when carbon is configured, the errors by kind."""

    latest: Snapshot | None
    totals: TotalsView | None
    carbon: CarbonView | None
    errors: Mapping[str, float]
    # the provenance of estimated node power (ccf:aws:m5.xlarge), kept through gaps so that the
    # estimated energy counter keeps its series
    estimate: str | None = None


class EnergyAccounts:
    """Thread-safe: the sampling thread adds (and other threads count errors) while scrapes read
    the view last published, which nothing changes once published."""

    def __init__(self, levels: ExportLevels | None = None, carbon: CarbonLedger | None = None) -> None:
        self.levels = levels or ExportLevels()
        self._lock = threading.Lock()
        self._ledger = EnergyLedger(self.levels)
        self._carbon = carbon
        if carbon is not None:
            self._ledger.count_error("carbon", 0)
        self._view = AccountsView(None, None, None, self._ledger.errors())

    @property
    def latest(self) -> Snapshot | None:
        return self._view.latest

    def add(self, snapshot: Snapshot) -> None:
        """Add one published Snapshot: its interval's energy (and grams) to the totals."""
        with self._lock:
            totals = self._ledger.add(snapshot)
            carbon = self._carbon.add(totals.interval) if self._carbon is not None else None
            if carbon is not None and carbon.gap is not None:
                self._ledger.count_error("carbon")  # energy known, intensity not: the reason is logged
            self._view = AccountsView(snapshot, totals, carbon, self._ledger.errors(),
                                      snapshot.estimate or self._view.estimate)

    def count_error(self, kind: str, count: int = 1) -> None:
        """Count errors that are not in a snapshot (a failed sample, an unreachable API); a count
        of 0 makes the kind's series exist from the start."""
        with self._lock:
            self._ledger.count_error(kind, count)
            self._view = replace(self._view, errors=self._ledger.errors())

    def read(self) -> AccountsView:
        """The view last published (immutable: a reader needs no lock)."""
        return self._view
