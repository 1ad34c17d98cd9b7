"""Reading the host once (RawSample) and turning two reads into a Snapshot.

The read side touches the host through a HostFS; the compute side is pure, so `once`, `run`
and `replay` (two snapshot trees) share it exactly.

One read takes, in this order: the RAPL counters and /proc/stat (close together, since node
power and busy time must cover the same interval; the sample's time is taken right after
them), then the pod cgroups, every process's /proc/<pid>/stat, and the command line of the
qemu processes only.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.attribution import (
    invariant_error,
    invariant_holds,
    share_within,
    split_idle,
    split_pods,
)
from agent.cgroups import CgroupReading, read_cgroups
from agent.hostfs import HostFS
from agent.processes import ProcessReader, ProcStat, cpu_ticks_delta
from agent.procstat import CpuTimes, clock_ticks_per_second, cpu_delta, read_cpu_times
from agent.profile import CalibrationProfile
from agent.rapl import NO_POWERCAP_HINT, RaplReading, compute_power, read_rapl
from agent.snapshot import (
    SOURCE_ESTIMATED,
    SOURCE_NONE,
    SOURCE_RAPL,
    ContainerPower,
    Gap,
    PodPower,
    ProcessPower,
    Snapshot,
    VMPower,
)
from agent.vms import VMIdentity, is_qemu_comm, read_vm_identity

log = logging.getLogger("kubejoule.agent.sampler")

DEFAULT_PROCESS_TOP = 10


def default_node_name() -> str:
    return os.environ.get("NODE_NAME") or socket.gethostname()


@dataclass(frozen=True)
class RawSample:
    """Everything read from the host at one instant."""

    monotonic: float
    wall: float
    rapl: RaplReading
    cpu: CpuTimes | None
    cpu_error: str | None = None
    cgroups: CgroupReading | None = None
    processes: Mapping[int, ProcStat] = field(default_factory=dict)
    vms: Mapping[int, VMIdentity] = field(default_factory=dict)
    unparsable_processes: int = 0


def counter_delta(before: float | None, after: float) -> float:
    """Growth of a cumulative CPU counter; a cgroup that is new (or was recreated and so
    restarted from 0) counts from 0."""
    if before is None or after < before:
        return after
    return after - before


class Sampler:
    def __init__(
        self,
        fs: HostFS,
        node: str | None = None,
        *,
        profile: CalibrationProfile | None = None,
        process_top: int = DEFAULT_PROCESS_TOP,
        containers: bool = True,
    ) -> None:
        self.fs = fs
        self.node = node or default_node_name()
        self.profile = profile
        self.process_top = process_top
        self.containers = containers  # read each container's CPU time (the pod's is always read)
        self.ticks_per_second = clock_ticks_per_second()
        self._processes = ProcessReader(fs)

    def close(self) -> None:
        """Release the descriptors kept between reads."""
        self._processes.close()

    def read(self) -> RawSample:
        rapl = read_rapl(self.fs)
        cpu: CpuTimes | None = None
        cpu_error: str | None = None
        try:
            cpu = read_cpu_times(self.fs)
        except (OSError, ValueError) as exc:
            cpu_error = f"cannot read {self.fs.proc('stat')}: {exc}"
        monotonic, wall = time.monotonic(), time.time()
        cgroups = read_cgroups(self.fs, self.containers)
        processes, unparsable = self._processes.read()
        vms: dict[int, VMIdentity] = {}
        for pid, stat in processes.items():
            if is_qemu_comm(stat.comm):
                vms[pid] = read_vm_identity(self.fs, pid) or VMIdentity(f"pid-{pid}", None)
        return RawSample(monotonic, wall, rapl, cpu, cpu_error, cgroups, processes, vms, unparsable)

    def compute(
        self, before: RawSample, after: RawSample, interval_seconds: float | None = None
    ) -> Snapshot:
        interval = interval_seconds if interval_seconds is not None else after.monotonic - before.monotonic
        if interval <= 0:
            raise ValueError(f"the interval must be positive, got {interval}")
        gaps: list[Gap] = []
        power = compute_power(before.rapl, after.rapl, interval)
        gaps.extend(power.gaps)
        source = SOURCE_RAPL if power.watts is not None else SOURCE_NONE
        # No RAPL at all (no powercap, or no package/psys zone) and a profile with a curve: node
        # power is estimated from utilization below, labelled so. RAPL that is present but failing
        # (permissions, a wrap) stays a gap: estimating would hide what needs fixing.
        can_estimate = (
            self.profile is not None
            and self.profile.curve is not None
            and (not power.present or not power.zone_ids)
        )
        if not power.present:
            gaps.append(Gap("node", NO_POWERCAP_HINT.format(path=self.fs.sys("class", "powercap"))))

        utilization: float | None = None
        busy: float | None = None
        if before.cpu is not None and after.cpu is not None:
            delta = cpu_delta(before.cpu, after.cpu)
            busy = delta.busy_seconds
            utilization = delta.utilization
        for error in (before.cpu_error, after.cpu_error):
            if error:
                gaps.append(Gap("cpu", error))

        node_watts = power.watts
        if can_estimate and self.profile is not None and utilization is not None:
            node_watts = self.profile.estimate_watts(utilization)
            source = SOURCE_ESTIMATED if node_watts is not None else SOURCE_NONE
            gaps[:] = [g for g in gaps if g.what != "node"]  # estimated, so not a gap
        calibrated_idle = self.profile.idle_watts if self.profile is not None else None
        idle = split_idle(node_watts, utilization, calibrated_idle)
        if node_watts is not None and idle.idle_watts is None:
            gaps.append(Gap("idle split", "CPU utilization is unknown this interval"))
        if node_watts is not None and busy is None:
            gaps.append(Gap("attribution", "busy CPU time is unknown this interval: pods and host unknown"))

        pods, host_watts, skewed, part_watts, part_cpu, membership = self._pods(
            before, after, idle.active_watts, busy, gaps
        )
        vms, busy_processes = self._views(before, after, part_watts, part_cpu, membership, gaps)

        breached = False
        pod_watts = [p.watts for p in pods]
        if (
            node_watts is not None
            and idle.idle_watts is not None
            and host_watts is not None
            and all(w is not None for w in pod_watts)
        ):
            known = [w for w in pod_watts if w is not None]
            if not invariant_holds(node_watts, idle.idle_watts, known, host_watts):
                breached = True
                log.warning(
                    "attribution invariant breached: pods + host + idle != node",
                    extra={"fields": {
                        "node_watts": node_watts, "idle_watts": idle.idle_watts,
                        "pods_watts": sum(known), "host_watts": host_watts,
                        "relative_error": invariant_error(node_watts, idle.idle_watts, known, host_watts),
                    }},
                )

        return Snapshot(
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
            invariant_breached=breached,
            skew_scaled=skewed,
            extra=self._calibration_extra(node_watts),
        )

    def _calibration_extra(self, node_watts: float | None) -> tuple[tuple[str, object], ...]:
        """Wall power from the profile's RAPL-to-wall correction (always an estimate)."""
        wall = self.profile.wall_watts(node_watts) if self.profile is not None else None
        return (("wall_watts", wall),) if wall is not None else ()

    def _pods(
        self,
        before: RawSample,
        after: RawSample,
        active_watts: float | None,
        busy: float | None,
        gaps: list[Gap],
    ) -> tuple[
        tuple[PodPower, ...], float | None, bool, dict[str | None, float | None],
        dict[str | None, float | None], dict[int, str],
    ]:
        """Pods and containers by cgroup CPU time; returns the pods, host watts, the skew flag,
        and per part (pod uid, or None for the host) its watts, its CPU seconds, and which
        process is in which pod."""
        now = after.cgroups.pods if after.cgroups is not None else {}
        then = before.cgroups.pods if before.cgroups is not None else {}
        for reading in (before.cgroups, after.cgroups):
            if reading is not None:
                for reason in reading.errors:
                    if Gap("cgroups", reason) not in gaps:
                        gaps.append(Gap("cgroups", reason))
        pod_cpu = {
            uid: counter_delta(then[uid].usage_seconds if uid in then else None, pod.usage_seconds)
            for uid, pod in now.items()
        }
        split = split_pods(active_watts, busy, pod_cpu)
        pods: list[PodPower] = []
        membership: dict[int, str] = {}
        for uid, pod in now.items():
            previous = {c.id: c.usage_seconds for c in then[uid].containers} if uid in then else {}
            container_cpu: dict[int | str, float] = {
                c.id: counter_delta(previous.get(c.id), c.usage_seconds) for c in pod.containers
            }
            container_watts = share_within(split.pod_watts[uid], pod_cpu[uid], container_cpu)
            containers = tuple(
                ContainerPower(c.id, container_cpu[c.id], container_watts[c.id]) for c in pod.containers
            )
            pods.append(PodPower(uid, pod.qos, pod_cpu[uid], split.pod_watts[uid], containers))
            for pid in pod.pids:
                membership[pid] = uid
        part_watts: dict[str | None, float | None] = {uid: w for uid, w in split.pod_watts.items()}
        part_watts[None] = split.host_watts
        part_cpu: dict[str | None, float | None] = {uid: c for uid, c in pod_cpu.items()}
        part_cpu[None] = split.host_cpu_seconds
        return tuple(pods), split.host_watts, split.skew_scaled, part_watts, part_cpu, membership

    def _views(
        self,
        before: RawSample,
        after: RawSample,
        part_watts: dict[str | None, float | None],
        part_cpu: dict[str | None, float | None],
        membership: dict[int, str],
        gaps: list[Gap],
    ) -> tuple[tuple[VMPower, ...], tuple[ProcessPower, ...]]:
        """VMs and processes: each one's share of the part (pod or host) that contains it."""
        if after.unparsable_processes:
            gaps.append(Gap("processes", f"{after.unparsable_processes} /proc/<pid>/stat file(s) could not be parsed"))
        tick = 1.0 / self.ticks_per_second
        previous = before.processes
        members: dict[str | None, dict[int | str, float]] = {}
        vm_pids = after.vms
        for pid, stat in after.processes.items():
            earlier = previous.get(pid)
            if earlier is stat and pid not in vm_pids:
                continue  # the reader reused the parse: the stat line did not change, no CPU used
            ticks = cpu_ticks_delta(earlier, stat)
            if ticks or pid in vm_pids:
                members.setdefault(membership.get(pid), {})[pid] = ticks * tick
        watts: dict[int, float | None] = {}
        cpu: dict[int, float] = {}
        for part, member_cpu in members.items():
            shares = share_within(part_watts.get(part), part_cpu.get(part), member_cpu)
            for key, value in shares.items():
                assert isinstance(key, int)
                watts[key] = value
                cpu[key] = member_cpu[key]
        vms = tuple(
            sorted(
                (
                    VMPower(identity.name, identity.uuid, pid, membership.get(pid), cpu[pid], watts[pid])
                    for pid, identity in after.vms.items()
                ),
                key=lambda vm: (vm.name, vm.pid),
            )
        )
        processes: tuple[ProcessPower, ...] = ()
        if self.process_top > 0:  # all busy ones, busiest first: the top N and the energy counters
            busiest = sorted(
                (pid for pid, seconds in cpu.items() if seconds > 0),
                key=lambda pid: (-(watts[pid] or 0.0), -cpu[pid], pid),
            )
            processes = tuple(
                ProcessPower(pid, after.processes[pid].comm_text, cpu[pid], watts[pid]) for pid in busiest
            )
        return vms, processes
