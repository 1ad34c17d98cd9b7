"""The Snapshot: one immutable value per interval, the only contract between measuring and
exporting. Exporters (JSON, Prometheus, the terminal view) read it and never touch the host.

`to_record()` gives the JSON sample record, schema `kubejoule.sample/v1` (DESIGN.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from agent.device.energy import zone_kind
from agent.device.gaps import GAP_IMPLAUSIBLE, Gap, Subject
from agent.monitor.gpu_power import GpuPower

SCHEMA = "kubejoule.sample/v1"

SOURCE_RAPL = "rapl"
SOURCE_ESTIMATED = "estimated"
SOURCE_PLATFORM = "platform"  # the BMC's reading of the whole platform (agent/device/platform.py)
SOURCE_HOST = "host"  # a VM's share measured on its host (agent/device/host_energy.py)
SOURCE_NONE = "none"

IDLE_FROM_UTILIZATION = "utilization"
IDLE_FROM_CALIBRATION = "calibration"


@dataclass(frozen=True)
class ZonePower:
    zone: str  # the zone's name, e.g. "package-0", "dram", "psys"
    zone_id: str  # the powercap directory name, e.g. "intel-rapl:0:2"
    socket: int | None
    path: str  # path under <sysfs>, e.g. "class/powercap/intel-rapl:0:2"
    watts: float | None
    energy_joules: float | None  # energy in this interval; None on a gap
    # its kind, the `zone` label of its series (package-0 and package-1-die-0 are `package`): from
    # its name, once, where the zone is measured
    kind: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", zone_kind(self.zone))

    def to_record(self) -> dict[str, object]:
        return {"zone": self.zone, "socket": self.socket, "path": self.path, "watts": self.watts}


@dataclass(frozen=True)
class ContainerPower:
    id: str
    cpu_seconds: float | None  # None: unknown this interval (a gap says why)
    watts: float | None
    name: str | None = None

    def to_record(self) -> dict[str, object]:
        return {"id": self.id, "cpu_seconds": self.cpu_seconds, "watts": self.watts}


@dataclass(frozen=True)
class PodPower:
    uid: str
    qos: str | None
    cpu_seconds: float | None  # None: unknown this interval (a gap says why)
    watts: float | None  # its share of the CPU side (component "cpu")
    containers: tuple[ContainerPower, ...] = ()
    namespace: str | None = None
    name: str | None = None
    gpu_watts: float | None = None  # its share of the GPUs (component "gpu"); None: none, or unknown
    gpu: bool = False  # it holds or used a GPU: then gpu_watts None means unknown (a gap says why)

    def to_record(self) -> dict[str, object]:
        record: dict[str, object] = {
            "uid": self.uid,
            "namespace": self.namespace,
            "name": self.name,
            "qos": self.qos,
            "cpu_seconds": self.cpu_seconds,
            "watts": self.watts,
            "containers": [c.to_record() for c in self.containers],
        }
        if self.gpu:
            record["gpu_watts"] = self.gpu_watts
        return record


@dataclass(frozen=True)
class VMPower:
    name: str
    uuid: str | None
    pid: int
    pod_uid: str | None
    cpu_seconds: float | None  # None: its process could not be read this interval
    watts: float | None

    def to_record(self) -> dict[str, object]:
        return {
            "name": self.name,
            "uuid": self.uuid,
            "pid": self.pid,
            "pod_uid": self.pod_uid,
            "cpu_seconds": self.cpu_seconds,
            "watts": self.watts,
        }


@dataclass(frozen=True)
class ProcessPower:
    pid: int
    comm: str
    cpu_seconds: float
    watts: float | None

    def to_record(self) -> dict[str, object]:
        return {"pid": self.pid, "comm": self.comm, "cpu_seconds": self.cpu_seconds, "watts": self.watts}


@dataclass(frozen=True)
class PlatformPower:
    """The BMC's reading of the whole platform and what is inside it (agent/monitor/composition.py)."""

    watts: float | None  # None: not used this interval (a `platform` gap says why)
    age_seconds: float | None
    reading: str | None  # "EnvironmentMetrics" (PowerWatts) or "PowerControl" (PowerConsumedWatts)
    chassis: str | None  # the chassis' Redfish path
    other_watts: float | None  # platform − CPU side − GPUs: fans, power supplies, disks, NICs
    cpu_watts: float | None  # the CPU side inside it (RAPL, or estimated)
    gpu_watts: float | None  # the GPUs inside it
    energy_kwh: float | None = None  # the BMC's own energy counter, where it has one

    def to_record(self) -> dict[str, object]:
        return {"watts": self.watts, "age_seconds": self.age_seconds, "reading": self.reading,
                "chassis": self.chassis, "other_watts": self.other_watts, "cpu_watts": self.cpu_watts,
                "gpu_watts": self.gpu_watts, "energy_kwh": self.energy_kwh}


@dataclass(frozen=True)
class Snapshot:
    """What one interval measured. Watts are None when unknown — never 0 in their place."""

    node: str
    interval_seconds: float
    timestamp: float  # wall-clock seconds (time.time()) at the end of the interval
    source: str  # "rapl" | "platform" | "host" | "estimated" | "none"
    node_watts: float | None
    idle_watts: float | None
    active_watts: float | None
    idle_source: str
    cpu_utilization: float | None
    busy_cpu_seconds: float | None
    zones: tuple[ZonePower, ...] = ()
    pods: tuple[PodPower, ...] = ()
    host_watts: float | None = None
    vms: tuple[VMPower, ...] = ()
    processes: tuple[ProcessPower, ...] = ()
    gaps: tuple[Gap, ...] = ()
    # With a process level: every process that used CPU in the interval, busiest first
    # (`processes` are the first N of them), and the pids alive at its end — so the process
    # energy counters are complete and leave with their process. Not in the record.
    busy_processes: tuple[ProcessPower, ...] = ()
    live_pids: frozenset[int] = frozenset()
    # Attribution bookkeeping, counted by the exporter.
    invariant_breached: bool = False
    skew_scaled: bool = False
    # GPUs (one per device) and the platform reading, when the agent reads them; GPU power that
    # could not be split between pods, host and idle.
    gpus: tuple[GpuPower, ...] = ()
    platform: PlatformPower | None = None
    gpu_unattributed_watts: float | None = None
    # What later parts add, each its own section of the record when present: wall power from the
    # power profile's correction (always an estimate), Metrics Server usage
    # (agent/kube/metrics_server.py) and network counters (agent/monitor/network_section.py),
    # the last two in record form.
    wall_watts: float | None = None
    # With source "estimated" from published coefficients: their provenance (`ccf:aws:m5.xlarge`)
    estimate: str | None = None
    metrics_server: dict[str, object] | None = None
    network: dict[str, object] | None = None

    @property
    def node_energy_joules(self) -> float | None:
        if self.node_watts is None:
            return None
        return self.node_watts * self.interval_seconds

    def to_record(self) -> dict[str, object]:
        record: dict[str, object] = {
            "schema": SCHEMA,
            "node": self.node,
            "interval_seconds": self.interval_seconds,
            "source": self.source,
            **({"estimate": self.estimate} if self.estimate is not None else {}),
            "node_watts": self.node_watts,
            "idle_watts": self.idle_watts,
            "active_watts": self.active_watts,
            "idle_source": self.idle_source,
            "cpu_utilization": self.cpu_utilization,
            "zones": [z.to_record() for z in self.zones],
            "pods": [p.to_record() for p in self.pods],
            "host_watts": self.host_watts,
            "vms": [v.to_record() for v in self.vms],
            "processes": [p.to_record() for p in self.processes],
            "gaps": [g.to_record() for g in self.gaps],
        }
        if self.gpus:
            record["gpus"] = [g.to_record() for g in self.gpus]
            record["gpu_unattributed_watts"] = self.gpu_unattributed_watts
        if self.platform is not None:
            record["platform"] = self.platform.to_record()
        if self.wall_watts is not None:
            record["wall_watts"] = self.wall_watts
        if self.metrics_server is not None:
            record["metrics_server"] = self.metrics_server
        if self.network is not None:
            record["network"] = self.network
        return strict_record(record)


def strict_record(record: dict[str, object]) -> dict[str, object]:
    """The record with every non-finite number (NaN, ±Infinity) replaced by null and a gap
    saying where, so it is strict JSON whatever a bug upstream let through. The sampler's own
    checks should leave nothing for this to do."""
    found: list[str] = []

    def clean(value: object, where: str) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            found.append(where)
            return None
        if isinstance(value, dict):
            return {k: clean(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    cleaned = {k: clean(v, k) for k, v in record.items()}
    gaps = cleaned["gaps"]
    assert isinstance(gaps, list)  # every record has its gaps
    for where in found:
        gaps.append(Gap(Subject.FIELD, "not a finite number (NaN or infinity)", GAP_IMPLAUSIBLE, name=where).to_record())
    return cleaned


__all__ = [
    "SCHEMA",
    "ContainerPower",
    "PlatformPower",
    "PodPower",
    "ProcessPower",
    "Snapshot",
    "VMPower",
    "ZonePower",
]
