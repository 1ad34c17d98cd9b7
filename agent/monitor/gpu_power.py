"""GPU watts from two NVML reads, and their split between pods, the host and idle.

Per GPU (DESIGN.md, "GPUs"):

* power: the total-energy counter's delta (agent/device/energy.py's `energy_delta`, the one RAPL uses:
  a fall is a wrap at 2^64 mJ, a reset lands far above the ceiling) over the interval; where the
  counter is not supported, the mean of the two power readings (`method` "power"). An interval's
  power above `3 × the enforced power limit` (a usable hint: 1 W to 2 kW), else above 2 kW, is
  `implausible`. A GPU that supports neither reading is left out of node power, with a gap; one
  whose reading failed this interval (lost, an error) makes node power unknown.
* its holder: a GPU the kubelet allocated to one container (PodResources) is that pod's whole:
  its idle power too, since no one else can use it. A GPU shared by several (time-slicing
  replicas) or allocated to none is split by the SM share of each process NVML saw on it in the
  interval (pid → its pod through /proc/<pid>/cgroup; outside every pod: the host); what no
  process used is idle.
* what cannot be split is `unattributed`, never charged to anyone: a MIG or vGPU device (not
  supported yet), a GPU whose per-process samples failed, an allocation whose pod is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agent.device.energy import (
    CounterError,
    ImplausibleError,
    check_power,
    energy_delta,
    interval_ceiling_watts,
    mj_to_joules,
)
from agent.device.gaps import (
    GAP_IMPLAUSIBLE,
    GAP_INCOMPLETE,
    GAP_UNKNOWN,
    GAP_UNREADABLE,
    Gap,
    Subject,
)
from agent.device.gpu_source import GpuSample
from agent.device.nvml import ENERGY_COUNTER_RANGE_MJ, VIRTUALIZATION_WHOLE, GpuRead
from agent.device.podresources import Holder

# No GPU board draws more (NVIDIA B200 1000 W, AMD MI300X 750 W): without a usable power limit,
# an interval above this is not a reading.
GPU_CEILING_WATTS = 2_000.0
MIN_LIMIT_WATTS = 1.0

MODE_EXCLUSIVE = "exclusive"
MODE_SHARED = "shared"
MODE_MIG = "mig"
MODE_VGPU = "vgpu"


@dataclass(frozen=True)
class GpuPower:
    index: int
    uuid: str
    name: str
    watts: float | None
    method: str | None  # "energy" (the counter) or "power" (two readings); None when unknown
    mode: str  # exclusive | shared | mig | vgpu
    pods: tuple[tuple[str, float], ...] = ()  # (uid, watts) of the pods it is charged to
    host_watts: float = 0.0
    idle_watts: float = 0.0
    unattributed_watts: float = 0.0
    measurable: bool = True  # False: this GPU reports no power at all (left out of node power)

    def to_record(self) -> dict[str, object]:
        return {"index": self.index, "uuid": self.uuid, "name": self.name, "watts": self.watts,
                "method": self.method, "mode": self.mode}


@dataclass(frozen=True)
class GpuResult:
    devices: tuple[GpuPower, ...]
    watts: float | None  # Σ measurable GPUs; None when one of them is unknown this interval
    idle_watts: float
    host_watts: float
    unattributed_watts: float
    pod_watts: dict[str, float]  # uid → watts over every GPU it is charged on
    unknown_pods: frozenset[str]  # pods holding a GPU whose power is unknown
    gaps: tuple[Gap, ...]


def usable_limit_watts(limit_mw: int | None) -> float | None:
    """The enforced power limit as a plausibility hint: only a limit a GPU could have."""
    if limit_mw is None:
        return None
    watts = limit_mw / 1000.0
    return watts if MIN_LIMIT_WATTS <= watts <= GPU_CEILING_WATTS else None


def device_watts(before: GpuRead, after: GpuRead, interval_seconds: float) -> tuple[float | None, str | None, Gap | None]:
    """One GPU's watts over the interval, how it was measured, or the gap that says why not."""
    which = _which(after)
    for read in (after, before):
        if "device" in read.errors:
            return None, None, _gap(which, read.errors["device"], GAP_UNREADABLE)
    limit = usable_limit_watts(after.limit_mw)
    if before.energy_mj is not None and after.energy_mj is not None:
        fell = after.energy_mj < before.energy_mj
        try:
            joules = mj_to_joules(energy_delta(before.energy_mj, after.energy_mj, ENERGY_COUNTER_RANGE_MJ))
            check_power(joules, interval_seconds, interval_ceiling_watts(GPU_CEILING_WATTS, limit, fell))
        except ImplausibleError as exc:
            why = " (the counter went backwards: the driver was reloaded or the GPU reset)" if fell else ""
            return None, None, _gap(which, f"total energy counter: {exc}{why}", GAP_IMPLAUSIBLE)
        except CounterError as exc:
            return None, None, _gap(which, f"total energy counter: {exc}", GAP_UNKNOWN)
        return joules / interval_seconds, "energy", None
    if before.power_mw is not None and after.power_mw is not None:
        watts = (before.power_mw + after.power_mw) / 2000.0
        try:
            check_power(watts * interval_seconds, interval_seconds, GPU_CEILING_WATTS)  # a reading
        except ImplausibleError as exc:
            return None, None, _gap(which, f"power reading: {exc}", GAP_IMPLAUSIBLE)
        return watts, "power", None
    reasons = "; ".join(dict.fromkeys(r for read in (after, before) for r in read.errors.values()))
    return None, None, _gap(which, reasons or "no energy or power reading", GAP_UNREADABLE)


def measurable(read: GpuRead) -> bool:
    """False for a GPU that supports neither the energy counter nor the power reading."""
    return not {"energy", "power"} <= read.unsupported


def _gap(which: str, reason: str, kind: str) -> Gap:
    return Gap(Subject.GPU, reason, kind, name=which)


def _which(read: GpuRead) -> str:
    """A GPU's gap name: its index, and its uuid where known."""
    return f"{read.device.index}" + (f" ({read.device.uuid})" if read.device.uuid else "")


def _mode(read: GpuRead, holders: tuple[Holder, ...], replicas: bool) -> str:
    if read.mig:
        return MODE_MIG
    if read.virtualization is not None and read.virtualization not in VIRTUALIZATION_WHOLE:
        return MODE_VGPU
    return MODE_EXCLUSIVE if len(holders) == 1 and not replicas else MODE_SHARED


@dataclass
class _Split:
    pods: dict[str, float] = field(default_factory=dict)
    host: float = 0.0
    idle: float = 0.0
    unattributed: float = 0.0


def _by_processes(watts: float, read: GpuRead, sample: GpuSample, which: str, gaps: list[Gap]) -> _Split:
    """A shared GPU: each process's SM share of its power (scaled to fit when they add up to more
    than the whole), to the process's pod or the host; the rest is idle."""
    split = _Split()
    if read.processes is None:
        split.unattributed = watts
        gaps.append(_gap(which, f"{read.errors.get('processes', 'per-process utilization unknown')}: its "
                              f"{watts:.1f} W are not split between pods", GAP_INCOMPLETE))
        return split
    total = sum(p.sm_percent for p in read.processes)
    scale = 100.0 / total if total > 100.0 else 1.0
    used = 0.0
    for process in read.processes:
        share = watts * process.sm_percent * scale / 100.0
        used += share
        if process.pid not in sample.process_pods:
            split.unattributed += share
            gaps.append(_gap(which, f"process {process.pid} used it but exited before its pod could be read",
                            GAP_UNKNOWN))
            continue
        uid = sample.process_pods[process.pid]
        if uid is None:
            split.host += share
        else:
            split.pods[uid] = split.pods.get(uid, 0.0) + share
    split.idle = max(watts - used, 0.0)
    return split


def split_device(watts: float, read: GpuRead, sample: GpuSample, gaps: list[Gap]) -> tuple[str, _Split]:
    which = _which(read)
    allocations = sample.allocations
    holders, replicas = allocations.holders(read.device) if allocations is not None else ((), False)
    mode = _mode(read, holders, replicas)
    if mode in (MODE_MIG, MODE_VGPU):
        kind = "MIG is enabled" if mode == MODE_MIG else "it is a vGPU / virtualized device"
        gaps.append(_gap(which, f"{kind}: its {watts:.1f} W are measured but not split between pods "
                              "(not supported yet)", GAP_UNKNOWN))
        return mode, _Split(unattributed=watts)
    if allocations is not None and allocations.error is not None:
        split = _by_processes(watts, read, sample, which, gaps)
        split.unattributed += split.idle  # it may be held by a pod that is idle: not known to be idle
        split.idle = 0.0
        gaps.append(_gap(which, f"which pod holds it is unknown ({allocations.error}): the part no "
                              "process used is not charged", GAP_INCOMPLETE))
        return mode, split
    if mode == MODE_EXCLUSIVE:
        holder = holders[0]
        uid = sample.holder_uids.get((holder.namespace, holder.pod))
        if uid is None:  # the pod's UID from the processes that used it, when they are all in one pod
            pods = {sample.process_pods.get(p.pid) for p in read.processes or ()}
            uid = pods.pop() if len(pods) == 1 and None not in pods else None
        if uid is None:
            gaps.append(_gap(which, f"allocated to pod {holder.namespace}/{holder.pod}, whose UID is not known "
                                  "(no Kubernetes API, or not listed yet): not charged", GAP_INCOMPLETE))
            return mode, _Split(unattributed=watts)
        return mode, _Split(pods={uid: watts})
    return mode, _by_processes(watts, read, sample, which, gaps)


def compute_gpus(before: GpuSample, after: GpuSample, interval_seconds: float) -> GpuResult:
    """Every GPU's watts and split; the totals over them."""
    gaps: list[Gap] = []
    earlier = {read.device.index: read for read in before.reading.devices}
    devices: list[GpuPower] = []
    pods: dict[str, float] = {}
    unknown_pods: set[str] = set()
    total: float | None = 0.0
    idle = host = unattributed = 0.0
    for read in after.reading.devices:
        device = read.device
        previous = earlier.get(device.index)
        if previous is None:
            gaps.append(_gap(_which(read), "appeared between reads; its first delta comes next interval", GAP_UNKNOWN))
            total = None
            continue
        watts, method, gap = device_watts(previous, read, interval_seconds)
        if watts is None:
            counted = measurable(read) and measurable(previous)
            assert gap is not None
            gaps.append(gap if counted else replace(gap, reason=f"{gap.reason}: it is left out of node power", kind=GAP_UNREADABLE))
            if counted:
                total = None
            holders, _ = after.allocations.holders(device) if after.allocations is not None else ((), False)
            unknown_pods.update(uid for h in holders if (uid := after.holder_uids.get((h.namespace, h.pod))))
            devices.append(GpuPower(device.index, device.uuid, device.name, None, None,
                                    _mode(read, holders, False), measurable=counted))
            continue
        mode, split = split_device(watts, read, after, gaps)
        devices.append(GpuPower(device.index, device.uuid, device.name, watts, method, mode,
                                tuple(sorted(split.pods.items())), split.host, split.idle, split.unattributed))
        if total is not None:
            total += watts
        idle += split.idle
        host += split.host
        unattributed += split.unattributed
        for uid, share in split.pods.items():
            pods[uid] = pods.get(uid, 0.0) + share
    return GpuResult(tuple(devices), total, idle, host, unattributed, pods, frozenset(unknown_pods), tuple(gaps))
