"""Per-entity CPU baselines: one pod's or container's CPU time in an interval, or why it is unknown.

A pod, container or process whose read failed is still in the sample (usage None); the interval
it failed in, and the next one (whose delta would span more than one interval), are gaps for it
alone. A pod absent from the previous read is new — counted from 0 — only when that read was
complete. A counter that goes backwards, or grows by more than the CPUs could run, is
`implausible` (DESIGN.md, "Plausibility").
"""

from __future__ import annotations

from agent.device.cgroups import ContainerCgroup, PodCgroup
from agent.device.energy import ImplausibleError
from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_INCOMPLETE, GAP_UNREADABLE, Gap, Subject
from agent.device.procstat import CpuDelta

# A cgroup's CPU in an interval beyond this many times all the CPU time that passed (every CPU's
# share of the interval, from /proc/stat), plus a second, cannot be right. The margin leaves room
# for read skew (the cgroups are read just after /proc/stat) on short or idle intervals.
CPU_SKEW_MARGIN = 2.0
CPU_SKEW_SLACK_SECONDS = 1.0


def check_elapsed(delta: CpuDelta, cpus: int, interval_seconds: float) -> None:
    """/proc/stat's CPU time in an interval cannot exceed what its CPUs could run (with the same
    margin as a cgroup's: read skew on short intervals); ImplausibleError otherwise. Without
    per-CPU lines (cpus 0) there is nothing to bound it by."""
    bound = CPU_SKEW_MARGIN * cpus * interval_seconds + CPU_SKEW_SLACK_SECONDS
    if cpus > 0 and delta.elapsed_cpu_seconds > bound:
        raise ImplausibleError(
            f"/proc/stat counted {delta.elapsed_cpu_seconds:.6g} s of CPU time in {interval_seconds:g} s on "
            f"{cpus} CPUs (more than {bound:.6g} s)"
        )


class CpuUnknown(Exception):
    """An entity's CPU time in the interval is not known; args: (reason, gap kind)."""


def counter_delta(before: float | None, after: float, *, previous_known: bool = True) -> float:
    """Growth of a cumulative CPU counter. A cgroup that is new counts from 0 — but only when
    the previous read was complete (`previous_known`): a pod missing from an incomplete read
    is not new. A counter that went backwards is a corrupt read (a cgroup keeps its name for
    life: the kubelet names pods by uid and containers by a fresh id)."""
    if before is None:
        if not previous_known:
            raise CpuUnknown("not in the previous read, which was incomplete: its CPU since is unknown", GAP_INCOMPLETE)
        return after
    if after < before:
        raise CpuUnknown(f"CPU usage went backwards ({before:.6f} s to {after:.6f} s)", GAP_IMPLAUSIBLE)
    return after - before


class Absent:
    """Not in the previous read at all (as opposed to there with a failed read)."""


ABSENT = Absent()


def interval_cpu(
    subject: Subject,
    which: str,
    previous: PodCgroup | ContainerCgroup | Absent,
    current: PodCgroup | ContainerCgroup,
    previous_complete: bool,
    bound_seconds: float | None,
    gaps: list[Gap],
) -> float | None:
    """One pod's or container's CPU seconds in the interval, or None with a gap saying why."""
    try:
        if current.usage_seconds is None:
            raise CpuUnknown("its CPU usage could not be read (see the cgroups gap)", GAP_UNREADABLE)
        if not isinstance(previous, Absent) and previous.usage_seconds is None:
            raise CpuUnknown(
                "its previous read failed: the CPU since its last good read spans more than this interval",
                GAP_INCOMPLETE,
            )
        before = None if isinstance(previous, Absent) else previous.usage_seconds
        cpu = counter_delta(before, current.usage_seconds, previous_known=previous_complete)
        if bound_seconds is not None and cpu > bound_seconds:
            raise CpuUnknown(
                f"{cpu:.6g} s of CPU in an interval in which all CPUs together ran less than "
                f"{bound_seconds:.6g} s (a corrupt usage counter)", GAP_IMPLAUSIBLE,
            )
    except CpuUnknown as exc:
        reason, kind = exc.args
        gaps.append(Gap(subject, reason, kind, name=which))
        return None
    return cpu
