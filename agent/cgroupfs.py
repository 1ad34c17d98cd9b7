"""Reads of a real cgroupfs kept cheap, for `run` (agent/cgroups.py reads the layout).

* `KeptUsageFiles`: pod usage files kept open between samples and re-read with pread.
* `process_pod`: which pod holds a process, from its own /proc/<pid>/cgroup — what a VM needs
  when the reading has no cgroup.procs.
"""

from __future__ import annotations

import os

from agent.cgroups import CgroupLayout, pod_uid
from agent.hostfs import HostFS


class KeptUsageFiles:
    """The usage files' descriptors, kept between reads on a real cgroupfs: pread at offset 0
    regenerates a cgroup file (a seq_file) for about a tenth of open + read + close. A removed
    cgroup's descriptor reads ENODEV, and the path is then read afresh (gone, or a new cgroup of
    that name). Plain files (fixture trees, whose tests replace files by rename) are never kept:
    they have a size, cgroupfs files do not. Not used when reads are recorded (snapshots)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}
        self._seen: set[str] = set()

    def read(self, path: str) -> bytes | None:
        """The file's bytes; None when it is not there (the cgroup was removed); OSError else."""
        self._seen.add(path)
        fd = self._open.get(path)
        if fd is not None:
            try:
                return os.pread(fd, 4096, 0)
            except OSError:
                os.close(self._open.pop(path))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            data = os.read(fd, 65536)
            keep = len(self._open) < self.limit and os.fstat(fd).st_size == 0
        except BaseException:
            os.close(fd)
            raise
        if keep:
            self._open[path] = fd
        else:
            os.close(fd)
        return data

    def sweep(self) -> None:
        """Close the descriptors of files not read since the last sweep (cgroups gone)."""
        for path in [p for p in self._open if p not in self._seen]:
            os.close(self._open.pop(path))
        self._seen.clear()

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()

    @property
    def open_descriptors(self) -> int:
        return len(self._open)


def process_pod(fs: HostFS, pid: int, layout: CgroupLayout) -> str | None:
    """The uid of the pod whose cgroup holds process PID, from its `/proc/<pid>/cgroup` line for
    the CPU accounting hierarchy (v2: `0::`; v1: the one whose controllers include cpuacct);
    None for a process outside every pod. The pod is found by its cgroup's name anywhere in
    the path, so a path seen through a cgroup namespace (`/../../kubepods-…`) or a cgroup
    nested inside a container gives the same pod. OSError when the file cannot be read
    (FileNotFoundError or ProcessLookupError: the process exited), ValueError when it has no
    line for that hierarchy."""
    data = fs.read_bytes(fs.proc(pid, "cgroup"))
    for line in data.splitlines():
        hierarchy, _, rest = line.partition(b":")
        controllers, _, path = rest.partition(b":")
        if layout.version == 2:
            wanted = hierarchy == b"0" and controllers == b""
        else:
            wanted = b"cpuacct" in controllers.split(b",")
        if wanted:
            for part in path.decode("utf-8", errors="replace").split("/"):
                uid = pod_uid(part) if part.startswith(("pod", "kube")) else None
                if uid is not None:
                    return uid
            return None
    raise ValueError(f"{fs.proc(pid, 'cgroup')} has no line for the CPU accounting hierarchy")
