"""Writes grafana/dashboards/*.json, the four kubejoule dashboards.

The dashboards are generated so that their layout, datasource wiring and variables stay
consistent; edit the panel lists below and run

    python grafana/generate_dashboards.py

tests/deploy/test_grafana_dashboards.py checks that the JSON files match this script and that
every query returns data from a real Prometheus scraping a real agent and scheduler.

Conventions: every query filters on the dashboard's variables; a panel that shows a range of
time graphs watts as `rate()` of the `_joules_total` counters (the average over each step: no
energy lost between scrapes, as a gauge's samples would lose it) and energy as their `increase()`
(never an integral of watts); stat tiles show the latest gauge; a missing value stays missing (no
`or vector(0)` on power figures).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DASHBOARD_DIR = Path(__file__).resolve().parent / "dashboards"
# The Helm chart ships the same files (Helm reads files inside the chart only).
CHART_DASHBOARD_DIR = Path(__file__).resolve().parents[1] / "daemonset" / "chart" / "kubejoule" / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39
GRID_COLUMNS = 24
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Target:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    targets: tuple[Target, ...]
    kind: str = "timeseries"  # timeseries | stat | bargauge | table | barchart
    unit: str = "watt"
    width: int = 12
    height: int = 8
    interval: str | None = None  # minimum step, e.g. "1d" for daily bars
    decimals: int | None = None
    stack: bool = False


def stat_tile(
    title: str,
    description: str,
    targets: tuple[Target, ...],
    unit: str = "watt",
    decimals: int | None = None,
) -> Panel:
    """A quarter-width stat tile, the row of headline numbers at the top of a dashboard."""
    return Panel(
        title, description, targets, kind="stat", unit=unit, width=6, height=5, decimals=decimals
    )


@dataclass(frozen=True)
class Variable:
    name: str
    label: str
    metric: str
    label_name: str
    multi: bool = True

    @property
    def query(self) -> str:
        return f"label_values({self.metric}, {self.label_name})"


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    panels: tuple[Panel, ...]
    tags: tuple[str, ...] = field(default=("kubejoule",))
    time_from: str = "now-6h"


def _variable_json(variable: Variable) -> dict[str, Any]:
    return {
        "name": variable.name,
        "label": variable.label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": variable.query,
        "query": {
            "query": variable.query,
            "refId": "PrometheusVariableQueryEditor-VariableQuery",
            "qryType": 1,
        },
        "refresh": 2,  # on time range change: nodes and pods come and go
        "sort": 1,
        "multi": variable.multi,
        "includeAll": variable.multi,
        "allValue": ".*" if variable.multi else None,
        "current": {},
        "options": [],
        "regex": "",
        "hide": 0,
    }


def _datasource_variable() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "options": [],
        "refresh": 1,
        "regex": "",
        "hide": 0,
    }


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    if panel.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 20 if panel.stack else 0,
            "stacking": {"mode": "normal" if panel.stack else "none", "group": "A"},
            "spanNulls": False,  # a gap in the data is a gap on the graph, never a line through it
            "showPoints": "never",
        }
    result: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": _panel_options(panel),
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "datasource": DATASOURCE,
                "expr": target.expr,
                "legendFormat": target.legend or "__auto",
                "instant": target.instant,
                "range": not target.instant,
            }
            for i, target in enumerate(panel.targets)
        ],
    }
    if panel.interval:
        result["interval"] = panel.interval
    return result


def _panel_options(panel: Panel) -> dict[str, Any]:
    if panel.kind == "stat":
        return {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
            "textMode": "auto",
        }
    if panel.kind == "bargauge":
        return {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "orientation": "horizontal",
            "displayMode": "gradient",
            "showUnfilled": True,
        }
    if panel.kind == "table":
        return {"showHeader": True, "cellHeight": "sm"}
    if panel.kind == "barchart":
        return {
            "xTickLabelRotation": 0,
            "showValue": "auto",
            "stacking": "none",
            "legend": {"showLegend": True},
        }
    return {
        "legend": {"displayMode": "table", "placement": "right", "calcs": ["mean", "lastNotNull"]},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def dashboard_json(dashboard: Dashboard) -> dict[str, Any]:
    panels = []
    x = y = row_height = 0
    for panel_id, panel in enumerate(dashboard.panels, start=1):
        if x + panel.width > GRID_COLUMNS:
            x, y, row_height = 0, y + row_height, 0
        panels.append(_panel_json(panel, panel_id, x, y))
        x += panel.width
        row_height = max(row_height, panel.height)
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": list(dashboard.tags),
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "time": {"from": dashboard.time_from, "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "annotations": {"list": []},
        "links": [
            {"type": "dashboards", "tags": ["kubejoule"], "asDropdown": True, "title": "kubejoule"}
        ],
        "templating": {
            "list": [_datasource_variable(), *(_variable_json(v) for v in dashboard.variables)]
        },
        "panels": panels,
    }


# -- the dashboards ---------------------------------------------------------------------------


def rate(counter: str, selector: str) -> str:
    """Average watts over each step: rate() of an energy counter (`pod_energy` ->
    kubejoule_pod_energy_joules_total)."""
    return f"rate(kubejoule_{counter}_joules_total{{{selector}}}[$__rate_interval])"


NODES = Variable("node", "Node", "kubejoule_node_power_watts", "node")
ONE_NODE = Variable("node", "Node", "kubejoule_node_power_watts", "node", multi=False)
NAMESPACES = Variable("namespace", "Namespace", "kubejoule_pod_power_watts", "namespace")
SEL = 'node=~"$node"'
SEL_NS = 'node=~"$node", namespace=~"$namespace"'
ONE = 'node="$node"'
ONE_PLATFORM = ONE + ', source="platform"'
SEL_NS_CPU = SEL_NS + ', component="cpu"'  # a pod's CPU-side share: one series per pod
SEL_NS_GPU = SEL_NS + ', component="gpu"'

CLUSTER = Dashboard(
    uid="kubejoule-cluster",
    title="kubejoule / Cluster energy",
    description="Power and energy of the cluster's nodes, measured (RAPL) or estimated, and by namespace.",
    variables=(NODES,),
    panels=(
        stat_tile(
            "Cluster power",
            "Sum of node power over the selected nodes, all sources.",
            (Target(f"sum(kubejoule_node_power_watts{{{SEL}}})", "cluster"),),
        ),
        stat_tile(
            "Energy, last 24 h",
            "Node energy counters' increase over the last day, in kWh.",
            (
                Target(
                    f"sum(increase(kubejoule_node_energy_joules_total{{{SEL}}}[1d])) / {J_PER_KWH:g}",
                    "kWh",
                ),
            ),
            unit="kwatth",
            decimals=3,
        ),
        stat_tile(
            "Nodes by power source",
            "How many nodes report measured power (rapl: RAPL and GPUs; platform: the BMC; host: a VM "
            "node's share measured on its host) or "
            "estimated power, or none.",
            (Target(f"count by (source) (kubejoule_node_power_watts{{{SEL}}})", "{{source}}"),),
            unit="short",
        ),
        stat_tile(
            "Oldest sample",
            "Age of the oldest node sample: a stalled agent shows here first.",
            (Target(f"max(time() - kubejoule_sample_timestamp_seconds{{{SEL}}})", "age"),),
            unit="s",
        ),
        Panel(
            "Node power: measured vs estimated",
            "Cluster power split by source: rapl is measured by the hardware's counters (with "
            "the GPUs), platform by the BMC, host by a VM node's host (its CPU share of the host's RAPL), "
            "estimated comes from a calibration curve.",
            (Target(f"sum by (source) ({rate('node_energy', SEL)})", "{{source}}"),),
            stack=True,
        ),
        Panel(
            "Power per node",
            "Each node's power and its source.",
            (
                Target(
                    f"sum by (node, source) ({rate('node_energy', SEL)})",
                    "{{node}} ({{source}})",
                ),
            ),
        ),
        Panel(
            "kWh per day",
            "Energy of the selected nodes per day (increase of the energy counters).",
            (
                Target(
                    f"sum(increase(kubejoule_node_energy_joules_total{{{SEL}}}[$__interval])) / {J_PER_KWH:g}",
                    "kWh",
                ),
            ),
            kind="barchart",
            unit="kwatth",
            interval="1d",
            decimals=3,
        ),
        Panel(
            "Idle, active and workloads",
            "Idle (static) and active power of the selected nodes, and how "
            "the active part splits between pods and everything else (host).",
            (
                Target(f"sum({rate('node_idle_energy', SEL)})", "idle"),
                Target(f"sum by (component) ({rate('pod_energy', SEL)})", "pods ({{component}})"),
                Target(f"sum({rate('host_energy', SEL)})", "host"),
                Target(f"sum({rate('gpu_unattributed_energy', SEL)})", "GPU, not split"),
            ),
            stack=True,
        ),
        Panel(
            "GPU power per node",
            "Power of each node's GPUs (NVML's energy counters), summed per node.",
            (Target(f"sum by (node) ({rate('gpu_energy', SEL)})", "{{node}}"),),
        ),
        Panel(
            "Platform beyond CPU and GPUs",
            "Where a BMC reports the whole platform: what neither RAPL nor NVML sees (fans, power "
            "supplies, disks, NICs), per node. It is charged to idle, never to pods.",
            (Target(f"sum by (node) ({rate('node_platform_other_energy', SEL)})", "{{node}}"),),
        ),
        Panel(
            "Energy by namespace (time range)",
            "Pod energy over the dashboard's time range, by namespace.",
            (
                Target(
                    f"sort_desc(sum by (namespace) (increase(kubejoule_pod_energy_joules_total{{{SEL}}}"
                    f"[$__range]))) / {J_PER_KWH:g}",
                    "{{namespace}}",
                    instant=True,
                ),
            ),
            kind="bargauge",
            unit="kwatth",
            decimals=4,
        ),
        Panel(
            "Power by namespace",
            "Pod power summed by namespace.",
            (Target(f"sum by (namespace) ({rate('pod_energy', SEL)})", "{{namespace}}"),),
            stack=True,
        ),
        # Carbon (with a carbon intensity configured on the agents: docs/agent.md, "Grams of CO2")
        Panel(
            "CO2 emissions per node",
            "Grams of CO2-equivalent per hour: each interval's node energy times the grid carbon "
            "intensity the agent is given (rate of kubejoule_node_carbon_grams_total). Missing where "
            "the intensity is unknown (a gap in its CSV): no grams are made up.",
            (
                Target(
                    f"sum by (node) (rate(kubejoule_node_carbon_grams_total{{{SEL}}}[$__rate_interval])) * 3600",
                    "{{node}}",
                ),
            ),
            unit="suffix: gCO2eq/h",
            width=8,
        ),
        Panel(
            "CO2 by namespace (time range)",
            "Grams of CO2-equivalent of each namespace's pods over the dashboard's time range.",
            (
                Target(
                    f"sort_desc(sum by (namespace) (increase(kubejoule_namespace_carbon_grams_total{{{SEL}}}"
                    "[$__range])))",
                    "{{namespace}}",
                    instant=True,
                ),
            ),
            kind="bargauge",
            unit="massg",
            decimals=2,
            width=8,
        ),
        Panel(
            "Grid carbon intensity",
            "The grid carbon intensity each agent uses (source: configured, a constant; csv, a time "
            "series such as an Electricity Maps export), gCO2eq/kWh.",
            (
                Target(
                    f"kubejoule_carbon_intensity_grams_per_kwh{{{SEL}}}",
                    "{{node}} ({{source}} {{zone}})",
                ),
            ),
            unit="suffix: gCO2eq/kWh",
            width=8,
        ),
        Panel(
            "Agent errors",
            "Agent errors per second by kind (gaps, failed samples, Metrics Server, API).",
            (
                Target(
                    f"sum by (kind) (rate(kubejoule_agent_errors_total{{{SEL}}}[$__rate_interval]))",
                    "{{kind}}",
                ),
            ),
            unit="short",
            width=24,
            height=6,
        ),
    ),
)

NODE = Dashboard(
    uid="kubejoule-node",
    title="kubejoule / Node detail",
    description="One node: RAPL zones, idle vs active power, pods, VMs, processes and the calibration curve.",
    variables=(ONE_NODE,),
    panels=(
        stat_tile(
            "Node power",
            "Node power and its source (rapl: measured; estimated: calibration curve).",
            (Target(f"kubejoule_node_power_watts{{{ONE}}}", "{{source}}"),),
        ),
        stat_tile(
            "CPU utilization",
            "Busy share of the node's CPU time in the last interval.",
            (Target(f"kubejoule_node_cpu_utilization_ratio{{{ONE}}}", "utilization"),),
            unit="percentunit",
        ),
        stat_tile(
            "Sample age",
            "Seconds since the agent's latest sample, and the age of its BMC reading.",
            (
                Target(f"time() - kubejoule_sample_timestamp_seconds{{{ONE}}}", "sample"),
                Target(f"kubejoule_node_platform_reading_age_seconds{{{ONE}}}", "BMC ({{reading}})"),
            ),
            unit="s",
        ),
        stat_tile(
            "Metrics Server usage",
            "The node's CPU usage as Metrics Server reports it, and that data's age.",
            (
                Target(f"kubejoule_node_cpu_usage_cores{{{ONE}}}", "cores used"),
                Target(f"kubejoule_metrics_server_age_seconds{{{ONE}}}", "age (s)"),
            ),
            unit="short",
        ),
        Panel(
            "Idle vs active",
            "Idle (static) power, and the active part split into pods (CPU and GPU shares) and host.",
            (
                Target(rate("node_idle_energy", ONE), "idle ({{idle_source}})"),
                Target(f"sum by (component) ({rate('pod_energy', ONE)})", "pods ({{component}})"),
                Target(rate("host_energy", ONE), "host"),
            ),
            stack=True,
        ),
        Panel(
            "GPUs",
            "Each GPU's power (NVML: its energy counter, else its power reading).",
            (Target(rate("gpu_energy", ONE), "GPU {{gpu}} {{gpu_name}}"),),
        ),
        Panel(
            "Platform: CPU side, GPUs and the rest",
            "The BMC's platform reading split into what RAPL sees, what the GPUs draw, and the "
            "rest (fans, power supplies, disks, NICs: charged to idle).",
            (
                Target(
                    f"sum({rate('node_energy', ONE_PLATFORM)}) - sum({rate('gpu_energy', ONE)})"
                    f" - sum({rate('node_platform_other_energy', ONE)})",
                    "CPU side (RAPL)",
                ),
                Target(f"sum({rate('gpu_energy', ONE)})", "GPUs"),
                Target(f"sum({rate('node_platform_other_energy', ONE)})", "rest of the platform"),
            ),
            stack=True,
        ),
        Panel(
            "RAPL zones",
            "Power of each RAPL zone (package, core, uncore, dram, psys); core and "
            "uncore are inside package.",
            (Target(rate("zone_energy", ONE), "{{zone}} (socket {{socket}})"),),
        ),
        Panel(
            "Pods",
            "The ten pods on this node using the most power (CPU and GPU shares).",
            (Target(f"topk(10, sum by (namespace, pod) ({rate('pod_energy', ONE)}))", "{{namespace}}/{{pod}}"),),
        ),
        Panel(
            "Virtual machines",
            "qemu/KVM virtual machines on this node.",
            (Target(rate("vm_energy", ONE), "{{vm}}"),),
        ),
        Panel(
            "Processes",
            "The processes using the most power (opt-in: --process-top N).",
            (Target(f"topk(10, {rate('process_energy', ONE)})", "{{comm}} ({{pid}})"),),
        ),
        Panel(
            "Calibration curve",
            "The node's calibrated power curve: watts at each CPU utilization.",
            (
                Target(
                    f"kubejoule_node_power_model_watts{{{ONE}}}", "{{utilization}}", instant=True
                ),
            ),
            kind="bargauge",
        ),
        Panel(
            "Wall vs RAPL",
            "Wall power (RAPL corrected by the calibration's power-meter fit, where the "
            "profile has one) beside the RAPL reading it comes from.",
            (
                Target(f"kubejoule_node_wall_power_watts{{{ONE}}}", "wall"),
                Target(f"kubejoule_node_power_watts{{{ONE}}}", "node ({{source}})"),
            ),
        ),
        Panel(
            "Network",
            "Bytes per second through the node's interfaces (loopback and veth left out).",
            (
                Target(
                    f"sum by (interface, direction) (rate(kubejoule_node_network_bytes_total{{{ONE}}}"
                    f"[$__rate_interval]))",
                    "{{interface}} {{direction}}",
                ),
            ),
            unit="Bps",
        ),
    ),
)

WORKLOADS = Dashboard(
    uid="kubejoule-workloads",
    title="kubejoule / Workloads",
    description="Which pods, namespaces and VMs use the energy.",
    variables=(NODES, NAMESPACES),
    panels=(
        Panel(
            "Top pods by energy (time range)",
            "Pod energy over the dashboard's time range.",
            (
                Target(
                    f"topk(10, sum by (namespace, pod) (increase(kubejoule_pod_energy_joules_total{{{SEL_NS}}}"
                    "[$__range])))",
                    "{{namespace}}/{{pod}}",
                    instant=True,
                ),
            ),
            kind="bargauge",
            unit="joule",
        ),
        Panel(
            "Top namespaces by energy (time range)",
            "Namespace energy over the dashboard's time range.",
            (
                Target(
                    f"topk(10, sum by (namespace) (increase(kubejoule_pod_energy_joules_total{{{SEL_NS}}}"
                    "[$__range])))",
                    "{{namespace}}",
                    instant=True,
                ),
            ),
            kind="bargauge",
            unit="joule",
        ),
        Panel(
            "Pod power",
            "The ten pods using the most power.",
            (
                Target(
                    f"topk(10, sum by (namespace, pod) ({rate('pod_energy', SEL_NS)}))",
                    "{{namespace}}/{{pod}}",
                ),
            ),
        ),
        Panel(
            "Namespace power",
            "Pod power summed by namespace.",
            (
                Target(
                    f"sum by (namespace) ({rate('pod_energy', SEL_NS)})", "{{namespace}}"
                ),
            ),
            stack=True,
        ),
        Panel(
            "GPU power by namespace",
            "Pods' share of the GPUs (component gpu), summed by namespace.",
            (
                Target(
                    f"sum by (namespace) ({rate('pod_energy', SEL_NS_GPU)})", "{{namespace}}"
                ),
            ),
            stack=True,
        ),
        Panel(
            "Watts per CPU core used",
            "Pods' CPU-side power over Metrics Server's CPU usage, by namespace: what a core "
            "of work costs in each namespace.",
            (
                Target(
                    f"sum by (namespace) ({rate('pod_energy', SEL_NS_CPU)}) / "
                    f"sum by (namespace) (kubejoule_pod_cpu_usage_cores{{{SEL_NS}}})",
                    "{{namespace}}",
                ),
            ),
        ),
        Panel(
            "Pod memory",
            "Working set of the pods using the most power (Metrics Server).",
            (
                Target(
                    f"topk(10, sum by (namespace, pod) (kubejoule_pod_memory_working_set_bytes{{{SEL_NS}}}))",
                    "{{namespace}}/{{pod}}",
                ),
            ),
            unit="bytes",
        ),
        Panel(
            "Virtual machines by energy (time range)",
            "qemu/KVM VM energy over the dashboard's time range.",
            (
                Target(
                    f"topk(10, sum by (node, vm) (increase(kubejoule_vm_energy_joules_total{{{SEL}}}[$__range])))",
                    "{{vm}} on {{node}}",
                    instant=True,
                ),
            ),
            kind="bargauge",
            unit="joule",
        ),
        Panel(
            "Pods per namespace",
            "How many pods the agents attribute energy to.",
            (
                Target(
                    f"count by (namespace) (kubejoule_pod_power_watts{{{SEL_NS_CPU}}})",
                    "{{namespace}}",
                ),
            ),
            unit="short",
        ),
    ),
)

SCHEDULER = Dashboard(
    uid="kubejoule-scheduler",
    title="kubejoule / Scheduler",
    description="The energy-aware scheduler and extender: decisions, fallbacks, telemetry age, shadow "
    "recommendations against actual placements.",
    variables=(),
    panels=(
        Panel(
            "Scheduling attempts",
            "Standalone scheduler attempts per second by result.",
            (
                Target(
                    "sum by (result) (rate(kubejoule_scheduler_schedule_attempts_total[$__rate_interval]))",
                    "{{result}}",
                ),
            ),
            unit="short",
        ),
        Panel(
            "Recommendations",
            "Energy recommendations per second by mode (shadow: recorded only).",
            (
                Target(
                    "sum by (mode) (rate(kubejoule_scheduler_recommendations_total[$__rate_interval]))",
                    "{{mode}}",
                ),
            ),
            unit="short",
        ),
        Panel(
            "Shadow recommendation = actual placement",
            "Share of placements where the energy "
            "recommendation equals the node the default scoring chose (time range).",
            (
                Target(
                    'sum(increase(kubejoule_scheduler_recommendation_agreements_total{agree="true"}[$__range])) / '
                    "sum(increase(kubejoule_scheduler_recommendation_agreements_total[$__range]))",
                    "agree",
                    instant=True,
                ),
            ),
            kind="stat",
            unit="percentunit",
            width=6,
        ),
        Panel(
            "Recommended vs placed",
            "Placements whose recommendation agreed or differed (time range).",
            (
                Target(
                    "sum by (agree) (increase(kubejoule_scheduler_recommendation_agreements_total[$__range]))",
                    "agree={{agree}}",
                    instant=True,
                ),
            ),
            kind="bargauge",
            unit="short",
            width=6,
        ),
        Panel(
            "Fallbacks by reason",
            "Nodes scored without usable telemetry (priced at their worst state) per second.",
            (
                Target(
                    "sum by (reason) (rate(kubejoule_scheduler_fallbacks_total[$__rate_interval]))",
                    "{{reason}}",
                ),
            ),
            unit="short",
        ),
        Panel(
            "Telemetry age per node",
            "Age of the newest telemetry the scheduler holds for each node; "
            "past max_staleness_seconds (30 s) the node is priced at its worst state.",
            (Target("max by (node) (kubejoule_scheduler_telemetry_age_seconds)", "{{node}}"),),
            unit="s",
        ),
        Panel(
            "Telemetry errors",
            "Telemetry refresh errors since start, by source and kind.",
            (
                Target(
                    "sum by (source, kind) (kubejoule_scheduler_telemetry_errors)",
                    "{{source}} {{kind}}",
                ),
            ),
            unit="short",
        ),
        Panel(
            "Extender latency",
            "p50 and p99 time to answer kube-scheduler, by verb.",
            (
                Target(
                    "histogram_quantile(0.99, sum by (le, verb) "
                    "(rate(kubejoule_extender_request_duration_seconds_bucket[$__rate_interval])))",
                    "p99 {{verb}}",
                ),
                Target(
                    "histogram_quantile(0.5, sum by (le, verb) "
                    "(rate(kubejoule_extender_request_duration_seconds_bucket[$__rate_interval])))",
                    "p50 {{verb}}",
                ),
            ),
            unit="s",
        ),
        Panel(
            "Extender requests",
            "Requests per second by verb and HTTP status.",
            (
                Target(
                    "sum by (verb, code) (rate(kubejoule_extender_requests_total[$__rate_interval]))",
                    "{{verb}} {{code}}",
                ),
            ),
            unit="reqps",
        ),
        Panel(
            "Nodes filtered by power cap",
            "Nodes a power cap excluded (active) or would have (shadow).",
            (
                Target(
                    "sum by (mode) (rate(kubejoule_extender_filtered_nodes_total[$__rate_interval]))",
                    "{{mode}}",
                ),
            ),
            unit="short",
        ),
        Panel(
            "Scheduling latency",
            "p99 from taking a pod off the queue to its binding's answer.",
            (
                Target(
                    "histogram_quantile(0.99, sum by (le) "
                    "(rate(kubejoule_scheduler_e2e_scheduling_duration_seconds_bucket[$__rate_interval])))",
                    "p99",
                ),
            ),
            unit="s",
        ),
        Panel(
            "Pending pods",
            "Pods waiting in the standalone scheduler's queue, by sub-queue.",
            (Target("sum by (queue) (kubejoule_scheduler_pending_pods)", "{{queue}}"),),
            unit="short",
        ),
        Panel(
            "Binding errors",
            "Failed binding calls per second, by kind.",
            (
                Target(
                    "sum by (kind) (rate(kubejoule_scheduler_binding_errors_total[$__rate_interval]))",
                    "{{kind}}",
                ),
            ),
            unit="short",
        ),
        Panel(
            "Leader",
            "1 for the replica holding the leader Lease.",
            (Target("max by (instance) (kubejoule_scheduler_leader)", "{{instance}}"),),
            unit="short",
        ),
    ),
)

DASHBOARDS = (CLUSTER, NODE, WORKLOADS, SCHEDULER)


def file_name(dashboard: Dashboard) -> str:
    return f"{dashboard.uid}.json"


def render(dashboard: Dashboard) -> str:
    return json.dumps(dashboard_json(dashboard), indent=2, sort_keys=False) + "\n"


def main() -> int:
    for directory in (DASHBOARD_DIR, CHART_DASHBOARD_DIR):
        directory.mkdir(parents=True, exist_ok=True)
        for dashboard in DASHBOARDS:
            (directory / file_name(dashboard)).write_text(render(dashboard))
            print(f"wrote {directory / file_name(dashboard)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
