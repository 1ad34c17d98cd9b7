"""kubejoule / Node detail: one node's power, its parts (idle, pods, host, GPUs, the BMC's rest,
RAPL zones), its pods, VMs and processes, its calibration and network."""

from __future__ import annotations

from grafana_foundation_sdk.models.dashboard import Dashboard

from .board import dashboard, node_variable
from .panels import bar_gauge, graph, query, stat_tile
from .promql import ONE, ONE_PLATFORM, rate


def node() -> Dashboard:
    return dashboard(
        "kubejoule-node",
        "kubejoule / Node detail",
        "One node: RAPL zones, idle vs active power, pods, VMs, processes and the calibration curve.",
        [node_variable(multi=False)],
        [
            stat_tile(
                "Node power",
                "Node power and its source (rapl: measured; estimated: calibration curve).",
                query(f"kubejoule_node_power_watts{{{ONE}}}", "{{source}}"),
            ),
            stat_tile(
                "CPU utilization",
                "Busy share of the node's CPU time in the last interval.",
                query(f"kubejoule_node_cpu_utilization_ratio{{{ONE}}}", "utilization"),
                unit="percentunit",
            ),
            stat_tile(
                "Sample age",
                "Seconds since the agent's latest sample, and the age of its BMC reading.",
                query(f"time() - kubejoule_sample_timestamp_seconds{{{ONE}}}", "sample"),
                query(f"kubejoule_node_platform_reading_age_seconds{{{ONE}}}", "BMC ({{reading}})"),
                unit="s",
            ),
            stat_tile(
                "Metrics Server usage",
                "The node's CPU usage as Metrics Server reports it, and that data's age.",
                query(f"kubejoule_node_cpu_usage_cores{{{ONE}}}", "cores used"),
                query(f"kubejoule_metrics_server_age_seconds{{{ONE}}}", "age (s)"),
                unit="short",
            ),
            graph(
                "Idle vs active",
                "Idle (static) power, and the active part split into pods (CPU and GPU shares) and host.",
                query(rate("node_idle_energy", ONE), "idle ({{idle_source}})"),
                query(f"sum by (component) ({rate('pod_energy', ONE)})", "pods ({{component}})"),
                query(rate("host_energy", ONE), "host"),
                stack=True,
            ),
            graph(
                "GPUs",
                "Each GPU's power (NVML: its energy counter, else its power reading).",
                query(rate("gpu_energy", ONE), "GPU {{gpu}} {{gpu_name}}"),
            ),
            graph(
                "Platform: CPU side, GPUs and the rest",
                "The BMC's platform reading split into what RAPL sees, what the GPUs draw, and the "
                "rest (fans, power supplies, disks, NICs: charged to idle).",
                query(
                    f"sum({rate('node_energy', ONE_PLATFORM)}) - sum({rate('gpu_energy', ONE)})"
                    f" - sum({rate('node_platform_other_energy', ONE)})",
                    "CPU side (RAPL)",
                ),
                query(f"sum({rate('gpu_energy', ONE)})", "GPUs"),
                query(f"sum({rate('node_platform_other_energy', ONE)})", "rest of the platform"),
                stack=True,
            ),
            graph(
                "RAPL zones",
                "Power of each RAPL zone (package, core, uncore, dram, psys); core and "
                "uncore are inside package.",
                query(rate("zone_energy", ONE), "{{zone}} (socket {{socket}})"),
            ),
            graph(
                "Pods",
                "The ten pods on this node using the most power (CPU and GPU shares).",
                query(
                    f"topk(10, sum by (namespace, pod) ({rate('pod_energy', ONE)}))",
                    "{{namespace}}/{{pod}}",
                ),
            ),
            graph(
                "Virtual machines",
                "qemu/KVM virtual machines on this node.",
                query(rate("vm_energy", ONE), "{{vm}}"),
            ),
            graph(
                "Processes",
                "The processes using the most power (opt-in: --process-top N).",
                query(f"topk(10, {rate('process_energy', ONE)})", "{{comm}} ({{pid}})"),
            ),
            bar_gauge(
                "Calibration curve",
                "The node's calibrated power curve: watts at each CPU utilization.",
                query(
                    f"kubejoule_node_power_model_watts{{{ONE}}}", "{{utilization}}", instant=True
                ),
            ),
            graph(
                "Wall vs RAPL",
                "Wall power (RAPL corrected by the calibration's power-meter fit, where the "
                "profile has one) beside the RAPL reading it comes from.",
                query(f"kubejoule_node_wall_power_watts{{{ONE}}}", "wall"),
                query(f"kubejoule_node_power_watts{{{ONE}}}", "node ({{source}})"),
            ),
            graph(
                "Network",
                "Bytes per second through the node's interfaces (loopback and veth left out).",
                query(
                    f"sum by (interface, direction) (rate(kubejoule_node_network_bytes_total{{{ONE}}}"
                    f"[$__rate_interval]))",
                    "{{interface}} {{direction}}",
                ),
                unit="Bps",
            ),
        ],
    )
