"""CPU time from /proc/stat, as DESIGN.md defines busy time and utilization."""

from __future__ import annotations

import os
from dataclasses import dataclass

from agent.hostfs import HostFS

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
            values = [float(v) for v in parts[1 : 1 + len(_FIELDS)]]
            values += [0.0] * (len(_FIELDS) - len(values))
            total = [v / ticks for v in values]
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

    @property
    def utilization(self) -> float | None:
        total = self.busy_seconds + self.not_busy_seconds
        if total <= 0:
            return None
        return self.busy_seconds / total


def cpu_delta(before: CpuTimes, after: CpuTimes) -> CpuDelta:
    """Busy and idle seconds between two reads. Each field is clamped at zero: some kernels
    let iowait run backwards, and that must not make busy time negative."""

    def grew(name: str) -> float:
        return max(0.0, getattr(after, name) - getattr(before, name))

    busy = sum(grew(name) for name in ("user", "nice", "system", "irq", "softirq"))
    not_busy = grew("idle") + grew("iowait")
    return CpuDelta(busy, not_busy)
