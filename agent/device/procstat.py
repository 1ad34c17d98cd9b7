"""CPU time from /proc/stat, as DESIGN.md defines busy time and utilization.

The kernel writes the aggregate `cpu` line as unsigned integers (USER_HZ ticks): a field that
is not one (`inf`, `nan`, `-5`, `1e30`), or fewer fields than the eight used, is a garbage read
(ValueError, a `cpu` gap) — never a float that makes utilization NaN, 0.2 or 1.0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from agent.device.energy import ImplausibleError
from agent.device.hostfs import HostFS

_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def clock_ticks_per_second() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


@dataclass(frozen=True)
class CpuTimes:
    """Aggregate CPU time over all CPUs, in seconds. Guest time is already inside user/nice."""

    user: float
    nice: float
    system: float
    idle: float
    iowait: float
    irq: float
    softirq: float
    steal: float
    cpus: int

    @property
    def busy(self) -> float:
        return self.user + self.nice + self.system + self.irq + self.softirq

    @property
    def not_busy(self) -> float:
        return self.idle + self.iowait


def parse_proc_stat(text: str, ticks_per_second: int | None = None) -> CpuTimes:
    ticks = ticks_per_second or clock_ticks_per_second()
    total: list[float] | None = None
    cpus = 0
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            fields = parts[1 : 1 + len(_FIELDS)]
            if len(fields) < len(_FIELDS):
                raise ValueError(
                    f"the 'cpu' line of /proc/stat has {len(fields)} fields, fewer than the {len(_FIELDS)} "
                    f"({' '.join(_FIELDS)}) every kernel since 2.6.11 writes"
                )
            # ASCII digits only: no sign, no '.', no 'inf'/'nan', no other script's digits
            bad = [f for f in fields if not (f.isascii() and f.isdigit())]
            if bad:
                raise ValueError(f"the 'cpu' line of /proc/stat has a field that is not a tick count: {bad[0][:40]!r}")
            total = [int(v) / ticks for v in fields]
        elif parts[0].startswith("cpu") and parts[0][3:].isdigit():
            cpus += 1
    if total is None:
        raise ValueError("no aggregate 'cpu' line in /proc/stat")
    user, nice, system, idle, iowait, irq, softirq, steal = total
    return CpuTimes(user, nice, system, idle, iowait, irq, softirq, steal, cpus=cpus)


def read_cpu_times(fs: HostFS) -> CpuTimes:
    return parse_proc_stat(fs.read_text(fs.proc("stat")))


@dataclass(frozen=True)
class CpuDelta:
    busy_seconds: float
    not_busy_seconds: float
    steal_seconds: float = 0.0

    @property
    def elapsed_cpu_seconds(self) -> float:
        """All CPU time that passed (every CPU's share of the wall clock), busy or not."""
        return self.busy_seconds + self.not_busy_seconds + self.steal_seconds

    @property
    def utilization(self) -> float | None:
        total = self.busy_seconds + self.not_busy_seconds
        if total <= 0:
            return None
        return self.busy_seconds / total


# Only iowait may run backwards (Documentation/filesystems/proc.rst: "In certain conditions the
# iowait field in /proc/stat will decrease"); another field that does is a corrupt read.
_MAY_FALL = frozenset({"iowait"})


def cpu_delta(before: CpuTimes, after: CpuTimes) -> CpuDelta:
    """Busy and idle seconds between two reads. iowait is clamped at zero when it runs
    backwards (the kernel documents it); any other field going backwards is ImplausibleError."""

    def grew(name: str) -> float:
        change = getattr(after, name) - getattr(before, name)
        if change < 0 and name not in _MAY_FALL:
            raise ImplausibleError(
                f"/proc/stat '{name}' went backwards ({getattr(before, name):g} s to {getattr(after, name):g} s)"
            )
        return max(0.0, change)

    busy = sum(grew(name) for name in ("user", "nice", "system", "irq", "softirq"))
    not_busy = grew("idle") + grew("iowait")
    return CpuDelta(busy, not_busy, grew("steal"))
