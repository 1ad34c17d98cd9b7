"""Every file the agent reads goes through one HostFS, rooted at the host's procfs and sysfs.

Taking the roots as arguments is what lets tests read checked-in fake trees and lets
`kubejoule-agent snapshot` copy exactly the files that a sample read.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

_CHUNK = 65536


@dataclass
class HostFS:
    """Readers for one host's /proc and /sys, optionally recording every path read."""

    procfs: Path = Path("/proc")
    sysfs: Path = Path("/sys")
    record: bool = False
    recorded: set[Path] = field(default_factory=set)
    # With `record`, the bytes each read returned: a snapshot writes these rather than
    # re-reading, so it holds what the sample saw (processes exit, counters move).
    recorded_bytes: dict[Path, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.procfs = Path(self.procfs)
        self.sysfs = Path(self.sysfs)

    @property
    def cgroup_root(self) -> Path:
        return self.sysfs / "fs" / "cgroup"

    def proc(self, *parts: str | int) -> Path:
        return self.procfs.joinpath(*(str(p) for p in parts))

    def sys(self, *parts: str) -> Path:
        return self.sysfs.joinpath(*parts)

    def read_text(self, path: Path) -> str:
        """Read a whole file; OSError (incl. PermissionError) propagates to the caller."""
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def read_bytes(self, path: Path | str) -> bytes:
        """Read a whole file with plain syscalls (no buffered file object: the agent reads
        thousands of small procfs and cgroup files per sample). OSError propagates."""
        if self.record:
            self.recorded.add(Path(path))
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, _CHUNK)
            if len(data) == _CHUNK:  # rare: a file larger than one chunk
                parts = [data]
                while chunk := os.read(fd, _CHUNK):
                    parts.append(chunk)
                data = b"".join(parts)
        finally:
            os.close(fd)
        if self.record:
            self.recorded_bytes[Path(path)] = data
        return data

    def read_if_exists(self, path: Path | str) -> bytes | None:
        """Like read_bytes, but a file that is not there (a process that exited, a cgroup that
        was removed) is None and is not recorded: churn, not something a snapshot misses.
        Other errors (permissions, EIO) propagate and stay recorded."""
        try:
            return self.read_bytes(path)
        except (FileNotFoundError, NotADirectoryError, ProcessLookupError):
            if self.record:
                self.recorded.discard(Path(path))
            return None

    def listdir(self, path: Path | str) -> list[str]:
        """Directory entries, sorted; a missing directory is an empty list."""
        try:
            return sorted(os.listdir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def subdirs(self, path: Path | str) -> list[str]:
        """Names of the subdirectories of `path` (symlinks to directories included), sorted;
        a missing directory, or one that vanishes while listed, is an empty list."""
        try:
            with os.scandir(path) as entries:
                return sorted(e.name for e in entries if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return []


def copy_preserving_links(src_root: Path, rel: Path, dst_root: Path) -> bool:
    """Copy src_root/rel to dst_root/rel, recreating any symlinks met on the way.

    The kernel's powercap tree is reached through symlinks in class/powercap; a snapshot must
    keep them, or a replay would see a different layout from the host. Returns False when the
    file could not be read (it is then left out of the snapshot).
    """
    parts = rel.parts
    current = Path()
    for index, part in enumerate(parts):
        current = current / part
        src = src_root / current
        dst = dst_root / current
        if src.is_symlink():
            target = os.readlink(src)
            if os.path.isabs(target):
                # An absolute link would point outside the snapshot; follow it as a plain path.
                resolved = Path(os.path.relpath(os.path.realpath(src), os.path.realpath(src_root)))
            else:
                resolved = Path(os.path.normpath(current.parent / target))
            if not dst.is_symlink() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                if os.path.isabs(target):
                    os.symlink(os.path.relpath(dst_root / resolved, dst.parent), dst)
                else:
                    os.symlink(target, dst)
            rest = Path(*parts[index + 1 :]) if index + 1 < len(parts) else Path()
            if str(resolved).startswith(".."):
                return False
            return copy_preserving_links(src_root, resolved / rest, dst_root)
    src = src_root / rel
    dst = dst_root / rel
    try:
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
            return True
        data = src.read_bytes()
    except OSError:
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    shutil.copymode(src, dst)
    return True
