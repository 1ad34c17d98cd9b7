"""The counters of a fake host tree (a copy of a fixture's proc/ and sys/), moved as the kernel
would, for tests/helpers/agent_proc.AgentProcess: RAPL energy per zone (wrapping at the zone's
max_energy_range_uj), /proc/stat's aggregate ticks, CPU seconds of a cgroup (pod uid or container
id) and its ancestors, a process's utime ticks; every file written atomically (rename)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
TICKS_PER_SECOND = 100


class AgentProcessError(RuntimeError):
    pass


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


class HostCounters:
    """The counters under `procfs` and `sysfs` (a host tree's proc/ and sys/)."""

    def __init__(self, procfs: Path, sysfs: Path) -> None:
        self.procfs = procfs
        self.sysfs = sysfs

    def zone_dir(self, zone_id: str) -> Path:
        return (self.sysfs / "class" / "powercap" / zone_id).resolve()

    def set_energy_uj(self, zone_id: str, value: int) -> None:
        write_atomic(self.zone_dir(zone_id) / "energy_uj", f"{int(value)}\n")

    def add_energy(self, zone_id: str, delta_uj: int) -> None:
        directory = self.zone_dir(zone_id)
        current = int((directory / "energy_uj").read_text())
        try:
            max_range = int((directory / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            max_range = 0
        value = current + int(delta_uj)
        if max_range > 0:
            value %= max_range
        write_atomic(directory / "energy_uj", f"{value}\n")

    def add_stat(self, ticks: Mapping[str, int]) -> None:
        path = self.procfs / "stat"
        lines = path.read_text().splitlines()
        parts = lines[0].split()
        for name, delta in ticks.items():
            index = 1 + STAT_FIELDS.index(name)
            parts[index] = str(int(parts[index]) + int(delta))
        lines[0] = parts[0] + "  " + " ".join(parts[1:])
        write_atomic(path, "\n".join(lines) + "\n")

    def cgroup_dirs(self, key: str) -> list[Path]:
        """The cgroup named by a pod uid or container id, and its ancestors to the root."""
        base = self.sysfs / "fs" / "cgroup"
        candidates = [base, base / "unified", base / "cpu,cpuacct", base / "cpuacct,cpu", base / "cpuacct"]
        if (base / "cgroup.controllers").is_file():
            root = base
        else:
            root = next(
                (c for c in candidates[2:] if (c / "cpuacct.usage").is_file()), base / "unified"
            )
        needles = {key, key.replace("-", "_")}
        for directory, subdirs, _files in os.walk(root):
            for name in subdirs:
                if any(n in name for n in needles) and "conmon" not in name:
                    found = Path(directory) / name
                    chain = [found]
                    while chain[-1] != root:
                        chain.append(chain[-1].parent)
                    return chain
        raise AgentProcessError(f"no cgroup for {key!r} under {root}")

    def add_cgroup_cpu(self, key: str, seconds: float) -> None:
        for directory in self.cgroup_dirs(key):
            v1 = directory / "cpuacct.usage"
            v2 = directory / "cpu.stat"
            if v1.is_file():
                write_atomic(v1, f"{int(v1.read_text()) + round(seconds * 1e9)}\n")
            elif v2.is_file():
                fields = dict(line.split(" ", 1) for line in v2.read_text().splitlines() if line)
                usec = round(seconds * 1e6)
                for name in ("usage_usec", "user_usec"):
                    fields[name] = str(int(fields.get(name, "0")) + usec)
                write_atomic(v2, "".join(f"{k} {v}\n" for k, v in fields.items()))

    def add_process_ticks(self, pid: int, ticks: int) -> None:
        path = self.procfs / str(pid) / "stat"
        data = path.read_text()
        head, _, rest = data.rpartition(")")
        fields = rest.split(" ")
        # rest starts with " S ...": fields[0] == "" and fields[1] is field 3, so utime (field 14) is fields[12]
        fields[12] = str(int(fields[12]) + int(ticks))
        write_atomic(path, head + ")" + " ".join(fields))
