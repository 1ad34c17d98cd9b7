"""Every file the agent reads goes through one HostFS, rooted at the host's procfs and sysfs.

Taking the roots as arguments is what lets tests read checked-in fake trees and lets
`kubejoule-agent snapshot` copy exactly the files that a sample read.
"""

from __future__ import annotations

import contextlib
import os
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


def _inside(rel: Path) -> bool:
    """Is REL a relative path that stays below its root (no absolute part, no `..` out)?"""
    normal = os.path.normpath(rel)
    return not os.path.isabs(normal) and normal != ".." and not normal.startswith("../")


def _open_parent(root: Path, rel: Path) -> int:
    """A descriptor of root/rel's parent directory, made as needed. Every directory on the way is
    opened relative to the one before with O_NOFOLLOW: a symlink there (one a crafted tree or
    someone else put in the snapshot directory) is refused (OSError), never followed."""
    if not _inside(rel) or ".." in rel.parts:
        raise ValueError(f"{rel} is not inside {root}")
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in rel.parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_inside(root: Path, rel: Path, data: bytes, mode: int = 0o644) -> None:
    """Write root/rel and nothing outside root: no symlink followed on the way or at the end."""
    parent = _open_parent(root, rel)
    try:
        fd = os.open(rel.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode & 0o777, dir_fd=parent)
    finally:
        os.close(parent)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode & 0o777)
    finally:
        os.close(fd)


def link_inside(root: Path, rel: Path, target: str) -> None:
    """Make root/rel a symlink to TARGET, only if TARGET (relative) stays inside root: the check
    comes before the link, so a crafted tree's link to `../../..` is never made."""
    if os.path.isabs(target) or not _inside(rel.parent / target):
        raise ValueError(f"{rel} -> {target} leads outside {root}")
    parent = _open_parent(root, rel)
    try:
        with contextlib.suppress(FileExistsError):
            os.symlink(target, rel.name, dir_fd=parent)
    finally:
        os.close(parent)


def copy_preserving_links(src_root: Path, rel: Path, dst_root: Path, data: bytes | None = None) -> bool:
    """Copy src_root/rel to dst_root/rel (DATA instead of its bytes when given), recreating any
    symlinks met on the way.

    The kernel's powercap tree is reached through symlinks in class/powercap; a snapshot must
    keep them, or a replay would see a different layout from the host. Nothing is written or
    linked outside dst_root, whatever the source tree holds (write_inside, link_inside).
    Returns False when the file could not be read or written (it is then left out).
    """
    parts = rel.parts
    current = Path()
    for index, part in enumerate(parts):
        current = current / part
        src = src_root / current
        if src.is_symlink():
            target = os.readlink(src)
            if os.path.isabs(target):
                # An absolute link would point outside the snapshot; follow it as a plain path.
                resolved = Path(os.path.relpath(os.path.realpath(src), os.path.realpath(src_root)))
                link = os.path.relpath(resolved, current.parent)
            else:
                resolved = Path(os.path.normpath(current.parent / target))
                link = target
            if not _inside(resolved):
                return False  # checked before any link is made
            try:
                link_inside(dst_root, current, link)
            except (OSError, ValueError):
                return False
            rest = Path(*parts[index + 1 :]) if index + 1 < len(parts) else Path()
            return copy_preserving_links(src_root, resolved / rest, dst_root, data)
    src = src_root / rel
    try:
        if data is None and src.is_dir():
            os.close(_open_parent(dst_root, rel / "."))
            return True
        mode = src.lstat().st_mode if src.exists() else 0o644
        if data is None:
            data = src.read_bytes()
        write_inside(dst_root, rel, data, mode)
    except (OSError, ValueError):
        return False
    return True
