"""The agents' Prometheus exposition (`kubejoule_*` series) folded into per-node samples.

A node's curve is the watts the node draws, not only what its calibration measured. The agent's
node power is the CPU side plus its GPUs, or the BMC's platform reading (`source="platform"`,
the CPU side and the GPUs inside it: agent/monitor/composition.py), while the exported curve
(`kubejoule_node_power_model_watts`) is what the calibration fitted, its `reading` label saying
against what. So the curve a sample carries is:

* `reading="platform"` (fitted against the BMC): the curve as exported; the GPUs and the rest of
  the platform are inside it (at the draw they had while it was fitted);
* `reading="rapl"` (the CPU side; an agent without the label): the curve plus what the node
  draws outside the CPU side at the sample — Σ `kubejoule_gpu_power_watts` (each GPU once), and
  where node power is the platform's, `kubejoule_node_platform_other_watts` (fans, power
  supplies, disks) — rounded to the watt (so a scorer that remembers curves by their points
  keeps at most one per watt of GPU power per calibration); nodes without GPUs or a platform
  reading unchanged;
* withheld (None) when that part is unknown — a node with GPUs (`kubejoule_gpu_info`) whose node
  power the agent could not give, or a platform node without its rest — so such a node is priced
  as one without a curve (at its worst, with the last curve seen), never as a CPU-only node.

The energy plugin, the expander's curves of running nodes and the rebalancer all price the
curve, so a GPU node's idle GPUs are a cost of keeping it on, with one formula for them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Protocol, overload

from prometheus_client.parser import text_string_to_metric_families

from common.curves import POINT_COUNT
from scheduler.domain.model import NODE_BOUND_OWNER_KINDS, NodeTelemetry
from scheduler.telemetry.samples import FetchResult, NodeSample

M_POWER = "kubejoule_node_power_watts"
M_UTILIZATION = "kubejoule_node_cpu_utilization_ratio"
M_CURVE = "kubejoule_node_power_model_watts"
M_TIMESTAMP = "kubejoule_sample_timestamp_seconds"
M_POD_POWER = "kubejoule_pod_power_watts"
M_POD_ENERGY = "kubejoule_pod_energy_joules_total"
M_GPU_POWER = "kubejoule_gpu_power_watts"
M_GPU_INFO = "kubejoule_gpu_info"
M_PLATFORM_OTHER = "kubejoule_node_platform_other_watts"

READING_RAPL = "rapl"  # the curve's `reading` label: what the calibration measured
READING_PLATFORM = "platform"
SOURCE_PLATFORM = "platform"

# When a node reports several power series, the measured one is preferred (equal ranks: the
# later series, the newest in Prometheus' answers, wins). `host`: a VM node's share measured on
# its host (the agent's --host-energy), a measurement like RAPL's.
_SOURCE_RANK = {"rapl": 0, "platform": 0, "host": 0, "estimated": 1, "none": 2}


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
    curve_reading: str = READING_RAPL
    gpu_watts: dict[str, float] = field(default_factory=dict)  # by GPU (UUID, else index)
    gpus: set[str] = field(default_factory=set)  # every GPU the agent lists (kubejoule_gpu_info)
    gpu_total: float | None = None  # Σ GPU watts and GPU count from a query (Prometheus)
    gpu_count: int = 0
    gpu_unknown: bool = False  # a GPU series with a value that is not a number
    platform_other: float | None = None


def _has_gpus(part: _Partial) -> bool:
    return bool(part.gpus or part.gpu_watts or part.gpu_count or part.gpu_total is not None)


def _outside_curve(part: _Partial) -> float | None:
    """Watts the node draws outside its exported curve at the sample (module docstring), or
    None when they are unknown."""
    if part.curve_reading == READING_PLATFORM:
        return 0.0
    if part.gpu_unknown:
        return None
    if part.watts is None:
        return None if _has_gpus(part) else 0.0
    outside = sum(part.gpu_watts.values()) + (part.gpu_total or 0.0)
    if part.source == SOURCE_PLATFORM:
        if part.platform_other is None:
            return None
        outside += part.platform_other
    return float(round(outside))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


# Physical bounds of what a node and a GPU can draw (the agent's own ceilings: a platform's
# 20 kW, a GPU's 2 kW). A reading outside them is refused (None: unknown, priced at the node's
# worst), never believed: telemetry drives placement and evictions, and the agents are not
# authenticated to the scheduler.
NODE_CEILING_WATTS = 20_000.0
GPU_CEILING_WATTS = 2_000.0
UTILIZATION_CEILING = 1.5  # u past 1 is a sampling skew; far past it, not a node's


def _watts(value: float, ceiling: float = NODE_CEILING_WATTS) -> float | None:
    return value if math.isfinite(value) and 0.0 <= value <= ceiling else None


def _utilization(value: float) -> float | None:
    return value if math.isfinite(value) and 0.0 <= value <= UTILIZATION_CEILING else None


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

    @overload
    def get(self, key: str, /) -> str | None: ...
    @overload
    def get(self, key: str, default: str, /) -> str: ...


class SeriesFolder:
    """Folds `kubejoule_*` series (name, labels, value) into per-node samples."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Partial] = {}

    def _part(self, labels: Labels) -> _Partial | None:
        """The series' node's partial sample (new if it has none yet); None without a node."""
        node = labels.get("node")
        if not node:
            return None
        part = self.nodes.get(node)
        if part is None:
            part = self.nodes[node] = _Partial()
        return part

    def add(self, name: str, labels: Labels, value: float) -> None:
        part = self._part(labels)
        if part is None:
            return
        if name == M_POWER:
            source = labels.get("source", "none")
            watts = _watts(value)
            if watts is not None and _SOURCE_RANK.get(source, 3) <= _SOURCE_RANK.get(part.source, 3):
                part.watts, part.source = watts, source
        elif name == M_UTILIZATION:
            part.utilization = _utilization(value)
        elif name == M_TIMESTAMP:
            part.sample_time = _finite(value)
        elif name == M_CURVE:
            level = _curve_level(labels.get("utilization", ""))
            watts = _watts(value)
            if level is not None and watts is not None:
                part.curve[level] = watts
            part.curve_reading = labels.get("reading") or READING_RAPL
        elif name == M_GPU_POWER:
            watts = _watts(value, GPU_CEILING_WATTS)
            gpu = labels.get("gpu_uuid") or labels.get("gpu") or ""
            part.gpus.add(gpu)
            if watts is None:
                part.gpu_unknown = True
            else:
                part.gpu_watts[gpu] = watts  # two jobs scraping one agent: each GPU once
        elif name == M_GPU_INFO:
            part.gpus.add(labels.get("gpu_uuid") or labels.get("gpu") or "")
        elif name == M_PLATFORM_OTHER:
            part.platform_other = _watts(value)
        elif name in (M_POD_POWER, M_POD_ENERGY):
            pod = labels.get("pod_uid") or f"{labels.get('namespace')}/{labels.get('pod')}"
            part.pods.add(pod)
            if labels.get("owner_kind") in NODE_BOUND_OWNER_KINDS:
                part.daemon_pods.add(pod)

    def add_pod_count(self, labels: Labels, count: float) -> None:
        """A node's pods counted elsewhere (`count by (node, owner_kind)` in PromQL)."""
        if not math.isfinite(count) or count < 0:
            return
        part = self._part(labels)
        if part is None:
            return
        part.pod_total += int(count)
        if labels.get("owner_kind") in NODE_BOUND_OWNER_KINDS:
            part.daemon_total += int(count)

    def add_gpu_total(self, labels: Labels, watts: float, count: float | None = None) -> None:
        """A node's GPU watts summed elsewhere (`sum by (node)` in PromQL, each GPU once), or
        with `count` its GPUs counted (`kubejoule_gpu_info`)."""
        part = self._part(labels)
        if part is None:
            return
        if count is not None:
            part.gpu_count += int(count) if math.isfinite(count) and count > 0 else 0
            return
        if _watts(watts) is None:
            part.gpu_unknown = True
            return
        part.gpu_total = (part.gpu_total or 0.0) + watts

    def nodes_with_gpus(self) -> set[str]:
        return {node for node, part in self.nodes.items() if _has_gpus(part)}

    def gpus_unknown(self, node: str) -> None:
        """The GPUs of `node` (which has some) could not be read this round."""
        part = self.nodes.get(node)
        if part is not None:
            part.gpu_unknown = True

    def set_curve(self, node: str, curve: dict[int, float], reading: str = READING_RAPL) -> None:
        """A curve read earlier, for a node this round has series of (others are left out)."""
        part = self.nodes.get(node)
        if part is not None and not part.curve:
            part.curve = dict(curve)
            part.curve_reading = reading

    def samples(self, source_name: str) -> FetchResult:
        result = FetchResult()
        for node, part in self.nodes.items():
            if part.sample_time is None:
                # Without the agent's sample time the age of the numbers is unknown: unusable.
                result.errors.append(("no_timestamp", node))
                continue
            curve = _POINTS(part.curve) if len(part.curve) == POINT_COUNT else None
            if curve is not None:
                outside = _outside_curve(part)
                if outside is None:
                    curve = None
                    result.errors.append(("no_whole_curve", node))
                elif outside:
                    curve = tuple(w + outside for w in curve)
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
    folder = SeriesFolder()
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("kubejoule_"):
            continue
        for sample in family.samples:
            folder.add(sample.name, sample.labels, float(sample.value))
    return folder.samples(source_name)
