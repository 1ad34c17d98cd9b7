"""Fake host trees (sysfs powercap + procfs) for testing the host scripts.

The powercap layout is the kernel's: zone directories live under
`devices/virtual/powercap/<control type>/` (subzones nested in their parent zone), and
`class/powercap/<zone>` are relative symlinks to them, e.g.
`class/powercap/intel-rapl:0 -> ../../devices/virtual/powercap/intel-rapl/intel-rapl:0`.

Scripts under test wait through `KJ_SLEEP`; `StepSleeper` gives them a "sleep" command that
applies the next prepared state of the tree instead of waiting, so every interval is exact.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CLOCK_TICKS_PER_SECOND = 100  # USER_HZ; the scripts read it from `getconf CLK_TCK`


@dataclass(frozen=True)
class Zone:
    """One powercap zone: `zone_id` like "intel-rapl:0", "intel-rapl:0:1", "intel-rapl-mmio:0"."""

    zone_id: str
    name: str
    energy_uj: int
    max_energy_range_uj: int | str = 262143328850
    energy_mode: int = 0o400  # root-only since CVE-2020-8694


def _control_type(zone_id: str) -> str:
    return zone_id.split(":", 1)[0]


def zone_device_dir(sysfs: Path, zone_id: str) -> Path:
    """The real (non-symlink) directory of a zone; subzones nest inside their parent."""
    control = _control_type(zone_id)
    parts = zone_id.split(":")[1:]
    path = sysfs / "devices" / "virtual" / "powercap" / control
    for depth in range(1, len(parts) + 1):
        path = path / ":".join([control, *parts[:depth]])
    return path


def write_powercap(sysfs: Path, zones: Sequence[Zone]) -> None:
    """Create (or update) the zones with the kernel's directory and symlink layout."""
    class_dir = sysfs / "class" / "powercap"
    class_dir.mkdir(parents=True, exist_ok=True)
    for zone in zones:
        control = _control_type(zone.zone_id)
        control_dir = sysfs / "devices" / "virtual" / "powercap" / control
        control_dir.mkdir(parents=True, exist_ok=True)
        (control_dir / "enabled").write_text("1\n")
        control_link = class_dir / control
        if not control_link.is_symlink():
            control_link.symlink_to(f"../../devices/virtual/powercap/{control}")
        device = zone_device_dir(sysfs, zone.zone_id)
        device.mkdir(parents=True, exist_ok=True)
        (device / "name").write_text(zone.name + "\n")
        (device / "enabled").write_text("1\n")
        (device / "max_energy_range_uj").write_text(f"{zone.max_energy_range_uj}\n")
        energy = device / "energy_uj"
        energy.write_text(f"{zone.energy_uj}\n")
        energy.chmod(zone.energy_mode)
        link = class_dir / zone.zone_id
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(device, class_dir))


@dataclass(frozen=True)
class Proc:
    pid: int
    comm: str
    cmdline: Sequence[str]
    cpu_ticks: int  # utime + stime, in clock ticks

    def stat_line(self) -> str:
        utime = self.cpu_ticks // 2
        stime = self.cpu_ticks - utime
        # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        return (
            f"{self.pid} ({self.comm}) S 1 {self.pid} {self.pid} 0 -1 4194560 100 0 0 0 "
            f"{utime} {stime} 0 0 20 0 4 0 1000 100000000 2000 18446744073709551615\n"
        )


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate `cpu` line of /proc/stat, in clock ticks."""

    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0

    @property
    def busy(self) -> int:
        return self.user + self.nice + self.system + self.irq + self.softirq

    def line(self) -> str:
        return (
            f"cpu  {self.user} {self.nice} {self.system} {self.idle} {self.iowait} "
            f"{self.irq} {self.softirq} {self.steal} 0 0\n"
        )


def write_procfs(
    procfs: Path,
    cpu: CpuTimes,
    uptime_seconds: float,
    processes: Sequence[Proc] = (),
    cpu_vendor: str = "GenuineIntel",
) -> None:
    procfs.mkdir(parents=True, exist_ok=True)
    (procfs / "stat").write_text(cpu.line() + "cpu0 0 0 0 0 0 0 0 0 0 0\nctxt 1\nbtime 1\n")
    (procfs / "uptime").write_text(f"{uptime_seconds:.2f} 0.00\n")
    (procfs / "cpuinfo").write_text(f"processor\t: 0\nvendor_id\t: {cpu_vendor}\n")
    (procfs / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (procfs / "sys" / "kernel" / "osrelease").write_text("6.1.0-test\n")
    for proc in processes:
        pid_dir = procfs / str(proc.pid)
        pid_dir.mkdir(exist_ok=True)
        (pid_dir / "comm").write_text(proc.comm + "\n")
        (pid_dir / "stat").write_text(proc.stat_line())
        (pid_dir / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in proc.cmdline))


@dataclass(frozen=True)
class HostState:
    zones: Sequence[Zone]
    cpu: CpuTimes
    uptime_seconds: float
    processes: Sequence[Proc] = ()
    cpu_vendor: str = "GenuineIntel"

    def write(self, root: Path) -> None:
        write_powercap(root / "sys", self.zones)
        write_procfs(root / "proc", self.cpu, self.uptime_seconds, self.processes, self.cpu_vendor)


@dataclass
class StepSleeper:
    """A `KJ_SLEEP` command that applies the next prepared state instead of sleeping."""

    root: Path
    work: Path
    steps: list[HostState] = field(default_factory=list)

    def install(self) -> Path:
        steps_dir = self.work / "steps"
        for index, state in enumerate(self.steps, start=1):
            state.write(steps_dir / str(index))
        script = self.work / "step_sleep.sh"
        counter = self.work / "step_counter"
        counter.write_text("0\n")
        script.write_text(
            "#!/usr/bin/env bash\n"
            "set -euo pipefail\n"
            f'n=$(( $(cat "{counter}") + 1 ))\n'
            f'echo "$n" > "{counter}"\n'
            f'[ -d "{steps_dir}/$n" ] || {{ echo "no step $n" >&2; exit 1; }}\n'
            f'cp -a "{steps_dir}/$n/." "{self.root}/"\n'
        )
        script.chmod(0o755)
        return script

    def calls(self) -> int:
        return int((self.work / "step_counter").read_text())


# Running a script as `nobody`, to see what a user without root gets.
AS_NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
needs_another_user = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run a script as another user",
)


@contextmanager
def traversable_tree() -> Iterator[Path]:
    """A fresh directory under /tmp that another user can traverse (pytest's tmp_path is 0700),
    removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="kubejoule-deploy-"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def script_env(root: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "KJ_SYSFS": str(root / "sys"),
        "KJ_PROCFS": str(root / "proc"),
        "LC_ALL": "C",
    }
    if extra:
        env.update(extra)
    return env
