"""A fake VM host and its guests, for the host-to-guest energy tests (agent/exporter/vm_energy.py,
agent/device/host_energy.py) and benchmarks/bench_vm_energy.py.

* `vm_host(root, vms)`: a host tree (`root/proc`, `root/sys`) with one package and its DRAM
  (tests/fixtures/make_powercap.zone), /proc/stat of `CPUS` CPUs, and a qemu process per VM name
  (`/proc/<pid>/stat` and `cmdline` with `-name guest=NAME` and `-uuid`); returns its HostCounters
  and each VM's pid. `advance_host(counters, pids, package_j, dram_j, busy_s, idle_s, vm_s)` moves
  the counters as the kernel would over one interval.
* `guest(root)`: a guest's tree (its own /proc/stat, no RAPL), `advance_guest` its CPU time.
"""

from __future__ import annotations

import uuid as uuids
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.fixtures.make_powercap import DRAM_RANGE, stat, zone
from tests.helpers.host_counters import TICKS_PER_SECOND, HostCounters

CPUS = 4
FIRST_PID = 4000


def _stat_line(pid: int, comm: str, ticks: int) -> str:
    fields = [str(pid), f"({comm})", "S", "1", str(pid), str(pid), "0", "-1", "4194560", "1200", "0", "3", "0",
              str(ticks), "0", "0", "0", "20", "0", "1", "0", str(1000 + pid), "23003136", "1510",
              "18446744073709551615", *(["0"] * 27)]
    return " ".join(fields) + "\n"


def vm_host(root: Path, vms: Sequence[str]) -> tuple[HostCounters, dict[str, int]]:
    sys_root = root / "sys"
    zone(sys_root, "intel-rapl", "intel-rapl:0", "package-0", "1000000000\n", max_power_uw=250_000_000)
    zone(sys_root, "intel-rapl", "intel-rapl:0:0", "dram", "5000000\n", str(DRAM_RANGE))
    stat(root, 10_000, 0, 100_000)
    pids: dict[str, int] = {}
    for index, name in enumerate(vms):
        pid = FIRST_PID + index
        directory = root / "proc" / str(pid)
        directory.mkdir(parents=True)
        (directory / "stat").write_text(_stat_line(pid, "qemu-system-x86", 0))
        uuid = str(uuids.uuid5(uuids.NAMESPACE_DNS, name))
        (directory / "cmdline").write_bytes(b"\0".join(
            arg.encode() for arg in ("/usr/bin/qemu-system-x86_64", "-name", f"guest={name},debug-threads=on",
                                     "-uuid", uuid, "-m", "2048")) + b"\0")
        pids[name] = pid
    return HostCounters(root / "proc", sys_root), pids


def advance_host(counters: HostCounters, pids: Mapping[str, int], *, package_j: float, dram_j: float,
                 busy_s: float, idle_s: float, vm_s: Mapping[str, float]) -> None:
    """One interval on the host: the package's and DRAM's energy, busy and idle CPU time, and each
    VM's CPU seconds (part of the busy time)."""
    counters.add_energy("intel-rapl:0", round(package_j * 1e6))
    counters.add_energy("intel-rapl:0:0", round(dram_j * 1e6))
    counters.add_stat({"user": round(busy_s * TICKS_PER_SECOND), "idle": round(idle_s * TICKS_PER_SECOND)})
    for name, seconds in vm_s.items():
        counters.add_process_ticks(pids[name], round(seconds * TICKS_PER_SECOND))


def guest(root: Path) -> Path:
    """A guest's tree (its own /proc/stat, no powercap); returns its sysfs root."""
    stat(root, 1_000, 0, 10_000)
    (root / "sys").mkdir(parents=True, exist_ok=True)
    return root / "sys"


def advance_guest(root: Path, busy_s: float, idle_s: float) -> None:
    HostCounters(root / "proc", root / "sys").add_stat(
        {"user": round(busy_s * TICKS_PER_SECOND), "idle": round(idle_s * TICKS_PER_SECOND)})
