"""One read of the host (`RawSample`): everything the sampler (agent/monitor/sampler.py) reads at one
instant. Two of them make a Snapshot; the process and VM views (agent/monitor/attribution.py: process_views) read them too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.device.cgroups import CgroupReading
from agent.device.gpu_source import GpuSample
from agent.device.host_energy import HostEnergyReading
from agent.device.platform import PlatformState
from agent.device.processes import ProcStat
from agent.device.procstat import CpuTimes
from agent.device.rapl import RaplReading
from agent.device.vms import VMIdentity


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
    failed_processes: frozenset[int] = frozenset()  # stat there but unreadable: not exited
    # Read without cgroup.procs (see the module docstring): each VM's pod (None: the host's
    # part), and the VMs whose /proc/<pid>/cgroup could not be read. None: from the cgroups.
    vm_pods: Mapping[int, str | None] | None = None
    unplaced_vms: frozenset[int] = frozenset()
    # Read without other processes' stat: processes that exec'd into qemu since the last read
    # (their CPU time then was not read, so this interval's is unknown).
    execed: frozenset[int] = frozenset()
    gpus: GpuSample | None = None  # with GPUs read through NVML
    platform: PlatformState | None = None  # with a BMC: its latest reading when this read was taken
    host_energy: HostEnergyReading | None = None  # in a VM whose host publishes its energy
