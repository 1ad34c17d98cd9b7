"""The agents' Prometheus exposition (`kubejoule_*` series) folded into per-node samples."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

from prometheus_client.parser import text_string_to_metric_families

from agent.curves import POINT_COUNT
from scheduler.model import NODE_BOUND_OWNER_KINDS, NodeTelemetry
from scheduler.telemetry.samples import FetchResult, NodeSample

M_POWER = "kubejoule_node_power_watts"
M_UTILIZATION = "kubejoule_node_cpu_utilization_ratio"
M_CURVE = "kubejoule_node_power_model_watts"
M_TIMESTAMP = "kubejoule_sample_timestamp_seconds"
M_POD_POWER = "kubejoule_pod_power_watts"
M_POD_ENERGY = "kubejoule_pod_energy_joules_total"

# When a node reports several power series, the measured one is preferred.
_SOURCE_RANK = {"rapl": 0, "estimated": 1, "none": 2}


@dataclass
class _Partial:
    watts: float | None = None
    source: str = "none"
    utilization: float | None = None
    sample_time: float | None = None
    curve: dict[int, float] = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)
    daemon_pods: set[str] = field(default_factory=set)
    pod_total: int = 0  # pods counted by a query (Prometheus), besides the series in `pods`
    daemon_total: int = 0


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _curve_level(label: str) -> int | None:
    """The 0..10 index of a curve point's `utilization` label ("0.3", or "30" as percent)."""
    try:
        u = float(label)
    except ValueError:
        return None
    if u > 1.0:
        u /= 100.0
    index = round(u * (POINT_COUNT - 1))
    if abs(index - u * (POINT_COUNT - 1)) > 1e-6 or not 0 <= index < POINT_COUNT:
        return None
    return index


_POINTS = itemgetter(*range(POINT_COUNT))  # a curve's points by level, at C speed


class Labels(Protocol):
    """A series' labels: a dict, or the Prometheus source's decoded struct."""

    def get(self, key: str, default: Any = None, /) -> Any: ...


class SeriesFolder:
    """Folds `kubejoule_*` series (name, labels, value) into per-node samples."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Partial] = {}

    def add(self, name: str, labels: Labels, value: float) -> None:
        node = labels.get("node")
        if not node:
            return
        part = self.nodes.get(node)
        if part is None:
            part = self.nodes[node] = _Partial()
        if name == M_POWER:
            source = labels.get("source", "none")
            watts = _finite(value)
            if watts is not None and _SOURCE_RANK.get(source, 3) <= _SOURCE_RANK.get(part.source, 3):
                part.watts, part.source = watts, source
        elif name == M_UTILIZATION:
            part.utilization = _finite(value)
        elif name == M_TIMESTAMP:
            part.sample_time = _finite(value)
        elif name == M_CURVE:
            level = _curve_level(labels.get("utilization", ""))
            watts = _finite(value)
            if level is not None and watts is not None:
                part.curve[level] = watts
        elif name in (M_POD_POWER, M_POD_ENERGY):
            pod = labels.get("pod_uid") or f"{labels.get('namespace')}/{labels.get('pod')}"
            part.pods.add(pod)
            if labels.get("owner_kind") in NODE_BOUND_OWNER_KINDS:
                part.daemon_pods.add(pod)

    def add_pod_count(self, labels: Labels, count: float) -> None:
        """A node's pods counted elsewhere (`count by (node, owner_kind)` in PromQL)."""
        node = labels.get("node")
        if not node or not math.isfinite(count) or count < 0:
            return
        part = self.nodes.get(node)
        if part is None:
            part = self.nodes[node] = _Partial()
        part.pod_total += int(count)
        if labels.get("owner_kind") in NODE_BOUND_OWNER_KINDS:
            part.daemon_total += int(count)

    def set_curve(self, node: str, curve: dict[int, float]) -> None:
        """A curve read earlier, for a node this round has series of (others are left out)."""
        part = self.nodes.get(node)
        if part is not None and not part.curve:
            part.curve = dict(curve)

    def samples(self, source_name: str) -> FetchResult:
        result = FetchResult()
        for node, part in self.nodes.items():
            if part.sample_time is None:
                # Without the agent's sample time the age of the numbers is unknown: unusable.
                result.errors.append(("no_timestamp", node))
                continue
            curve = _POINTS(part.curve) if len(part.curve) == POINT_COUNT else None
            telemetry = NodeTelemetry(
                node=node,
                sample_time=part.sample_time,
                watts=part.watts,
                source=part.source if part.watts is not None else "none",
                utilization=part.utilization,
                curve_points=curve,
            )
            # Pod series exist only where power is known; without power the count is unknown.
            pod_count = len(part.pods) + part.pod_total if part.watts is not None else None
            daemons = len(part.daemon_pods) + part.daemon_total if pod_count is not None else 0
            result.samples[node] = NodeSample(telemetry, pod_count, source_name, daemons)
        return result


def parse_agent_metrics(text: str, source_name: str = "agents") -> FetchResult:
    """Node samples from a Prometheus text exposition of one or more agents."""
    collector = SeriesFolder()
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("kubejoule_"):
            continue
        for sample in family.samples:
            collector.add(sample.name, sample.labels, float(sample.value))
    return collector.samples(source_name)
