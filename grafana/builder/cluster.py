"""kubejoule / Cluster energy: the cluster's power and energy by source, node and namespace, its
carbon, and the agents' health."""

from __future__ import annotations

from grafana_foundation_sdk.models.dashboard import Dashboard

from .board import dashboard, node_variable
from .panels import bar_chart, bar_gauge, graph, query, stat_tile
from .promql import KWH, SEL, rate


def cluster() -> Dashboard:
    return dashboard(
        "kubejoule-cluster",
        "kubejoule / Cluster energy",
        "Power and energy of the cluster's nodes, measured (RAPL) or estimated, and by namespace.",
        [node_variable()],
        [
            stat_tile(
                "Cluster power",
                "Sum of node power over the selected nodes, all sources.",
                query(f"sum(kubejoule_node_power_watts{{{SEL}}})", "cluster"),
            ),
            stat_tile(
                "Energy, last 24 h",
                "Node energy counters' increase over the last day, in kWh.",
                query(
                    f"sum(increase(kubejoule_node_energy_joules_total{{{SEL}}}[1d])) / {KWH}", "kWh"
                ),
                unit="kwatth",
                decimals=3,
            ),
            stat_tile(
                "Nodes by power source",
                "How many nodes report measured power (rapl: RAPL and GPUs; platform: the BMC; host: a VM "
                "node's share measured on its host) or "
                "estimated power, or none.",
                query(f"count by (source) (kubejoule_node_power_watts{{{SEL}}})", "{{source}}"),
                unit="short",
            ),
            stat_tile(
                "Oldest sample",
                "Age of the oldest node sample: a stalled agent shows here first.",
                query(f"max(time() - kubejoule_sample_timestamp_seconds{{{SEL}}})", "age"),
                unit="s",
            ),
            graph(
                "Node power: measured vs estimated",
                "Cluster power split by source: rapl is measured by the hardware's counters (with "
                "the GPUs), platform by the BMC, host by a VM node's host (its CPU share of the host's RAPL), "
                "estimated comes from a calibration curve.",
                query(f"sum by (source) ({rate('node_energy', SEL)})", "{{source}}"),
                stack=True,
            ),
            graph(
                "Power per node",
                "Each node's power and its source.",
                query(
                    f"sum by (node, source) ({rate('node_energy', SEL)})", "{{node}} ({{source}})"
                ),
            ),
            bar_chart(
                "kWh per day",
                "Energy of the selected nodes per day (increase of the energy counters).",
                query(
                    f"sum(increase(kubejoule_node_energy_joules_total{{{SEL}}}[$__interval])) / {KWH}",
                    "kWh",
                ),
                unit="kwatth",
                interval="1d",
                decimals=3,
            ),
            graph(
                "Idle, active and workloads",
                "Idle (static) and active power of the selected nodes, and how "
                "the active part splits between pods and everything else (host).",
                query(f"sum({rate('node_idle_energy', SEL)})", "idle"),
                query(f"sum by (component) ({rate('pod_energy', SEL)})", "pods ({{component}})"),
                query(f"sum({rate('host_energy', SEL)})", "host"),
                query(f"sum({rate('gpu_unattributed_energy', SEL)})", "GPU, not split"),
                stack=True,
            ),
            graph(
                "GPU power per node",
                "Power of each node's GPUs (NVML's energy counters), summed per node.",
                query(f"sum by (node) ({rate('gpu_energy', SEL)})", "{{node}}"),
            ),
            graph(
                "Platform beyond CPU and GPUs",
                "Where a BMC reports the whole platform: what neither RAPL nor NVML sees (fans, power "
                "supplies, disks, NICs), per node. It is charged to idle, never to pods.",
                query(f"sum by (node) ({rate('node_platform_other_energy', SEL)})", "{{node}}"),
            ),
            bar_gauge(
                "Energy by namespace (time range)",
                "Pod energy over the dashboard's time range, by namespace.",
                query(
                    f"sort_desc(sum by (namespace) (increase(kubejoule_pod_energy_joules_total{{{SEL}}}"
                    f"[$__range]))) / {KWH}",
                    "{{namespace}}",
                    instant=True,
                ),
                unit="kwatth",
                decimals=4,
            ),
            graph(
                "Power by namespace",
                "Pod power summed by namespace.",
                query(f"sum by (namespace) ({rate('pod_energy', SEL)})", "{{namespace}}"),
                stack=True,
            ),
            # Carbon (with a carbon intensity configured on the agents: docs/agent.md, "Grams of CO2")
            graph(
                "CO2 emissions per node",
                "Grams of CO2-equivalent per hour: each interval's node energy times the grid carbon "
                "intensity the agent is given (rate of kubejoule_node_carbon_grams_total). Missing where "
                "the intensity is unknown (a gap in its CSV): no grams are made up.",
                query(
                    f"sum by (node) (rate(kubejoule_node_carbon_grams_total{{{SEL}}}[$__rate_interval])) * 3600",
                    "{{node}}",
                ),
                unit="suffix: gCO2eq/h",
                width=8,
            ),
            bar_gauge(
                "CO2 by namespace (time range)",
                "Grams of CO2-equivalent of each namespace's pods over the dashboard's time range.",
                query(
                    f"sort_desc(sum by (namespace) (increase(kubejoule_namespace_carbon_grams_total{{{SEL}}}"
                    "[$__range])))",
                    "{{namespace}}",
                    instant=True,
                ),
                unit="massg",
                decimals=2,
                width=8,
            ),
            graph(
                "Grid carbon intensity",
                "The grid carbon intensity each agent uses (source: configured, a constant; csv, a time "
                "series such as an Electricity Maps export), gCO2eq/kWh.",
                query(
                    f"kubejoule_carbon_intensity_grams_per_kwh{{{SEL}}}",
                    "{{node}} ({{source}} {{zone}})",
                ),
                unit="suffix: gCO2eq/kWh",
                width=8,
            ),
            graph(
                "Agent errors",
                "Agent errors per second by kind (gaps, failed samples, Metrics Server, API).",
                query(
                    f"sum by (kind) (rate(kubejoule_agent_errors_total{{{SEL}}}[$__rate_interval]))",
                    "{{kind}}",
                ),
                unit="short",
                width=24,
                height=6,
            ),
        ],
    )
