"""Reads of a real cgroupfs kept cheap, for `run` (agent/device/cgroups.py reads the layout and the
files): `KeptUsageFiles`, pod usage files kept open between samples and re-read with pread."""

from __future__ import annotations

import os


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

