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

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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

PREFIX = "kubejoule_"

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
        errors = CounterMetricFamily(
            PREFIX + "agent_errors", "Errors by kind: gaps in samples, failed samples, invariant breaches, "
            "read-skew scaling.", labels=["node", "kind"],
        )
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
        power = GaugeMetricFamily(PREFIX + "node_power_watts", "Node power.", labels=["node", "source", *extra])
        if snap.node_watts is not None:
            power.add_metric([node, snap.source, *(estimate if snap.estimate else [""] * len(extra))], snap.node_watts)
        yield power
        energy = CounterMetricFamily(
            PREFIX + "node_energy_joules", "Node energy since the agent started.", labels=["node", "source", *extra]
        )
        for source, joules in sorted(totals.node.items()):
            energy.add_metric([node, source, *(estimate if source == SOURCE_ESTIMATED else [""] * len(extra))], joules)
        yield energy
        idle = GaugeMetricFamily(
            PREFIX + "node_idle_power_watts", "Idle (static) part of node power.",
            labels=["node", "source", "idle_source"],
        )
        active = GaugeMetricFamily(
            PREFIX + "node_active_power_watts", "Active (dynamic) part of node power.",
            labels=["node", "source", "idle_source"],
        )
        if snap.idle_watts is not None:
            idle.add_metric([node, snap.source, snap.idle_source], snap.idle_watts)
        if snap.active_watts is not None:
            active.add_metric([node, snap.source, snap.idle_source], snap.active_watts)
        yield idle
        yield active
        for part, totals_of_part in (("idle", totals.idle), ("active", totals.active)):
            part_energy = CounterMetricFamily(
                PREFIX + f"node_{part}_energy_joules", f"{part.capitalize()} part of node energy since the agent "
                "started.", labels=["node", "source", "idle_source"],
            )
            for key, joules in sorted(totals_of_part.items()):
                part_energy.add_metric([node, *key], joules)
            yield part_energy
        zone_power = GaugeMetricFamily(
            PREFIX + "zone_power_watts", "RAPL zone power, by zone kind and socket.", labels=["node", "zone", "socket"]
        )
        for key, (watts, _) in zone_series(snap.zones).items():
            if watts is not None:
                zone_power.add_metric([node, *key], watts)
        yield zone_power
        zone_energy = CounterMetricFamily(
            PREFIX + "zone_energy_joules", "RAPL zone energy since the agent started, by zone kind and socket.",
            labels=["node", "zone", "socket"],
        )
        for key, joules in sorted(totals.zones.items()):
            zone_energy.add_metric([node, *key], joules)
        yield zone_energy
        yield node_family(
            GaugeMetricFamily, "host_power_watts", "Active power of everything not in a pod.", node, snap.host_watts
        )
        yield node_family(
            CounterMetricFamily, "host_energy_joules",
            "Active energy of everything not in a pod since the agent started.", node, totals.host.get(""),
        )
        yield node_family(
            GaugeMetricFamily, "node_cpu_utilization_ratio", "Busy share of CPU time in the interval.", node,
            snap.cpu_utilization,
        )
        if self.model_points:
            model = GaugeMetricFamily(
                PREFIX + "node_power_model_watts", "Calibrated power curve of the node (reading: what it "
                "measures, rapl = the CPU side, platform = the whole server).",
                labels=["node", "utilization", "reading"],
            )
            for level, watts in self.model_points:
                model.add_metric([node, f"{level:.1f}", self.model_reading], watts)
            yield model
        wall_watts = snap.wall_watts
        if wall_watts is not None:  # only with a power profile's wall correction
            wall = GaugeMetricFamily(
                PREFIX + "node_wall_power_watts",
                "Node power at the wall: node power through the calibrated RAPL-to-wall correction.",
                labels=["node", "source"],
            )
            wall.add_metric([node, SOURCE_ESTIMATED], wall_watts)
            yield wall
        timestamp = GaugeMetricFamily(
            PREFIX + "sample_timestamp_seconds", "Wall-clock time of the latest sample.", labels=["node"]
        )
        timestamp.add_metric([node], snap.timestamp)
        yield timestamp

    def _pods(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            "pod", "Pod power, by component: its share of the CPU side (cpu) and of the GPUs (gpu).",
            "Pod energy since the agent started, by component.",
            ["node", "namespace", "pod", "pod_uid", "component"],
            (
                ([snap.node, _label(pod.namespace), _label(pod.name), pod.uid, component], watts,
                 totals.pods.get((pod.uid, component)))
                for pod in snap.pods
                for component, watts in pod_components(pod)
            ),
        )

    def _containers(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            "container", "Container power.", "Container energy since the agent started.",
            ["node", "namespace", "pod", "container", "container_id"],
            (
                ([snap.node, _label(pod.namespace), _label(pod.name), _label(container.name), container.id],
                 container.watts, totals.containers.get(container.id))
                for pod in snap.pods
                for container in pod.containers
            ),
        )

    def _vms(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            "vm", "Virtual machine (qemu/KVM) power.", "Virtual machine energy since the agent started.",
            ["node", "vm", "vm_uuid"],
            (([snap.node, *key], vm.watts, totals.vms.get(key)) for key, vm in one_per_series(snap.vms, vm_key).items()),
        )

    def _processes(self, snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
        yield from power_and_energy(
            "process", "Power of the processes using the most.",
            "Energy of the processes using the most power, since the agent started (or the process did).",
            ["node", "pid", "comm"],
            (
                ([snap.node, str(proc.pid), proc.comm], proc.watts, totals.processes.get((proc.pid, proc.comm)))
                for proc in snap.processes[: self.levels.process_top]
            ),
        )
