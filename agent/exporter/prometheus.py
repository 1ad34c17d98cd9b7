"""Prometheus exposition of the latest Snapshot: a custom collector, built per scrape.

The sampling loop adds each new Snapshot to the monitor's `EnergyAccounts`
(agent/monitor/accounts.py: the `EnergyLedger`'s `_joules_total` counters are sums of measured,
wrap-corrected interval energies, monotonic whatever the RAPL counters did). The collector is a
pure reader: `collect()` takes one `AccountsView` of them per scrape and never touches the host
or the totals. Tests register the collector in a fresh `CollectorRegistry`.

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
    gpu_families,
    metrics_server_families,
    network_families,
    node_family,
    platform_families,
    power_and_energy,
)
from agent.monitor.accounts import EnergyAccounts
from agent.monitor.energy_ledger import (
    one_per_series,
    pod_components,
    vm_key,
    zone_series,
)
from agent.monitor.energy_totals import TotalsView
from agent.monitor.snapshot import SOURCE_ESTIMATED, Snapshot


def _label(value: object) -> str:
    return "" if value is None else str(value)


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
        for kind, count in sorted(totals.errors.items()):
            errors.add_metric([node, kind], count)
        if snap is None:
            yield errors
            return
        yield from self._node(snap, totals, view.estimate)
        if self.levels.pods:
            yield from self._pods(snap, totals)
        if self.levels.containers:
            yield from self._containers(snap, totals)
        if self.levels.vms:
            yield from self._vms(snap, totals)
        if self.levels.process_top > 0:
            yield from self._processes(snap, totals)
        yield from gpu_families(snap, totals.gpus, totals.gpu_unattributed.get(""))
        yield from platform_families(snap, totals.platform_other.get(""))
        yield from metrics_server_families(snap, self.levels.pods)
        yield from network_families(snap, self.levels.pods)
        if carbon is not None:
            yield from carbon_families(snap, carbon, self.levels.pods)
        yield errors

    def _node(self, snap: Snapshot, totals: TotalsView, provenance: str | None) -> Iterator[Metric]:
        node = snap.node
        # An estimate from published coefficients carries their provenance: estimate="ccf:aws:m5.xlarge"
        extra, estimate = (["estimate"], [provenance]) if provenance else ([], [])
        power = m.NODE_POWER.gauge_family(extra)
        if snap.node_watts is not None:
            power.add_metric([node, snap.source, *(estimate if snap.estimate else [""] * len(extra))], snap.node_watts)
        yield power
        energy = m.NODE_ENERGY.counter_family(extra)
        for source, joules in sorted(totals.node.items()):
            energy.add_metric([node, source, *(estimate if source == SOURCE_ESTIMATED else [""] * len(extra))], joules)
        yield energy
        idle = m.NODE_IDLE_POWER.gauge_family()
        active = m.NODE_ACTIVE_POWER.gauge_family()
        if snap.idle_watts is not None:
            idle.add_metric([node, snap.source, snap.idle_source], snap.idle_watts)
        if snap.active_watts is not None:
            active.add_metric([node, snap.source, snap.idle_source], snap.active_watts)
        yield idle
        yield active
        for spec, totals_of_part in ((m.NODE_IDLE_ENERGY, totals.idle), (m.NODE_ACTIVE_ENERGY, totals.active)):
            part_energy = spec.counter_family()
            for key, joules in sorted(totals_of_part.items()):
                part_energy.add_metric([node, *key], joules)
            yield part_energy
        zone_power = m.ZONE_POWER.gauge_family()
        for key, (watts, _) in zone_series(snap.zones).items():
            if watts is not None:
                zone_power.add_metric([node, *key], watts)
        yield zone_power
        zone_energy = m.ZONE_ENERGY.counter_family()
        for key, joules in sorted(totals.zones.items()):
            zone_energy.add_metric([node, *key], joules)
        yield zone_energy
        yield node_family(m.HOST_POWER, node, snap.host_watts)
        yield node_family(m.HOST_ENERGY, node, totals.host.get(""))
        yield node_family(m.NODE_CPU_UTILIZATION, node, snap.cpu_utilization)
        if self.model_points:
            model = m.NODE_POWER_MODEL.gauge_family()
            for level, watts in self.model_points:
                model.add_metric([node, f"{level:.1f}", self.model_reading], watts)
            yield model
        wall_watts = snap.wall_watts
        if wall_watts is not None:  # only with a power profile's wall correction
            wall = m.NODE_WALL_POWER.gauge_family()
            wall.add_metric([node, SOURCE_ESTIMATED], wall_watts)
            yield wall
        timestamp = m.SAMPLE_TIMESTAMP.gauge_family()
        timestamp.add_metric([node], snap.timestamp)
        yield timestamp

    def _pods(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            m.POD_POWER, m.POD_ENERGY,
            (
                ([snap.node, _label(pod.namespace), _label(pod.name), pod.uid, component], watts,
                 totals.pods.get((pod.uid, component)))
                for pod in snap.pods
                for component, watts in pod_components(pod)
            ),
        )

    def _containers(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            m.CONTAINER_POWER, m.CONTAINER_ENERGY,
            (
                ([snap.node, _label(pod.namespace), _label(pod.name), _label(container.name), container.id],
                 container.watts, totals.containers.get(container.id))
                for pod in snap.pods
                for container in pod.containers
            ),
        )

    def _vms(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            m.VM_POWER, m.VM_ENERGY,
            (([snap.node, *key], vm.watts, totals.vms.get(key)) for key, vm in one_per_series(snap.vms, vm_key).items()),
        )

    def _processes(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            m.PROCESS_POWER, m.PROCESS_ENERGY,
            (
                ([snap.node, str(proc.pid), proc.comm], proc.watts, totals.processes.get((proc.pid, proc.comm)))
                for proc in snap.processes[: self.levels.process_top]
            ),
        )
