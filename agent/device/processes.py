"""Per-process CPU time from `/proc/<pid>/stat`.

One read per process and no regex: the agent reads every process every interval, and the
per-sample budget (25 ms with 1000 processes) leaves about 10 µs per process. `comm` is taken
from the stat line itself (it is field 2, the same 15-character name as `/proc/<pid>/comm`),
so one file per process is enough. Processes that exit between listing /proc and reading their
stat are normal, not errors.

A process is identified across samples by (pid, start time): a pid reused between two samples
is a new process, and all of its CPU time is new. A process whose stat could not be read or
parsed (EACCES, EIO, garbage) has not exited: its pid is in `ProcessReader.failed`, so the
sampler does not take it for a new process at its next good read.

With `vms_only` (the agent's `run` with `--process-top 0`, where only qemu/KVM VMs are views),
on a real procfs, every process's `/proc/<pid>/comm` is read (the same name as stat's field 2,
which the kernel generates for about a quarter of a stat line's cost) and only the qemu
processes' stat: the others' CPU time is used by nothing then. comm is re-read every interval,
never cached: a process that execs into qemu keeps its pid and start time but changes its comm.
Its CPU time at the last read was not read, so for that one interval it is in `execed` (a qemu
process not read last time whose start time is before the last read began), never counted
from 0 as a new process would be.
"""

from __future__ import annotations

import errno
import os
import resource
import time
from typing import NamedTuple

from agent.device.hostfs import HostFS
from agent.device.procstat import clock_ticks_per_second
from agent.device.vms import QEMU_COMM_PREFIXES

_STAT_SIZE = 4096  # a stat line is far shorter
_UNREADABLE = b""  # what a fetch returns for a stat that is there but cannot be read (never a stat line)
_GONE_ERRNOS = frozenset({errno.ENOENT, errno.ESRCH})


class ProcStat(NamedTuple):
    """One process at one read. A NamedTuple, not a dataclass: a thousand are built per
    sample, and a tuple is several times cheaper to create."""

    pid: int
    comm: bytes  # raw, as the kernel gives it; decode only for display
    cpu_ticks: int  # utime + stime, clock ticks; includes guest time (vCPU threads)
    start_ticks: int  # start time after boot, clock ticks

    @property
    def comm_text(self) -> str:
        return self.comm.decode("utf-8", errors="replace")


def parse_stat(pid: int, data: bytes) -> ProcStat:
    """Parse one `/proc/<pid>/stat` line. The comm may hold spaces and parentheses, so the
    fields after it are found from the last ')'."""
    open_paren = data.find(b"(")
    close_paren = data.rfind(b")")
    if open_paren < 0 or close_paren < open_paren:
        raise ValueError("no (comm) in stat")
    fields = data[close_paren + 2 :].split(None, 20)
    # fields[0] is field 3 (state): utime is field 14, stime 15, starttime 22.
    return ProcStat(
        pid,
        data[open_paren + 1 : close_paren],
        int(fields[11]) + int(fields[12]),
        int(fields[19]),
    )


def is_real_procfs(procfs: str) -> bool:
    """procfs files report size 0 and are regenerated on every read; a fixture tree's files are
    ordinary files (and tests replace them by rename), so descriptors must not be kept there."""
    try:
        return os.stat(f"{procfs}/self/stat").st_size == 0
    except OSError:
        return False


class ProcessReader:
    """Reads every process's stat; keeps one descriptor per process on a real procfs.

    Re-reading an open `/proc/<pid>/stat` with pread at offset 0 regenerates it, and costs about
    half of open + read + close (the path lookup and the procfs inode are the expensive part).
    A descriptor belongs to its task: once the process exits the read fails with ESRCH, so a
    reused pid is never mistaken for the old process. Descriptors are kept up to a budget below
    the open-files limit; beyond it, processes are read with open + read + close.
    """

    RESERVED_DESCRIPTORS = 256  # left for sockets, cgroup and sysfs reads

    def __init__(self, fs: HostFS, vms_only: bool = False) -> None:
        self.fs = fs
        self.base = str(fs.procfs)
        self.keep_open = not fs.record and is_real_procfs(self.base)
        # Only qemu processes' stat (see the module docstring); fixture trees and snapshots are
        # read whole, so a replay can list any process.
        self.vms_only = vms_only and self.keep_open
        self._open: dict[str, int] = {}  # pid (as listed) -> descriptor of its stat
        self._comm_open: dict[str, int] = {}  # with vms_only: pid -> descriptor of its comm
        # The last stat line of each process and its parse: an idle process's line does not
        # change between samples, and comparing bytes is far cheaper than parsing them.
        self._last: dict[str, tuple[bytes, ProcStat]] = {}
        self._directory: int | None = None
        self._budget = 0
        self.cgroup_descriptors = 0  # left for the pod usage files the sampler keeps open (agent/device/cgroups.py)
        self.failed: frozenset[int] = frozenset()  # pids whose stat was there but unreadable last read
        # vms_only: processes that became qemu (exec) since the last read, whose CPU time then is unknown
        self.execed: frozenset[int] = frozenset()
        self._last_read_ticks: int | None = None  # CLOCK_BOOTTIME in clock ticks when the last read began
        self._ticks = clock_ticks_per_second()
        if self.keep_open:
            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            limit = soft if soft != resource.RLIM_INFINITY else 65536
            self.cgroup_descriptors = min(2048, limit // 4)
            self._budget = max(0, limit - self.RESERVED_DESCRIPTORS - self.cgroup_descriptors)

    def read(self) -> tuple[dict[int, ProcStat], int]:
        """Every process's CPU time; returns (processes by pid, how many stat files were garbage).
        A process gone before its stat could be read is simply left out."""
        processes: dict[int, ProcStat] = {}
        unparsable = 0
        try:
            names = os.listdir(self.base)
        except OSError:
            return processes, 0
        fetch = self._fetch if not self.fs.record else self._fetch_recorded
        last = self._last
        parsed: dict[str, tuple[bytes, ProcStat]] = {}
        failed: list[int] = []
        # A qemu process not read last time that had started before the last read began was there
        # then under another comm: it exec'd into qemu, and its CPU time then was not read.
        # (Start times count from boot in ticks, as CLOCK_BOOTTIME does, in the reader's namespace.)
        existed_before = self._last_read_ticks
        self._last_read_ticks = int(time.clock_gettime(time.CLOCK_BOOTTIME) * self._ticks)
        execed: list[int] = []
        if self.vms_only:
            names, unreadable = self._qemu_names(names)
            unparsable += len(unreadable)
            failed.extend(unreadable)
        for name in names:
            if not name.isdigit():
                continue
            data = fetch(name)
            if data is None:
                continue  # exited between the listing and the read (ESRCH, ENOENT)
            previous = last.get(name)
            if previous is not None and previous[0] == data:
                stat = previous[1]
            else:
                try:
                    stat = parse_stat(int(name), data)
                except (ValueError, IndexError):
                    unparsable += 1
                    failed.append(int(name))
                    continue
            if previous is None and self.vms_only and existed_before is not None and stat.start_ticks < existed_before:
                execed.append(stat.pid)
            parsed[name] = (data, stat)
            processes[stat.pid] = stat
        self._last = parsed
        self.failed = frozenset(failed)
        self.execed = frozenset(execed)
        if self._open and len(self._open) > len(processes):
            for name in [n for n in self._open if int(n) not in processes]:
                os.close(self._open.pop(name))
        return processes, unparsable

    def _qemu_names(self, names: list[str]) -> tuple[list[str], list[int]]:
        """(the listed processes whose comm is qemu's, the pids whose comm could not be read),
        from /proc/<pid>/comm through kept descriptors. The hot loop of `run`: kept lean."""
        kept = self._comm_open
        pread = os.pread
        qemu: list[str] = []
        unreadable: list[int] = []
        alive = 0
        for name in names:
            fd = kept.get(name)
            comm: bytes | None
            if fd is not None:
                try:
                    comm = pread(fd, 64, 0)
                except OSError:  # exited (a reused pid is another task): read afresh
                    os.close(kept.pop(name))
                    comm = self._open_and_read(name, "comm", kept)
            elif name.isdigit():
                comm = self._open_and_read(name, "comm", kept)
            else:
                continue
            if comm is None:
                continue  # exited
            alive += 1
            if comm.startswith(QEMU_COMM_PREFIXES):
                qemu.append(name)
            elif not comm:
                unreadable.append(int(name))
        if len(kept) > alive:  # descriptors of processes that exited
            listed = set(names)
            for name in [n for n in kept if n not in listed]:
                os.close(kept.pop(name))
        return qemu, unreadable

    def _fetch_recorded(self, name: str) -> bytes | None:
        try:
            return self.fs.read_if_exists(f"{self.base}/{name}/stat")
        except OSError as exc:
            return None if exc.errno in _GONE_ERRNOS else _UNREADABLE

    def _fetch(self, name: str) -> bytes | None:
        fd = self._open.get(name)
        if fd is not None:
            try:
                return os.pread(fd, _STAT_SIZE, 0)
            except OSError:  # the process exited (and its pid may be reused): read afresh
                os.close(self._open.pop(name))
        return self._open_and_read(name, "stat", self._open)

    def _open_and_read(self, name: str, file: str, kept: dict[str, int]) -> bytes | None:
        if self._directory is None:
            self._directory = os.open(self.base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = os.open(f"{name}/{file}", os.O_RDONLY | os.O_CLOEXEC, dir_fd=self._directory)
        except OSError as exc:
            return None if exc.errno in _GONE_ERRNOS else _UNREADABLE
        try:
            data = os.read(fd, _STAT_SIZE)
        except OSError as exc:
            os.close(fd)
            return None if exc.errno in _GONE_ERRNOS else _UNREADABLE
        if self.keep_open and len(self._open) + len(self._comm_open) < self._budget:
            kept[name] = fd
        else:
            os.close(fd)
        return data

    def close(self) -> None:
        for fd in (*self._open.values(), *self._comm_open.values()):
            os.close(fd)
        self._open.clear()
        self._comm_open.clear()
        if self._directory is not None:
            os.close(self._directory)
            self._directory = None

    @property
    def open_descriptors(self) -> int:
        return len(self._open) + len(self._comm_open)


def cpu_ticks_delta(before: ProcStat | None, after: ProcStat) -> int:
    """Ticks used in the interval; a process new since `before` (or a reused pid) counts from 0."""
    if before is None or before.start_ticks != after.start_ticks:
        return after.cpu_ticks
    return max(0, after.cpu_ticks - before.cpu_ticks)
