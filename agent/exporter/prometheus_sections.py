"""The exporter's families, section by section: node, pod, container, VM and process power and
energy, the GPUs, the platform reading, Metrics Server and network counters. Each function reads
one Snapshot or the energy totals published with it (agent/monitor/energy_ledger.py: the
interval's series, labels resolved, and the joules so far by series key) and yields its families;
a section the snapshot does not have gives empty families or none — never zeros in place of
unknowns."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from prometheus_client.core import Metric

from agent.exporter import metrics as m
from agent.monitor.energy_ledger import Series, TotalsView
from agent.monitor.snapshot import SOURCE_ESTIMATED, Snapshot
from common.jsonvalue import number, subobject, subobjects
from common.metrics import MetricSpec

Key = TypeVar("Key", bound=Hashable)


def node_family(spec: MetricSpec, node: str, value: float | None) -> Metric:
    """A family of one series labelled by the node alone (a gauge or a counter), empty while its
    value is unknown."""
    family = spec.counter_family() if spec.kind == "counter" else spec.gauge_family()
    if value is not None:
        family.add_metric([node], value)
    return family


def power_and_energy(
    power_spec: MetricSpec, energy_spec: MetricSpec, series: Iterable[tuple[list[str], float | None, float | None]],
) -> Iterator[Metric]:
    """A power gauge and an energy counter (`kubejoule_WHAT_power_watts`, `…_energy_joules`) over
    the same series: (label values, watts, energy so far) each, a value left out while unknown."""
    power = power_spec.gauge_family()
    energy = energy_spec.counter_family()
    for values, watts, joules in series:
        if watts is not None:
            power.add_metric(values, watts)
        if joules is not None:
            energy.add_metric(values, joules)
    yield power
    yield energy


def gpu_families(snap: Snapshot, totals: TotalsView) -> Iterator[Metric]:
    """Per GPU its power, energy and how it was measured; GPU power not split between parts."""
    gpus = totals.interval.gpus
    if not gpus and not totals.gpus:
        return
    power = m.GPU_POWER.gauge_family()
    energy = m.GPU_ENERGY.counter_family()
    info = m.GPU_INFO.gauge_family()
    for gpu in gpus:
        if gpu.watts is not None:
            power.add_metric([snap.node, *gpu.labels], gpu.watts)
        if gpu.key in totals.gpus:
            energy.add_metric([snap.node, *gpu.labels], totals.gpus[gpu.key])
        info.add_metric([snap.node, *gpu.labels, gpu.method, gpu.mode], 1.0)
    yield power
    yield energy
    yield info
    yield node_family(m.GPU_UNATTRIBUTED_POWER, snap.node, snap.gpu_unattributed_watts)
    yield node_family(m.GPU_UNATTRIBUTED_ENERGY, snap.node, totals.gpu_unattributed)


def platform_families(snap: Snapshot, other_total: float | None) -> Iterator[Metric]:
    """The platform reading's remainder (what neither RAPL nor NVML sees) and its age."""
    if snap.platform is None and other_total is None:
        return
    other = m.PLATFORM_OTHER_POWER.gauge_family()
    age = m.PLATFORM_READING_AGE.gauge_family()
    platform = snap.platform
    if platform is not None and platform.watts is not None and platform.other_watts is not None:
        other.add_metric([snap.node], platform.other_watts)
    if platform is not None and platform.watts is not None and platform.age_seconds is not None:
        age.add_metric([snap.node, platform.reading or ""], platform.age_seconds)
    yield other
    yield node_family(m.PLATFORM_OTHER_ENERGY, snap.node, other_total)
    yield age


def _label(value: object) -> str:
    return "" if value is None else str(value)


def metrics_server_families(snap: Snapshot, pods: bool) -> Iterator[Metric]:
    """Metrics Server's node and pod usage (agent/kube/metrics_server.py, in record form in Snapshot.metrics_server)."""
    section = snap.metrics_server or {}
    node_usage = subobject(section, "node")
    specs = {
        "node_cpu_usage_cores": m.NODE_CPU_USAGE,
        "node_memory_working_set_bytes": m.NODE_MEMORY_WORKING_SET,
        "pod_cpu_usage_cores": m.POD_CPU_USAGE,
        "pod_memory_working_set_bytes": m.POD_MEMORY_WORKING_SET,
        "metrics_server_age_seconds": m.METRICS_SERVER_AGE,
    }
    out = {name: spec.gauge_family() for name, spec in specs.items()}
    age = number(section, "age_seconds")
    if section and age is not None:
        out["metrics_server_age_seconds"].add_metric([snap.node], age)
    for key, name in (("cpu_cores", "node_cpu_usage_cores"), ("memory_working_set_bytes", "node_memory_working_set_bytes")):
        value = number(node_usage, key)
        if value is not None:
            out[name].add_metric([snap.node], value)
    if pods:
        for pod in subobjects(section, "pods"):
            values = [snap.node, _label(pod.get("namespace")), _label(pod.get("name")), _label(pod.get("uid"))]
            for key, name in (("cpu_cores", "pod_cpu_usage_cores"), ("memory_working_set_bytes", "pod_memory_working_set_bytes")):
                value = number(pod, key)
                if value is not None:
                    out[name].add_metric(values, value)
    yield from out.values()


def network_families(snap: Snapshot, pods: bool) -> Iterator[Metric]:
    """Interface byte counters of the node and of each pod (agent/device/network.py, in record form in Snapshot.network)."""
    section = snap.network or {}
    node_bytes = m.NODE_NETWORK_BYTES.counter_family()
    for interface in subobjects(section, "interfaces"):
        for direction in ("rx", "tx"):
            value = number(interface, f"{direction}_bytes")
            if value is not None:
                node_bytes.add_metric([snap.node, _label(interface.get("interface")), direction], value)
    yield node_bytes
    if not pods:
        return
    pod_bytes = m.POD_NETWORK_BYTES.counter_family()
    for pod in subobjects(section, "pods"):
        if pod.get("host_network"):
            continue
        for direction in ("rx", "tx"):
            value = number(pod, f"{direction}_bytes")
            if value is not None:
                pod_bytes.add_metric(
                    [snap.node, _label(pod.get("namespace")), _label(pod.get("name")), _label(pod.get("uid")), direction],
                    value,
                )
    yield pod_bytes


def node_families(snap: Snapshot, totals: TotalsView, provenance: str | None,
                  model_points: Sequence[tuple[float, float]] = (), model_reading: str = "rapl") -> Iterator[Metric]:
    """The node's families: power and energy (with their idle/active split), zones, host, CPU
    utilization, the calibrated curve (`model_points`, of `model_reading`), wall power, the time."""
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
    for zone in totals.interval.zones:
        if zone.watts is not None:
            zone_power.add_metric([node, *zone.labels], zone.watts)
    yield zone_power
    zone_energy = m.ZONE_ENERGY.counter_family()
    for key, joules in sorted(totals.zones.items()):
        zone_energy.add_metric([node, *key], joules)
    yield zone_energy
    yield node_family(m.HOST_POWER, node, snap.host_watts)
    yield node_family(m.HOST_ENERGY, node, totals.host)
    yield node_family(m.NODE_CPU_UTILIZATION, node, snap.cpu_utilization)
    if model_points:
        model = m.NODE_POWER_MODEL.gauge_family()
        for level, watts in model_points:
            model.add_metric([node, f"{level:.1f}", model_reading], watts)
        yield model
    wall_watts = snap.wall_watts
    if wall_watts is not None:  # only with a power profile's wall correction
        wall = m.NODE_WALL_POWER.gauge_family()
        wall.add_metric([node, SOURCE_ESTIMATED], wall_watts)
        yield wall
    timestamp = m.SAMPLE_TIMESTAMP.gauge_family()
    timestamp.add_metric([node], snap.timestamp)
    yield timestamp

def _series_families(power_spec: MetricSpec, energy_spec: MetricSpec, node: str, series: Iterable[Series[Key]],
                     totals: Mapping[Key, float]) -> Iterator[Metric]:
    """The interval's series of a part, each with its joules so far."""
    yield from power_and_energy(
        power_spec, energy_spec, (([node, *s.labels], s.watts, totals.get(s.key)) for s in series),
    )


def pod_families(node: str, totals: TotalsView) -> Iterator[Metric]:
    yield from _series_families(m.POD_POWER, m.POD_ENERGY, node, totals.interval.pods, totals.pods)


def container_families(node: str, totals: TotalsView) -> Iterator[Metric]:
    yield from _series_families(m.CONTAINER_POWER, m.CONTAINER_ENERGY, node, totals.interval.containers,
                                totals.containers)


def vm_families(node: str, totals: TotalsView) -> Iterator[Metric]:
    yield from _series_families(m.VM_POWER, m.VM_ENERGY, node, totals.interval.vms, totals.vms)


def process_families(snap: Snapshot, totals: TotalsView, top: int) -> Iterator[Metric]:
    """The top `top` processes of the Snapshot (the counters hold every busy one's)."""
    yield from power_and_energy(
        m.PROCESS_POWER, m.PROCESS_ENERGY,
        (
            ([snap.node, str(proc.pid), proc.comm], proc.watts, totals.processes.get((proc.pid, proc.comm)))
            for proc in snap.processes[:top]
        ),
    )
