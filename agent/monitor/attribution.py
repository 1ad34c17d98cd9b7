"""Attribution of node power to idle, pods, the host and, as views, VMs and processes.

Pure arithmetic on one interval's numbers, exactly as DESIGN.md defines it:

* idle: the calibrated static power, clamped to node power, when a profile is loaded; else
  `P_node × (1 − u)`. `P_active = P_node − P_idle`.
* pod i: `P_active × c_i / B` (B = busy CPU seconds from /proc/stat, c_i = the pod cgroup's CPU
  seconds). If read skew makes Σc_i > B, the pods are scaled down together to fit and the
  interval is flagged.
* host: `P_active × (B − Σc_i) / B`, clamped at 0. With B = 0 there is no CPU time to divide by:
  all active power (only non-zero with a calibrated idle) is the host's.
* views (containers in a pod, VMs and processes in a pod or in the host part): the part's watts
  shared by CPU time; if the members' CPU adds up to more than the part's (clock-tick rounding,
  read skew) they are scaled to fit, so a view never exceeds what contains it.
* `process_views`: VMs and processes as views, each one's share of the part (a pod, or the host)
  that holds it, `P_part × cpu / c_part` by process CPU time (utime + stime). If the views of a
  part add up to more CPU than the part (tick rounding, read skew) they are scaled to fit — VMs
  among the part's VMs, processes among its processes — so a VM's watts never depend on whether
  process views are on (`process_top` 0 reads only the VMs' stat: agent/device/processes.py). A
  process whose previous read failed, that exec'd into qemu since it (its CPU time then was not
  read), or whose ticks grew beyond what the CPUs could run, gets no view that interval.
* `attribute_pods`: one interval's pods and containers from two reads' cgroups, their CPU time
  through the per-entity baselines (agent/monitor/baselines.py), their watts by the rules above.

The invariant Σpods + host + idle = node is checked where node power is complete, after its
composition (agent/monitor/composition.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_INCOMPLETE, GAP_UNREADABLE, Gap, Subject
from agent.device.processes import cpu_ticks_delta
from agent.monitor.baselines import ABSENT, interval_cpu
from agent.monitor.raw_sample import RawSample
from agent.monitor.snapshot import (
    IDLE_FROM_CALIBRATION,
    IDLE_FROM_UTILIZATION,
    ContainerPower,
    PodPower,
    ProcessPower,
    VMPower,
)


@dataclass(frozen=True)
class IdleSplit:
    idle_watts: float | None
    active_watts: float | None
    idle_source: str


def split_idle(
    node_watts: float | None, utilization: float | None, calibrated_idle_watts: float | None = None
) -> IdleSplit:
    """Idle and active power. Without node power both are unknown; without utilization only
    a calibrated idle can be given."""
    if calibrated_idle_watts is not None:
        if node_watts is None:
            return IdleSplit(None, None, IDLE_FROM_CALIBRATION)
        idle = min(max(calibrated_idle_watts, 0.0), max(node_watts, 0.0))
        return IdleSplit(idle, node_watts - idle, IDLE_FROM_CALIBRATION)
    if node_watts is None or utilization is None:
        return IdleSplit(None, None, IDLE_FROM_UTILIZATION)
    idle = node_watts * (1.0 - utilization)
    return IdleSplit(idle, node_watts - idle, IDLE_FROM_UTILIZATION)


@dataclass(frozen=True)
class PodSplit:
    pod_watts: Mapping[str, float | None]
    host_watts: float | None
    host_cpu_seconds: float | None  # B − Σc_i, clamped at 0; the host part's CPU time
    skew_scaled: bool  # Σc_i > B: pods were scaled down to fit


def split_pods(
    active_watts: float | None, busy_seconds: float | None, pod_cpu_seconds: Mapping[str, float]
) -> PodSplit:
    """Active power shared between pods by cgroup CPU time over busy time; the rest is the host's."""
    if busy_seconds is None:
        return PodSplit(dict.fromkeys(pod_cpu_seconds), None, None, False)
    total_pods = sum(pod_cpu_seconds.values())
    skewed = total_pods > busy_seconds
    host_cpu = max(busy_seconds - total_pods, 0.0)
    if active_watts is None:
        return PodSplit(dict.fromkeys(pod_cpu_seconds), None, host_cpu, skewed)
    if busy_seconds <= 0.0:
        return PodSplit(dict.fromkeys(pod_cpu_seconds, 0.0), active_watts, 0.0, skewed)
    # With skew the pods share all of B in proportion to c_i: Σ pods = P_active, host = 0.
    # Shares are taken before multiplying: a share is at most 1, so a tiny B (subnormal floats)
    # cannot round a part above the whole.
    denominator = total_pods if skewed else busy_seconds
    pods: dict[str, float | None] = {
        uid: active_watts * (cpu / denominator) for uid, cpu in pod_cpu_seconds.items()
    }
    host = 0.0 if skewed else max(active_watts * (host_cpu / busy_seconds), 0.0)
    return PodSplit(pods, host, host_cpu, skewed)


def share_within(
    part_watts: float | None, part_cpu_seconds: float | None, member_cpu_seconds: Mapping[int | str, float]
) -> dict[int | str, float | None]:
    """Members' watts inside a part (a pod or the host), by CPU time; never more than the part."""
    if part_watts is None or part_cpu_seconds is None:
        return dict.fromkeys(member_cpu_seconds)
    denominator = max(part_cpu_seconds, sum(member_cpu_seconds.values()))
    if denominator <= 0.0:
        return dict.fromkeys(member_cpu_seconds, 0.0)
    return {key: part_watts * (cpu / denominator) for key, cpu in member_cpu_seconds.items()}



def attribute_pods(
    before: RawSample,
    after: RawSample,
    active_watts: float | None,
    busy: float | None,
    cpu_bound: float | None,
    gaps: list[Gap],
) -> tuple[
    tuple[PodPower, ...], float | None, bool, dict[str | None, float | None],
    dict[str | None, float | None], dict[int, str],
]:
    """Pods and containers by cgroup CPU time; returns the pods, host watts, the skew flag,
    and per part (pod uid, or None for the host) its watts, its CPU seconds, and which
    process is in which pod. A pod whose CPU time is unknown this interval is listed with
    null CPU and watts (so its energy counter holds), and the host is then unknown too."""
    now = after.cgroups.pods if after.cgroups is not None else {}
    then = before.cgroups.pods if before.cgroups is not None else {}
    for reading in (before.cgroups, after.cgroups):
        if reading is not None:
            for reason in reading.errors:
                if Gap(Subject.CGROUPS, reason, GAP_UNREADABLE) not in gaps:
                    gaps.append(Gap(Subject.CGROUPS, reason, GAP_UNREADABLE))
    then_complete = before.cgroups is None or not before.cgroups.incomplete
    children_complete = then_complete and (before.cgroups is None or not before.cgroups.membership_incomplete)
    pod_cpu: dict[str, float | None] = {}
    for uid, pod in now.items():
        pod_cpu[uid] = interval_cpu(Subject.POD, uid, then.get(uid, ABSENT), pod, then_complete, cpu_bound, gaps)
    # Pods missing from an incomplete read still exist as far as we know: unknown, not gone.
    unseen = {} if after.cgroups is None or not after.cgroups.incomplete else {
        uid: pod for uid, pod in then.items() if uid not in now
    }
    for uid in unseen:
        gaps.append(Gap(Subject.POD, "missing from this read, which was incomplete (see the cgroups gap)", GAP_INCOMPLETE, name=uid))
    known = {uid: cpu for uid, cpu in pod_cpu.items() if cpu is not None}
    unknown = [uid for uid, cpu in pod_cpu.items() if cpu is None] + list(unseen)
    split = split_pods(active_watts, busy, known)
    pod_watts: dict[str, float | None] = dict(split.pod_watts)
    host_watts, host_cpu = split.host_watts, split.host_cpu_seconds
    if unknown:
        host_watts = host_cpu = None  # B − Σc_i needs every c_i
        if split.skew_scaled:  # the scaling needs every c_i too
            pod_watts = dict.fromkeys(pod_watts)
        if active_watts is not None and busy is not None:
            gaps.append(Gap(Subject.HOST, f"unknown because {len(unknown)} pod(s) have unknown CPU time, e.g. "
                                    f"{unknown[0]}", GAP_INCOMPLETE))
    pods: list[PodPower] = []
    membership: dict[int, str] = {}
    for uid, pod in now.items():
        earlier = then.get(uid)
        previous = {c.id: c for c in earlier.containers} if earlier is not None else {}
        container_cpu = {
            c.id: interval_cpu(Subject.CONTAINER, c.id, previous.get(c.id, ABSENT), c,
                                children_complete or earlier is None, cpu_bound, gaps)
            for c in pod.containers
        }
        shares = share_within(pod_watts.get(uid), pod_cpu[uid],
                              {cid: cpu for cid, cpu in container_cpu.items() if cpu is not None})
        containers = tuple(
            ContainerPower(c.id, container_cpu[c.id], shares.get(c.id)) for c in pod.containers
        )
        pods.append(PodPower(uid, pod.qos, pod_cpu[uid], pod_watts.get(uid), containers))
        for pid in pod.pids:
            membership[pid] = uid
    pods.extend(PodPower(uid, pod.qos, None, None) for uid, pod in unseen.items())
    part_watts: dict[str | None, float | None] = {uid: w for uid, w in pod_watts.items()}
    # Views need to know which processes are the host's: not when a cgroup.procs was unreadable.
    membership_known = after.cgroups is None or not (after.cgroups.membership_incomplete or after.cgroups.incomplete)
    part_watts[None] = host_watts if membership_known else None
    part_cpu: dict[str | None, float | None] = {uid: c for uid, c in known.items()}
    part_cpu[None] = host_cpu
    return tuple(pods), host_watts, split.skew_scaled, part_watts, part_cpu, membership


def process_views(
    before: RawSample,
    after: RawSample,
    part_watts: dict[str | None, float | None],
    part_cpu: dict[str | None, float | None],
    membership: Mapping[int, str | None],
    cpu_bound: float | None,
    gaps: list[Gap],
    ticks_per_second: int,
    process_top: int,
) -> tuple[tuple[VMPower, ...], tuple[ProcessPower, ...]]:
    """VMs and processes: each one's share of the part (pod or host) that contains it."""
    if after.unparsable_processes:
        gaps.append(Gap(Subject.PROCESSES, f"{after.unparsable_processes} /proc/<pid>/stat (or comm) file(s) could "
                                     "not be read or parsed", GAP_UNREADABLE))
    tick = 1.0 / ticks_per_second
    previous = before.processes
    vm_pids = after.vms
    if after.vm_pods is not None:
        membership = {**membership, **after.vm_pods}
    if after.unplaced_vms:
        gaps.append(Gap(Subject.VMS, f"{len(after.unplaced_vms)} VM process(es) whose /proc/<pid>/cgroup could not be "
                               "read: their pod, and so their watts, unknown", GAP_UNREADABLE))
    # A process whose previous read failed is not new: its CPU since then spans more than
    # this interval, so it is left out of this interval's views (a VM is listed as unknown).
    unknown_pids = {pid for pid in before.failed_processes if pid in after.processes} | after.execed
    if unknown_pids:
        gaps.append(Gap(Subject.PROCESSES, f"{len(unknown_pids)} process(es) whose previous read failed (or that "
                                     "exec'd into qemu since) have no CPU time this interval", GAP_INCOMPLETE))
    # VMs are shared among the VMs of their part, processes among the processes of theirs:
    # a VM's watts do not depend on whether process views are on.
    vm_members: dict[str | None, dict[int | str, float]] = {}
    vm_cpu: dict[int, float | None] = {}
    members: dict[str | None, dict[int | str, float]] = {}
    views = process_top > 0
    for pid, stat in after.processes.items():
        is_vm = pid in vm_pids
        if not is_vm and (not views or previous.get(pid) is stat):
            continue  # no process views, or the reader reused the parse: no CPU used
        if pid in unknown_pids:
            continue
        ticks = cpu_ticks_delta(previous.get(pid), stat)
        if cpu_bound is not None and ticks * tick > cpu_bound:  # a corrupt stat line
            gaps.append(Gap(Subject.PROCESSES, f"pid {pid}: {ticks * tick:.6g} s of CPU in an interval in which all "
                            f"CPUs together ran less than {cpu_bound:.6g} s", GAP_IMPLAUSIBLE))
            continue
        part = membership.get(pid)
        if is_vm:
            if pid in after.unplaced_vms:
                vm_cpu[pid] = ticks * tick  # its CPU is known, not which part to share
            else:
                vm_members.setdefault(part, {})[pid] = ticks * tick
        if ticks and views:
            members.setdefault(part, {})[pid] = ticks * tick
    vm_watts: dict[int, float | None] = {}
    for part, member_cpu in vm_members.items():
        for key, value in share_within(part_watts.get(part), part_cpu.get(part), member_cpu).items():
            assert isinstance(key, int)
            vm_watts[key] = value
            vm_cpu[key] = member_cpu[key]
    watts: dict[int, float | None] = {}
    cpu: dict[int, float] = {}
    for part, member_cpu in members.items():
        shares = share_within(part_watts.get(part), part_cpu.get(part), member_cpu)
        for key, value in shares.items():
            assert isinstance(key, int)
            watts[key] = value
            cpu[key] = member_cpu[key]
    # VMs whose process read failed this time still exist: listed as unknown, so they keep their counters.
    failed_vms = {pid: identity for pid, identity in before.vms.items() if pid in after.failed_processes}
    vms = tuple(
        sorted(
            (
                VMPower(identity.name, identity.uuid, pid, membership.get(pid), vm_cpu.get(pid), vm_watts.get(pid))
                for pid, identity in (*after.vms.items(), *failed_vms.items())
            ),
            key=lambda vm: (vm.name, vm.pid),
        )
    )
    processes: tuple[ProcessPower, ...] = ()
    if process_top > 0:  # all busy ones, busiest first: the top N and the energy counters
        busiest = sorted(
            (pid for pid, seconds in cpu.items() if seconds > 0),
            key=lambda pid: (-(watts[pid] or 0.0), -cpu[pid], pid),
        )
        processes = tuple(
            ProcessPower(pid, after.processes[pid].comm_text, cpu[pid], watts[pid]) for pid in busiest
        )
    return vms, processes
