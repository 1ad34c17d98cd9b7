"""Simulator inputs: node groups (YAML), workload traces (CSV), bundled scenarios.

Node groups, as DESIGN.md specifies — a YAML list of

    - name: gen2010
      count: 4
      cpu_cores: 24
      memory_gib: 12
      power: {idle_watts: 66, max_watts: 247, curve: fan, r: 1.4}   # or linear
      # or   power: {points: [66, 107, 120, ...]}                    # 11 watts values, 0%..100%
      max_pods: 110        # optional, kubelet's default
      source: "..."        # optional free text: where the curve comes from
      min_count: 1         # optional, under --autoscaler: nodes that are always on (default 0)
      initial_count: 2     # optional: nodes on at t = 0 (default min_count)
      standby_watts: 4     # optional: drawn while powered off (BMC, PSU standby; default 0)
      priority: 10         # optional: the `priority` expander prefers higher (default: file
                           # order, the first group highest)

`count` is the group's maximum size. DaemonSets (`load_daemonsets`): a YAML list of
`{name, cpu_request, cpu_usage, mem_request_gib}` run on every powered-on node.

Traces and PodDisruptionBudgets: rl/simulation/traces/trace.py (their names are re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from common.curves import PowerCurve
from rl.simulation.traces.headline import HEADLINE_POLICIES
from rl.simulation.traces.kubeobjects import GIB_BYTES, PodObject, pod_object
from rl.simulation.traces.trace import (  # noqa: F401  (re-exported: the trace format's names)
    TRACE_HEADER,
    TRACE_OPTIONAL,
    PdbSpec,
    PodSpec,
    ScenarioError,
    format_pdbs,
    format_trace,
    load_pdbs,
    load_trace,
    parse_number,
    parse_pdbs,
    parse_trace,
)
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.cluster_defaults import (
    BOOT_SECONDS,
    SCALE_DOWN_DELAY_AFTER_ADD_S,
    SCALE_DOWN_UNNEEDED_S,
    SCALE_DOWN_UTILIZATION_THRESHOLD,
    SCAN_INTERVAL_S,
)
from scheduler.domain.model import NodeInfo, PodInfo, Resources

DEFAULT_MAX_PODS = 110  # kubelet's --max-pods default


@dataclass(frozen=True)
class NodeSpec:
    """One simulated node."""

    name: str
    group: str
    cpu_cores: float
    memory_gib: float
    curve: PowerCurve
    max_pods: int = DEFAULT_MAX_PODS
    ordinal: int = 0  # position within its group (nodes 0 … min_count − 1 never power off)
    min_count: int = 0  # the group's min_count (cluster-autoscaler's minimum size)
    initial_count: int | None = None  # the group's nodes on at t = 0 (None: min_count)
    standby_watts: float = 0.0  # drawn while powered off
    priority: int = 0  # the group's priority for the `priority` expander (higher wins)

    @property
    def always_on(self) -> bool:
        """Below the group's min_count: never powered off."""
        return self.ordinal < self.min_count

    @property
    def initially_on(self) -> bool:
        """On at t = 0 under autoscaler semantics."""
        initial = self.min_count if self.initial_count is None else self.initial_count
        return self.ordinal < initial

    def node_info(self) -> NodeInfo:
        return NodeInfo(
            name=self.name,
            allocatable=Resources(
                cpu_millicores=round(self.cpu_cores * 1000),
                memory_bytes=round(self.memory_gib * GIB_BYTES),
                pods=self.max_pods,
            ),
            labels=(("kubejoule.io/node-group", self.group),),
        )


def parse_node_groups(data: object) -> list[NodeSpec]:
    """Nodes from the parsed YAML (a list of groups), in file order, named `<group>-<i>`."""
    if not isinstance(data, list) or not data:
        raise ScenarioError("node groups: expected a non-empty YAML list of groups")
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for position, group in enumerate(data):
        if not isinstance(group, Mapping):
            raise ScenarioError(f"node group #{position}: expected a mapping")
        name = str(group.get("name") or "")
        if not name or name in seen:
            raise ScenarioError(f"node group #{position}: missing or duplicate name {name!r}")
        seen.add(name)
        count = group.get("count", 1)
        if not isinstance(count, int) or count < 0:
            raise ScenarioError(f"node group {name}: count must be a non-negative integer")
        cores = parse_number(group.get("cpu_cores"), f"node group {name}: cpu_cores", strict=True)
        memory = parse_number(group.get("memory_gib"), f"node group {name}: memory_gib", strict=True)
        power = group.get("power")
        if not isinstance(power, Mapping):
            raise ScenarioError(f"node group {name}: power must be a mapping")
        try:
            curve = PowerCurve.from_mapping(power)
        except (KeyError, ValueError, TypeError) as exc:
            raise ScenarioError(f"node group {name}: bad power block: {exc}") from exc
        points = curve.as_points()
        if any(b < a for a, b in zip(points, points[1:], strict=False)) or points[0] < 0:
            raise ScenarioError(f"node group {name}: power must not fall as load rises")
        max_pods = int(group.get("max_pods", DEFAULT_MAX_PODS))
        min_count = _count(group, "min_count", name, 0, count)
        initial = _count(group, "initial_count", name, min_count, count)
        if initial < min_count:
            raise ScenarioError(f"node group {name}: initial_count must be >= min_count")
        standby = parse_number(group.get("standby_watts", 0.0), f"node group {name}: standby_watts")
        priority = group.get("priority", len(data) - position)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ScenarioError(f"node group {name}: priority must be an integer")
        for i in range(count):
            nodes.append(
                NodeSpec(
                    f"{name}-{i}", name, cores, memory, curve, max_pods,
                    ordinal=i, min_count=min_count,
                    initial_count=initial if "initial_count" in group else None,
                    standby_watts=standby, priority=priority,
                )
            )
    if not nodes:
        raise ScenarioError("node groups: no nodes (every count is 0)")
    return nodes


def _count(group: Mapping[str, object], key: str, name: str, default: int, maximum: int) -> int:
    value = group.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= maximum:
        raise ScenarioError(f"node group {name}: {key} must be an integer in 0 … count ({maximum})")
    return value


def _load_yaml(path: str | Path) -> object:
    text = Path(path).read_text()
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not YAML: {exc}") from exc


def load_node_groups(path: str | Path) -> list[NodeSpec]:
    return parse_node_groups(_load_yaml(path))


@dataclass(frozen=True)
class DaemonSetSpec:
    """A DaemonSet pod that runs on every powered-on node (CPU in cores, memory in GiB)."""

    name: str
    cpu_request: float
    cpu_usage: float
    mem_request_gib: float = 0.0

    def pod_object(self, node_name: str | None = None) -> PodObject:
        """The DaemonSet's pod (on `node_name`) as the Kubernetes API would show it."""
        name = self.name if node_name is None else f"{self.name}-{node_name}"
        return pod_object(
            name, f"ds-{name}", self.cpu_request, self.mem_request_gib, "DaemonSet", self.name,
            node_name=node_name,
        )

    def pod_info(self) -> PodInfo:
        return pod_info_from_k8s(self.pod_object())

    def requests(self) -> Resources:
        return self.pod_info().requests


DEFAULT_DAEMONSETS_FILE = "daemonsets-default.yaml"


def parse_daemonsets(data: object) -> list[DaemonSetSpec]:
    """DaemonSets from the parsed YAML: a list of {name, cpu_request, cpu_usage, mem_request_gib};
    an empty list (or null) for none."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise ScenarioError("daemonsets: expected a YAML list")
    specs: list[DaemonSetSpec] = []
    for position, item in enumerate(data):
        if not isinstance(item, Mapping) or not item.get("name"):
            raise ScenarioError(f"daemonset #{position}: expected a mapping with a name")
        name = str(item["name"])
        specs.append(
            DaemonSetSpec(
                name,
                parse_number(item.get("cpu_request", 0.0), f"daemonset {name}: cpu_request"),
                parse_number(item.get("cpu_usage", 0.0), f"daemonset {name}: cpu_usage"),
                parse_number(item.get("mem_request_gib", 0.0), f"daemonset {name}: mem_request_gib"),
            )
        )
    if len({d.name for d in specs}) != len(specs):
        raise ScenarioError("daemonsets: duplicate name")
    return specs


def load_daemonsets(path: str | Path) -> list[DaemonSetSpec]:
    return parse_daemonsets(_load_yaml(path))


# --- bundled scenarios ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """A bundled benchmark scenario: files in rl/scenarios/ plus the power-off settings."""

    name: str
    nodes_file: str
    trace_file: str
    description: str
    power_off_after_s: float | None = None  # the visible-power-off ablation
    boot_seconds: float = BOOT_SECONDS
    boot_joules: float | None = None
    autoscaler: bool = False  # cluster-autoscaler semantics (rl/simulation/autoscaler/scan.py)
    scan_interval_s: float = SCAN_INTERVAL_S
    scale_down_unneeded_s: float = SCALE_DOWN_UNNEEDED_S
    daemonsets_file: str = DEFAULT_DAEMONSETS_FILE
    policies: tuple[str, ...] = ()  # run when --policies is not given (else every builtin)
    pdbs_file: str | None = None  # the trace's PodDisruptionBudgets


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "homogeneous",
            "homogeneous.yaml",
            "trace-homogeneous.csv",
            "Identical 16-core nodes, Fan et al. curve (r = 1.4); nodes never power off.",
        ),
        Scenario(
            "heterogeneous",
            "heterogeneous.yaml",
            "trace-heterogeneous.csv",
            "Four server generations with SPECpower_ssj2008 curves; nodes never power off.",
        ),
        Scenario(
            "heterogeneous-poweroff",
            "heterogeneous.yaml",
            "trace-heterogeneous.csv",
            "ABLATION (the old headline): the heterogeneous cluster with powered-off nodes "
            f"visible to the scheduler; a node empty for {SCALE_DOWN_UNNEEDED_S / 60:g} min powers off, "
            f"boots in {BOOT_SECONDS:g} s.",
            power_off_after_s=SCALE_DOWN_UNNEEDED_S,
            boot_seconds=BOOT_SECONDS,
        ),
        Scenario(
            "heterogeneous-autoscaler",
            "heterogeneous-autoscaler.yaml",
            "trace-heterogeneous.csv",
            "The headline: the four server generations as autoscaled node groups (one node of "
            "each of the two big kinds always on), DaemonSets on every node, cluster-autoscaler "
            f"as it ships ({SCAN_INTERVAL_S:g} s scans, least-waste, utilization scale-down at "
            f"{SCALE_DOWN_UTILIZATION_THRESHOLD:g} after {SCALE_DOWN_UNNEEDED_S / 60:g} min unneeded, "
            f"{SCALE_DOWN_DELAY_AFTER_ADD_S / 60:g} min after a scale-up), the services' PDBs, "
            f"boots of {BOOT_SECONDS:g} s.",
            autoscaler=True,
            boot_seconds=BOOT_SECONDS,
            policies=HEADLINE_POLICIES,
            pdbs_file="trace-heterogeneous-pdbs.yaml",
        ),
        Scenario(
            "modern-autoscaler",
            "modern-autoscaler.yaml",
            "trace-heterogeneous.csv",
            "The headline on servers people run now: node groups from SPECpower_ssj2008 results "
            "published 2023-2024 (EPYC 9654P, Xeon 8581V, Xeon 6414U, EPYC 4584PX; linear "
            "between the published idle and 100 % points) beside a 2019 Cascade Lake group "
            "(one node always on); trace, PDBs, DaemonSets and cluster-autoscaler as "
            "heterogeneous-autoscaler's, so only the hardware differs.",
            autoscaler=True,
            boot_seconds=BOOT_SECONDS,
            policies=HEADLINE_POLICIES,
            pdbs_file="trace-heterogeneous-pdbs.yaml",
        ),
    )
}


def scenario_path(filename: str) -> Path:
    """Path of a file bundled in rl/scenarios/ (works from a checkout and an installed wheel)."""
    return Path(str(resources.files("rl").joinpath("scenarios", filename)))
