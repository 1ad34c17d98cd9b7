"""The exporter's families beside node, pod, container, VM and process power: the GPUs, the
platform reading, Metrics Server and network counters. Each function reads one Snapshot (and
the energy totals) and yields its families; a section the snapshot does not have gives empty
families or none — never zeros in place of unknowns."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from agent.monitor.energy_ledger import gpu_key
from agent.monitor.snapshot import Snapshot

PREFIX = "kubejoule_"
GPU_LABELS = ["node", "gpu", "gpu_uuid", "gpu_name"]


def node_family(
    kind: type[GaugeMetricFamily | CounterMetricFamily], name: str, documentation: str, node: str,
    value: float | None,
) -> Metric:
    """A family of one series labelled by the node alone (a gauge or a counter: `kind`), empty
    while its value is unknown."""
    family = kind(PREFIX + name, documentation, labels=["node"])
    if value is not None:
        family.add_metric([node], value)
    return family


def power_and_energy(
    what: str, power_help: str, energy_help: str, labels: list[str],
    series: Iterable[tuple[list[str], float | None, float | None]],
) -> Iterator[Metric]:
    """A power gauge and an energy counter (`kubejoule_WHAT_power_watts`, `…_energy_joules`) over
    the same series: (label values, watts, energy so far) each, a value left out while unknown."""
    power = GaugeMetricFamily(PREFIX + f"{what}_power_watts", power_help, labels=labels)
    energy = CounterMetricFamily(PREFIX + f"{what}_energy_joules", energy_help, labels=labels)
    for values, watts, joules in series:
        if watts is not None:
            power.add_metric(values, watts)
        if joules is not None:
            energy.add_metric(values, joules)
    yield power
    yield energy


def gpu_families(snap: Snapshot, gpu_totals: Mapping[tuple[str, str, str], float],
                 unattributed_total: float | None) -> Iterator[Metric]:
    """Per GPU its power, energy and how it was measured; GPU power not split between parts."""
    if not snap.gpus and not gpu_totals:
        return
    power = GaugeMetricFamily(PREFIX + "gpu_power_watts", "GPU power (NVML: the total-energy counter, else the "
                              "power reading).", labels=GPU_LABELS)
    energy = CounterMetricFamily(PREFIX + "gpu_energy_joules", "GPU energy since the agent started.",
                                 labels=GPU_LABELS)
    info = GaugeMetricFamily(PREFIX + "gpu_info", "A GPU's measurement method (energy: its counter; power: its "
                             "power readings) and mode (exclusive to one pod, shared by processes, mig, vgpu).",
                             labels=[*GPU_LABELS, "method", "mode"])
    for gpu in snap.gpus:
        key = gpu_key(gpu)
        if gpu.watts is not None:
            power.add_metric([snap.node, *key], gpu.watts)
        if key in gpu_totals:
            energy.add_metric([snap.node, *key], gpu_totals[key])
        info.add_metric([snap.node, *key, gpu.method or "", gpu.mode], 1.0)
    yield power
    yield energy
    yield info
    yield node_family(GaugeMetricFamily, "gpu_unattributed_power_watts", "GPU power measured but not split "
                      "between pods, host and idle (MIG, vGPU, unknown holders).", snap.node,
                      snap.gpu_unattributed_watts)
    yield node_family(CounterMetricFamily, "gpu_unattributed_energy_joules", "GPU energy not split "
                      "between pods, host and idle, since the agent started.", snap.node, unattributed_total)


def platform_families(snap: Snapshot, other_total: float | None) -> Iterator[Metric]:
    """The platform reading's remainder (what neither RAPL nor NVML sees) and its age."""
    if snap.platform is None and other_total is None:
        return
    other = GaugeMetricFamily(PREFIX + "node_platform_other_watts", "Platform power outside the CPU side and the "
                              "GPUs (fans, power supplies, disks, NICs), charged to idle.", labels=["node"])
    age = GaugeMetricFamily(PREFIX + "node_platform_reading_age_seconds", "Age of the BMC's platform reading at "
                            "the sample.", labels=["node", "reading"])
    platform = snap.platform
    if platform is not None and platform.watts is not None and platform.other_watts is not None:
        other.add_metric([snap.node], platform.other_watts)
    if platform is not None and platform.watts is not None and platform.age_seconds is not None:
        age.add_metric([snap.node, platform.reading or ""], platform.age_seconds)
    yield other
    yield node_family(CounterMetricFamily, "node_platform_other_energy_joules", "Platform energy outside the "
                      "CPU side and the GPUs since the agent started.", snap.node, other_total)
    yield age


def _label(value: object) -> str:
    return "" if value is None else str(value)


def metrics_server_families(snap: Snapshot, pods: bool) -> Iterator[Metric]:
    """Metrics Server's node and pod usage (agent/kube/metrics_server.py, in record form in Snapshot.metrics_server)."""
    section = snap.metrics_server or {}
    node_usage = section.get("node") or {}
    pod_labels = ["node", "namespace", "pod", "pod_uid"]
    families = {
        "node_cpu_usage_cores": ("Node CPU usage from Metrics Server (metrics.k8s.io), in cores.", ["node"]),
        "node_memory_working_set_bytes": ("Node memory working set from Metrics Server.", ["node"]),
        "pod_cpu_usage_cores": ("Pod CPU usage from Metrics Server, in cores.", pod_labels),
        "pod_memory_working_set_bytes": ("Pod memory working set from Metrics Server.", pod_labels),
        "metrics_server_age_seconds": ("Age of the Metrics Server data: sample time minus its timestamp.", ["node"]),
    }
    out = {name: GaugeMetricFamily(PREFIX + name, text, labels=labels) for name, (text, labels) in families.items()}
    if section:
        out["metrics_server_age_seconds"].add_metric([snap.node], section["age_seconds"])
    for key, name in (("cpu_cores", "node_cpu_usage_cores"), ("memory_working_set_bytes", "node_memory_working_set_bytes")):
        if node_usage.get(key) is not None:
            out[name].add_metric([snap.node], node_usage[key])
    if pods:
        for pod in section.get("pods") or []:
            values = [snap.node, _label(pod["namespace"]), _label(pod["name"]), pod["uid"]]
            if pod.get("cpu_cores") is not None:
                out["pod_cpu_usage_cores"].add_metric(values, pod["cpu_cores"])
            if pod.get("memory_working_set_bytes") is not None:
                out["pod_memory_working_set_bytes"].add_metric(values, pod["memory_working_set_bytes"])
    yield from out.values()


def network_families(snap: Snapshot, pods: bool) -> Iterator[Metric]:
    """Interface byte counters of the node and of each pod (agent/device/network.py, in record form in Snapshot.network)."""
    section = snap.network or {}
    node_bytes = CounterMetricFamily(
        PREFIX + "node_network_bytes", "Bytes through the node's network interfaces (kernel counters; "
        "loopback and veth left out).", labels=["node", "interface", "direction"],
    )
    for interface in section.get("interfaces") or []:
        for direction in ("rx", "tx"):
            node_bytes.add_metric([snap.node, interface["interface"], direction], interface[f"{direction}_bytes"])
    yield node_bytes
    if not pods:
        return
    pod_bytes = CounterMetricFamily(
        PREFIX + "pod_network_bytes", "Bytes through a pod's own interfaces, loopback left out (none for "
        "host-network pods: theirs are the node's).", labels=["node", "namespace", "pod", "pod_uid", "direction"],
    )
    for pod in section.get("pods") or []:
        if pod.get("host_network"):
            continue
        for direction in ("rx", "tx"):
            value = pod.get(f"{direction}_bytes")
            if value is not None:
                pod_bytes.add_metric(
                    [snap.node, _label(pod.get("namespace")), _label(pod.get("name")), pod["uid"], direction], value
                )
    yield pod_bytes
