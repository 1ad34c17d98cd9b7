"""The node agent's Prometheus metrics, declared (common.metrics): what `kubejoule-agent run`
serves on /metrics. The collector (agent/exporter/prometheus.py, prometheus_sections.py,
prometheus_carbon.py) builds each family from these per scrape; a value that is unknown has no
series. docs/reference/metrics.md is generated from this list, a comment line above a group of
declarations titling it there."""

from __future__ import annotations

from common.metrics import MetricSpec

POD = ("node", "namespace", "pod", "pod_uid")
GPU = ("node", "gpu", "gpu_uuid", "gpu_name")
ESTIMATE = (("estimate", "with an estimate from published coefficients: their provenance, e.g. ccf:aws:m5.xlarge"),)

# The agent itself
AGENT_ERRORS = MetricSpec(
    "kubejoule_agent_errors", "counter",
    "Errors by kind: gaps in samples, failed samples, invariant breaches, read-skew scaling.", ("node", "kind"),
)
# The node: power and energy, RAPL zones, the rest of the node beside its pods
NODE_POWER = MetricSpec("kubejoule_node_power_watts", "gauge", "Node power.", ("node", "source"), ESTIMATE)
NODE_ENERGY = MetricSpec(
    "kubejoule_node_energy_joules", "counter", "Node energy since the agent started.", ("node", "source"), ESTIMATE
)
NODE_IDLE_POWER = MetricSpec(
    "kubejoule_node_idle_power_watts", "gauge", "Idle (static) part of node power.", ("node", "source", "idle_source")
)
NODE_ACTIVE_POWER = MetricSpec(
    "kubejoule_node_active_power_watts", "gauge", "Active (dynamic) part of node power.",
    ("node", "source", "idle_source"),
)
NODE_IDLE_ENERGY = MetricSpec(
    "kubejoule_node_idle_energy_joules", "counter", "Idle part of node energy since the agent started.",
    ("node", "source", "idle_source"),
)
NODE_ACTIVE_ENERGY = MetricSpec(
    "kubejoule_node_active_energy_joules", "counter", "Active part of node energy since the agent started.",
    ("node", "source", "idle_source"),
)
ZONE_POWER = MetricSpec(
    "kubejoule_zone_power_watts", "gauge", "RAPL zone power, by zone kind and socket.", ("node", "zone", "socket")
)
ZONE_ENERGY = MetricSpec(
    "kubejoule_zone_energy_joules", "counter", "RAPL zone energy since the agent started, by zone kind and socket.",
    ("node", "zone", "socket"),
)
HOST_POWER = MetricSpec("kubejoule_host_power_watts", "gauge", "Active power of everything not in a pod.", ("node",))
HOST_ENERGY = MetricSpec(
    "kubejoule_host_energy_joules", "counter", "Active energy of everything not in a pod since the agent started.",
    ("node",),
)
NODE_CPU_UTILIZATION = MetricSpec(
    "kubejoule_node_cpu_utilization_ratio", "gauge", "Busy share of CPU time in the interval.", ("node",)
)
NODE_POWER_MODEL = MetricSpec(
    "kubejoule_node_power_model_watts", "gauge",
    "Calibrated power curve of the node (reading: what it measures, rapl = the CPU side, platform = the whole "
    "server).", ("node", "utilization", "reading"),
)
NODE_WALL_POWER = MetricSpec(
    "kubejoule_node_wall_power_watts", "gauge",
    "Node power at the wall: node power through the calibrated RAPL-to-wall correction.", ("node", "source"),
)
SAMPLE_TIMESTAMP = MetricSpec(
    "kubejoule_sample_timestamp_seconds", "gauge", "Wall-clock time of the latest sample.", ("node",)
)
# Pods, qemu/KVM virtual machines; containers (with --containers); the top processes (with --process-top N)
POD_POWER = MetricSpec(
    "kubejoule_pod_power_watts", "gauge",
    "Pod power, by component: its share of the CPU side (cpu) and of the GPUs (gpu).", (*POD, "component"),
)
POD_ENERGY = MetricSpec(
    "kubejoule_pod_energy_joules", "counter", "Pod energy since the agent started, by component.", (*POD, "component")
)
CONTAINER = ("node", "namespace", "pod", "container", "container_id")
CONTAINER_POWER = MetricSpec("kubejoule_container_power_watts", "gauge", "Container power.", CONTAINER)
CONTAINER_ENERGY = MetricSpec(
    "kubejoule_container_energy_joules", "counter", "Container energy since the agent started.", CONTAINER
)
VM_POWER = MetricSpec("kubejoule_vm_power_watts", "gauge", "Virtual machine (qemu/KVM) power.", ("node", "vm", "vm_uuid"))
VM_ENERGY = MetricSpec(
    "kubejoule_vm_energy_joules", "counter", "Virtual machine energy since the agent started.", ("node", "vm", "vm_uuid")
)
PROCESS_POWER = MetricSpec(
    "kubejoule_process_power_watts", "gauge", "Power of the processes using the most.", ("node", "pid", "comm")
)
PROCESS_ENERGY = MetricSpec(
    "kubejoule_process_energy_joules", "counter",
    "Energy of the processes using the most power, since the agent started (or the process did).",
    ("node", "pid", "comm"),
)
# GPUs (NVIDIA, through NVML: with --gpu, or when the driver's library is found)
GPU_POWER = MetricSpec(
    "kubejoule_gpu_power_watts", "gauge", "GPU power (NVML: the total-energy counter, else the power reading).", GPU
)
GPU_ENERGY = MetricSpec("kubejoule_gpu_energy_joules", "counter", "GPU energy since the agent started.", GPU)
GPU_INFO = MetricSpec(
    "kubejoule_gpu_info", "gauge",
    "A GPU's measurement method (energy: its counter; power: its power readings) and mode (exclusive to one pod, "
    "shared by processes, mig, vgpu).", (*GPU, "method", "mode"),
)
GPU_UNATTRIBUTED_POWER = MetricSpec(
    "kubejoule_gpu_unattributed_power_watts", "gauge",
    "GPU power measured but not split between pods, host and idle (MIG, vGPU, unknown holders).", ("node",),
)
GPU_UNATTRIBUTED_ENERGY = MetricSpec(
    "kubejoule_gpu_unattributed_energy_joules", "counter",
    "GPU energy not split between pods, host and idle, since the agent started.", ("node",),
)
# The platform reading (with a BMC: --bmc-url or --bmc-url-file)
PLATFORM_OTHER_POWER = MetricSpec(
    "kubejoule_node_platform_other_watts", "gauge",
    "Platform power outside the CPU side and the GPUs (fans, power supplies, disks, NICs), charged to idle.",
    ("node",),
)
PLATFORM_OTHER_ENERGY = MetricSpec(
    "kubejoule_node_platform_other_energy_joules", "counter",
    "Platform energy outside the CPU side and the GPUs since the agent started.", ("node",),
)
PLATFORM_READING_AGE = MetricSpec(
    "kubejoule_node_platform_reading_age_seconds", "gauge", "Age of the BMC's platform reading at the sample.",
    ("node", "reading"),
)
# Metrics Server (metrics.k8s.io: with the Kubernetes API and --metrics-server, the default)
NODE_CPU_USAGE = MetricSpec(
    "kubejoule_node_cpu_usage_cores", "gauge", "Node CPU usage from Metrics Server (metrics.k8s.io), in cores.",
    ("node",),
)
NODE_MEMORY_WORKING_SET = MetricSpec(
    "kubejoule_node_memory_working_set_bytes", "gauge", "Node memory working set from Metrics Server.", ("node",)
)
POD_CPU_USAGE = MetricSpec("kubejoule_pod_cpu_usage_cores", "gauge", "Pod CPU usage from Metrics Server, in cores.", POD)
POD_MEMORY_WORKING_SET = MetricSpec(
    "kubejoule_pod_memory_working_set_bytes", "gauge", "Pod memory working set from Metrics Server.", POD
)
METRICS_SERVER_AGE = MetricSpec(
    "kubejoule_metrics_server_age_seconds", "gauge",
    "Age of the Metrics Server data: sample time minus its timestamp.", ("node",),
)
# Network counters (with --network, the default)
NODE_NETWORK_BYTES = MetricSpec(
    "kubejoule_node_network_bytes", "counter",
    "Bytes through the node's network interfaces (kernel counters; loopback and veth left out).",
    ("node", "interface", "direction"),
)
POD_NETWORK_BYTES = MetricSpec(
    "kubejoule_pod_network_bytes", "counter",
    "Bytes through a pod's own interfaces, loopback left out (none for host-network pods: theirs are the node's).",
    (*POD, "direction"),
)
# Carbon (with --carbon-intensity or --carbon-intensity-csv)
CARBON_INTENSITY = MetricSpec(
    "kubejoule_carbon_intensity_grams_per_kwh", "gauge",
    "Grid carbon intensity over the latest interval, gCO2eq/kWh (source: configured, a constant; csv, a time "
    "series; zone: the CSV's zone).", ("node", "source", "zone"),
)
NODE_CARBON = MetricSpec(
    "kubejoule_node_carbon_grams", "counter",
    "Node emissions since the agent started, gCO2eq: each interval's energy times the grid's carbon intensity "
    "(source: the energy's).", ("node", "source"),
)
POD_CARBON = MetricSpec(
    "kubejoule_pod_carbon_grams", "counter", "Pod emissions since the agent started, gCO2eq, by component.",
    (*POD, "component"),
)
NAMESPACE_CARBON = MetricSpec(
    "kubejoule_namespace_carbon_grams", "counter",
    "Namespace emissions since the agent started, gCO2eq: the sum of its pods' on this node.", ("node", "namespace"),
)
