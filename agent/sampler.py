"""Reading the host once (RawSample) and turning two reads into a Snapshot.

The read side touches the host through a HostFS; the compute side is pure, so `once`, `run`
and `replay` (two snapshot trees) share it exactly.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

from agent.hostfs import HostFS
from agent.procstat import CpuTimes, cpu_delta, read_cpu_times
from agent.rapl import NO_POWERCAP_HINT, RaplReading, compute_power, read_rapl
from agent.snapshot import (
    IDLE_FROM_UTILIZATION,
    SOURCE_NONE,
    SOURCE_RAPL,
    Gap,
    Snapshot,
)


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


class Sampler:
    def __init__(self, fs: HostFS, node: str | None = None) -> None:
        self.fs = fs
        self.node = node or default_node_name()

    def read(self) -> RawSample:
        rapl = read_rapl(self.fs)
        cpu: CpuTimes | None = None
        cpu_error: str | None = None
        try:
            cpu = read_cpu_times(self.fs)
        except (OSError, ValueError) as exc:
            cpu_error = f"cannot read {self.fs.proc('stat')}: {exc}"
        return RawSample(time.monotonic(), time.time(), rapl, cpu, cpu_error)

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
        idle_watts: float | None = None
        active_watts: float | None = None
        if node_watts is not None and utilization is not None:
            idle_watts = node_watts * (1.0 - utilization)
            active_watts = node_watts - idle_watts
        elif node_watts is not None:
            gaps.append(Gap("idle split", "CPU utilization is unknown this interval"))

        return Snapshot(
            node=self.node,
            interval_seconds=interval,
            timestamp=after.wall,
            source=source,
            node_watts=node_watts,
            idle_watts=idle_watts,
            active_watts=active_watts,
            idle_source=IDLE_FROM_UTILIZATION,
            cpu_utilization=utilization,
            busy_cpu_seconds=busy,
            zones=power.zones,
            gaps=tuple(gaps),
        )
