"""Reading the host once (a RawSample, agent/monitor/raw_sample.py) and turning two reads into a Snapshot.

The read side touches the host through a HostFS; the compute side is pure, so `once`, `run`
and `replay` (two snapshot trees) share it exactly.

One read takes, in this order: the RAPL counters and /proc/stat (close together, since node
power and busy time must cover the same interval; the sample's time is taken right after
them), then the pod cgroups, every process's /proc/<pid>/stat, and the command line of the
qemu processes only. Without process views (`process_top` 0, `run`'s default) on a real
procfs, only what VMs need is read: every process's comm, the qemu processes' stat, and each
VM's pod from its own /proc/<pid>/cgroup rather than every pod's cgroup.procs (agent/device/processes.py,
agent/device/cgroups.py). A VM's share is the same either way: VMs are shared among the VMs of their
part, never scaled by other processes' CPU time.

Per-entity baselines (DESIGN.md, "Plausibility"): a pod, container or process whose read failed
is still in the RawSample (usage None, or its pid in `failed_processes`), so the interval it
failed in and the next one — whose delta would span more than one interval — are gaps for it
alone, and it is never taken for a new entity whose whole lifetime CPU is this interval's. A
CPU delta that went backwards or exceeds what the CPUs could run is `implausible`.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable

from agent.device.cgroupfs import KeptUsageFiles
from agent.device.cgroups import process_pod, read_cgroups
from agent.device.energy import ImplausibleError
from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_UNREADABLE, Gap, Subject
from agent.device.gpu_source import GpuSource
from agent.device.host_energy import HostEnergyReader
from agent.device.hostfs import HostFS
from agent.device.platform import PlatformState
from agent.device.processes import ProcessReader
from agent.device.procstat import (
    CpuDelta,
    CpuTimes,
    clock_ticks_per_second,
    cpu_delta,
    read_cpu_times,
)
from agent.device.rapl import NO_POWERCAP_HINT, RaplReading, read_rapl
from agent.device.vms import VMIdentity, is_qemu_comm, read_vm_identity
from agent.monitor.attribution import attribute_pods, process_views, split_idle
from agent.monitor.baselines import CPU_SKEW_MARGIN, CPU_SKEW_SLACK_SECONDS, check_elapsed
from agent.monitor.composition import check_invariant, compose
from agent.monitor.gpu_power import compute_gpus
from agent.monitor.host_power import node_power
from agent.monitor.raw_sample import RawSample
from agent.monitor.snapshot import (
    SOURCE_ESTIMATED,
    SOURCE_NONE,
    Snapshot,
)
from common.power_profile import PowerProfile

log = logging.getLogger("kubejoule.agent.sampler")

DEFAULT_PROCESS_TOP = 10


def default_node_name() -> str:
    return os.environ.get("NODE_NAME") or socket.gethostname()


class Sampler:
    def __init__(
        self,
        fs: HostFS,
        node: str | None = None,
        *,
        profile: PowerProfile | None = None,
        process_top: int = DEFAULT_PROCESS_TOP,
        containers: bool = True,
        gpus: GpuSource | None = None,
        platform: Callable[[], PlatformState] | None = None,
        host_energy: HostEnergyReader | None = None,
    ) -> None:
        self.fs = fs
        self.node = node or default_node_name()
        self.profile = profile
        self.process_top = process_top
        self.containers = containers  # read each container's CPU time (the pod's is always read)
        self.gpus = gpus  # GPUs through NVML (agent/device/gpu_source.py)
        self.platform = platform  # the BMC's latest reading (agent/device/platform.py: PlatformPoller.state)
        self.host_energy = host_energy  # in a VM: its host's counter replaces RAPL (agent/monitor/host_power.py)
        # Why a cloud instance's curve is missing (its type is not in the coefficients): a gap of
        # every interval without RAPL (agent/cmd/cloud_cli.py sets it; never a guessed curve).
        self.estimate_gap: str | None = None
        self.ticks_per_second = clock_ticks_per_second()
        self._processes = ProcessReader(fs, vms_only=process_top == 0)
        # pod usage files kept open on a real cgroupfs, in the descriptors the process reader leaves
        self._usage = KeptUsageFiles(limit=self._processes.cgroup_descriptors)
        # A VM's identity by (pid, start time): its command line is read and parsed once, not
        # every interval (a process's start time tells a reused pid apart).
        self._vm_identities: dict[tuple[int, int], VMIdentity] = {}
        self._vm_pods: dict[tuple[int, int], str | None] = {}  # (pid, start ticks) → pod uid

    def close(self) -> None:
        """Release the descriptors kept between reads (and NVML)."""
        self._processes.close()
        self._usage.close()
        if self.gpus is not None:
            self.gpus.close()

    def read(self) -> RawSample:
        host = self.host_energy.read() if self.host_energy is not None else None
        rapl = read_rapl(self.fs) if host is None else RaplReading(present=False)
        cpu: CpuTimes | None = None
        cpu_error: str | None = None
        try:
            cpu = read_cpu_times(self.fs)
        except (OSError, ValueError) as exc:
            cpu_error = f"cannot read {self.fs.proc('stat')}: {exc}"
        monotonic, wall = time.monotonic(), time.time()
        light = self._processes.vms_only
        cgroups = read_cgroups(self.fs, self.containers, membership=not light, kept=self._usage)
        gpus = self.gpus.sample(self.fs, cgroups) if self.gpus is not None else None
        platform = self.platform() if self.platform is not None else None
        processes, unparsable = self._processes.read()
        vms: dict[int, VMIdentity] = {}
        known, identities = self._vm_identities, {}
        for pid, stat in processes.items():
            if is_qemu_comm(stat.comm):
                key = (pid, stat.start_ticks)
                identity = known.get(key) if not self.fs.record else None
                if identity is None:
                    identity = read_vm_identity(self.fs, pid) or VMIdentity(f"pid-{pid}", None)
                vms[pid] = identities[key] = identity
        self._vm_identities = identities
        vm_pods: dict[int, str | None] | None = None
        unplaced: set[int] = set()
        if light:
            # A process stays in the cgroup it started in (agent/device/podprocs.py): a VM's pod is
            # read from /proc/<pid>/cgroup once per (pid, start time), like its identity.
            vm_pods = {}
            known_pods, pods_now = self._vm_pods, {}
            for pid in vms:
                if cgroups.layout is None:
                    vm_pods[pid] = None  # no pod cgroups to be in
                    continue
                key = (pid, processes[pid].start_ticks)
                if key in known_pods and not self.fs.record:
                    vm_pods[pid] = pods_now[key] = known_pods[key]
                    continue
                try:
                    vm_pods[pid] = pods_now[key] = process_pod(self.fs, pid, cgroups.layout)
                except (OSError, ValueError):
                    unplaced.add(pid)
            self._vm_pods = pods_now
        return RawSample(
            monotonic, wall, rapl, cpu, cpu_error, cgroups, processes, vms, unparsable, self._processes.failed,
            vm_pods, frozenset(unplaced), self._processes.execed if light else frozenset(), gpus, platform, host,
        )

    def compute(
        self, before: RawSample, after: RawSample, interval_seconds: float | None = None
    ) -> Snapshot:
        interval = interval_seconds if interval_seconds is not None else after.monotonic - before.monotonic
        if interval <= 0:
            raise ValueError(f"the interval must be positive, got {interval}")
        gaps: list[Gap] = []
        power, source = node_power(before, after, interval)
        gaps.extend(power.gaps)
        # No RAPL at all (no powercap, or no package/psys zone) and a profile with a curve: node
        # power is estimated from utilization below, labelled so. RAPL that is present but failing
        # (permissions, a wrap) stays a gap: estimating would hide what needs fixing.
        can_estimate = (
            self.profile is not None
            and self.profile.cpu_curve is not None
            and (not power.present or not power.zone_ids)
            and not power.failing
        )
        if not power.present:
            gaps.append(Gap(Subject.NODE, NO_POWERCAP_HINT.format(path=self.fs.sys("class", "powercap"))))

        utilization: float | None = None
        busy: float | None = None
        delta: CpuDelta | None = None
        if before.cpu is not None and after.cpu is not None:
            try:
                delta = cpu_delta(before.cpu, after.cpu)
                check_elapsed(delta, max(before.cpu.cpus, after.cpu.cpus), interval)
            except ImplausibleError as exc:
                gaps.append(Gap(Subject.CPU, str(exc), GAP_IMPLAUSIBLE))
                delta = None
            else:
                busy = delta.busy_seconds
                utilization = delta.utilization
        for error in (before.cpu_error, after.cpu_error):
            if error:
                gaps.append(Gap(Subject.CPU, error, GAP_UNREADABLE))

        node_watts = power.watts
        if can_estimate and self.profile is not None and utilization is not None:
            node_watts = self.profile.estimate_cpu_watts(utilization)
            source = SOURCE_ESTIMATED if node_watts is not None else SOURCE_NONE
            gaps[:] = [g for g in gaps if g.subject is not Subject.NODE]  # estimated, so not a gap
        if node_watts is None and self.estimate_gap is not None:
            gaps.append(Gap(Subject.ESTIMATE, self.estimate_gap))
        # a curve estimated from published coefficients never stands in for a measurement's idle
        measured_idle = self.profile is not None and (self.profile.estimate is None or source == SOURCE_ESTIMATED)
        calibrated_idle = self.profile.cpu_idle_watts if measured_idle and self.profile is not None else None
        idle = split_idle(node_watts, utilization, calibrated_idle)
        if node_watts is not None and idle.idle_watts is None:
            gaps.append(Gap(Subject.IDLE_SPLIT, "CPU utilization is unknown this interval"))
        if node_watts is not None and busy is None:
            gaps.append(Gap(Subject.ATTRIBUTION, "busy CPU time is unknown this interval: pods and host unknown"))

        cpu_bound = (
            CPU_SKEW_MARGIN * delta.elapsed_cpu_seconds + CPU_SKEW_SLACK_SECONDS if delta is not None else None
        )
        pods, host_watts, skewed, part_watts, part_cpu, membership = attribute_pods(
            before, after, idle.active_watts, busy, cpu_bound, gaps
        )
        vms, busy_processes = process_views(before, after, part_watts, part_cpu, membership, cpu_bound, gaps,
                                            self.ticks_per_second, self.process_top)

        snapshot = Snapshot(
            node=self.node,
            interval_seconds=interval,
            timestamp=after.wall,
            source=source,
            node_watts=node_watts,
            idle_watts=idle.idle_watts,
            active_watts=idle.active_watts,
            idle_source=idle.idle_source,
            cpu_utilization=utilization,
            busy_cpu_seconds=busy,
            zones=power.zones,
            pods=pods,
            host_watts=host_watts,
            vms=vms,
            processes=busy_processes[: self.process_top],
            gaps=tuple(gaps),
            busy_processes=busy_processes,
            live_pids=frozenset(after.processes) if self.process_top > 0 else frozenset(),
            skew_scaled=skewed,
            # wall power from the profile's RAPL-to-wall correction (always an estimate)
            wall_watts=self.profile.wall_watts(node_watts) if self.profile is not None else None,
            estimate=self.profile.estimate if source == SOURCE_ESTIMATED and self.profile is not None else None,
        )
        # The GPUs are read a few milliseconds after RAPL, every time: over the same interval, so
        # their energy counters are exact sums of their counters' deltas, as the zones' are.
        gpus = compute_gpus(before.gpus, after.gpus, interval) if before.gpus and after.gpus else None
        return check_invariant(compose(snapshot, gpus, after.platform))


