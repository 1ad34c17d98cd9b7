"""Prometheus exposition of the latest Snapshot: a custom collector, built per scrape.

The sampling loop adds each new Snapshot to the monitor's `EnergyAccounts`
(agent/monitor/accounts.py: the `EnergyLedger`'s `_joules_total` counters are sums of measured,
wrap-corrected interval energies, monotonic whatever the RAPL counters did). The collector is a
pure reader: `collect()` takes the `AccountsView` they last published (the Snapshot, the totals
and the interval's series, labels resolved) per scrape and never touches the host or the totals. Tests register the collector in a fresh `CollectorRegistry`.

Levels keep cardinality low by default: node series always; pods and VMs by default;
containers (`containers=True`) and the top N processes (`process_top=N`) only when asked. A
value that is unknown has no series — never a 0 in its place. Labels never carry a command
line: processes are labelled with `pid` and `comm` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from agent.exporter import metrics as m
from agent.exporter.prometheus_carbon import carbon_families
from agent.exporter.prometheus_sections import (
    container_families,
    gpu_families,
    metrics_server_families,
    network_families,
    node_families,
    platform_families,
    pod_families,
    process_families,
    vm_families,
)
from agent.monitor.accounts import EnergyAccounts


class SnapshotCollector(Collector):
    """Exposes the latest Snapshot and the energy totals over all snapshots, as `accounts` holds
    them (a fresh, empty `EnergyAccounts` when none is given)."""

    def __init__(
        self,
        accounts: EnergyAccounts | None = None,
        model_points: Iterable[tuple[float, float]] = (),
        model_reading: str = "rapl",
    ) -> None:
        self.accounts = accounts or EnergyAccounts()
        self.levels = self.accounts.levels
        self.model_points = tuple(model_points)  # (utilization, watts) of a calibrated curve
        # What the curve measures (the profile's `reading`): `rapl` (the CPU side: GPUs and the
        # rest of the platform are outside it) or `platform` (the BMC's whole-server reading).
        self.model_reading = model_reading

    def describe(self) -> Iterable[Metric]:
        return []  # series depend on the snapshot; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        view = self.accounts.read()
        snap, totals, carbon = view.latest, view.totals, view.carbon
        node = snap.node if snap is not None else ""
        errors = m.AGENT_ERRORS.counter_family()
        for kind, count in sorted(view.errors.items()):
            errors.add_metric([node, kind], count)
        if snap is None or totals is None:
            yield errors
            return
        yield from node_families(snap, totals, view.estimate, self.model_points, self.model_reading)
        if self.levels.pods:
            yield from pod_families(snap.node, totals)
        if self.levels.containers:
            yield from container_families(snap.node, totals)
        if self.levels.vms:
            yield from vm_families(snap.node, totals)
        if self.levels.process_top > 0:
            yield from process_families(snap, totals, self.levels.process_top)
        yield from gpu_families(snap, totals)
        yield from platform_families(snap, totals.platform_other)
        yield from metrics_server_families(snap, self.levels.pods)
        yield from network_families(snap, self.levels.pods)
        if carbon is not None:
            yield from carbon_families(snap.node, carbon, self.levels.pods)
        yield errors
