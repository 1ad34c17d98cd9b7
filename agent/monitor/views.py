"""VMs and processes as views: each one's share of the part (a pod, or the host) that holds it.

`P_part × cpu / c_part` by process CPU time (utime + stime). If the views of a part add up to more
CPU than the part (tick rounding, read skew) they are scaled to fit — VMs among the part's VMs,
processes among its processes — so a VM's watts never depend on whether process views are on
(`process_top` 0 reads only the VMs' stat: agent/device/processes.py). A process whose previous read
failed, that exec'd into qemu since it (its CPU time then was not read), or whose ticks grew
beyond what the CPUs could run, gets no view that interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_INCOMPLETE, GAP_UNREADABLE, Gap, Subject
from agent.device.processes import cpu_ticks_delta
from agent.monitor.attribution import share_within
from agent.monitor.snapshot import ProcessPower, VMPower

if TYPE_CHECKING:
    from agent.monitor.raw_sample import RawSample


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
