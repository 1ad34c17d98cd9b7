"""Each VM's energy published for its guest: `DIR/<vm>/` in the powercap layout
(`kubejoule-agent run --vm-energy-dir DIR`; docs/agent-devices.md).

Per VM the host's attribution (`VMPower.watts`: its CPU time's share of the active power of the
part that holds it, RAPL's packages and DRAM or psys) is added up every interval into
`energy_uj`, a monotonic microjoule counter wrapping at `max_energy_range_uj`, beside `name`. The
guest reads it as a zone (agent/device/host_energy.py). Rules:

* one directory per VM, so that each can be shared into its own guest and no guest sees another's;
  named after the VM (its uuid when the name is no safe file name; two VMs of one name: neither is
  published, never one's energy under the other's name);
* every file is written whole (a temporary file, then `os.replace`): a guest never reads half a
  number. `energy_uj` is rewritten every interval in which the VM's energy is known, even when it
  did not grow, so its modification time tells the guest the counter is alive;
* an interval whose energy is unknown (a gap on the host: RAPL unreadable, the VM's CPU time
  unknown) adds nothing and does not write: the counter stops, the guest sees it stale, no energy
  is invented;
* a VM that ends takes its directory with it — once it has been missing from `GONE_AFTER`
  snapshots in a row, so that one read that missed a running VM never pulls the share from under
  its guest (virtiofsd holds the directory it was started with: a new one would not reach the
  guest). A directory made beforehand (libvirt's `prepare` hook: virtiofsd needs it to exist when
  the VM starts) is used as it is. A restarted agent resumes a running VM's counter from its file,
  so the counter never falls without a wrap.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from agent.monitor.snapshot import Snapshot, VMPower

log = logging.getLogger("kubejoule.agent.vm_energy")

# A wrap every 2^50 µJ (about 36 years at 1 kW): so far that a counter that fell is almost surely
# reset, not wrapped, and the guest's plausibility rule refuses it.
MAX_ENERGY_RANGE_UJ = 2**50
FILES = ("name", "energy_uj", "max_energy_range_uj")
GONE_AFTER = 2  # snapshots in a row without the VM before its directory is removed
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}\Z")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def directory_name(vm: VMPower) -> str | None:
    """The VM's directory: its name when that is a safe file name, else its uuid, else None."""
    for candidate in (vm.name, vm.uuid):
        if candidate and _SAFE_NAME.match(candidate):
            return candidate
    return None


def _write(dir_fd: int, name: str, data: bytes) -> None:
    """name := data inside dir_fd, atomically (a reader sees the old file or the new one)."""
    tmp = f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


@dataclass
class _Counter:
    fd: int  # the VM's directory, kept open
    microjoules: float  # the counter's value, within [0, range)


class VmEnergyWriter:
    """Keeps `DIR/<vm>/` for every VM of each Snapshot given to `update`."""

    def __init__(self, directory: Path, max_energy_range_uj: int = MAX_ENERGY_RANGE_UJ) -> None:
        self.directory = Path(directory)
        self.max_energy_range_uj = max_energy_range_uj
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.directory, _DIR_FLAGS)
        self._counters: dict[str, _Counter] = {}
        self._refused: set[str] = set()  # VMs already logged as not published
        self._missing: dict[str, int] = {}  # published VMs missing from the last snapshots: how many
        self._failing: set[str] = set()  # VMs whose last write failed (logged once, until one succeeds)
        # directories left by an earlier run: resumed if their VM runs, removed at the first update if not
        self._leftover = {entry.name for entry in os.scandir(self._fd) if entry.is_dir(follow_symlinks=False)
                          and _ours(self._fd, entry.name)}

    def close(self) -> None:
        """Release the descriptors; the directories stay (a restarted agent resumes them)."""
        for counter in self._counters.values():
            os.close(counter.fd)
        self._counters.clear()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    @property
    def vms(self) -> list[str]:
        return sorted(self._counters)

    def update(self, snapshot: Snapshot) -> None:
        """One interval: add each VM's energy, write its counter, remove the directories of VMs gone."""
        by_directory: dict[str, list[VMPower]] = {}
        for vm in snapshot.vms:
            name = directory_name(vm)
            if name is None:
                self._refuse(vm.name, "its name and uuid are no safe directory names")
                continue
            by_directory.setdefault(name, []).append(vm)
        for name, vms in by_directory.items():
            if len(vms) > 1:
                self._refuse(name, f"{len(vms)} qemu processes have this name: whose energy is whose is unknown")
                continue
            try:
                self._advance(name, vms[0].watts, snapshot.interval_seconds)
            except OSError as exc:  # a full disk, a directory removed under us: tried again next interval
                if name not in self._failing:
                    self._failing.add(name)
                    log.warning("cannot write a VM's energy", extra={"fields": {"vm": name, "error": str(exc)}})
                self._drop(name, remove=False)
            else:
                if name in self._failing:
                    self._failing.discard(name)
                    log.info("writing a VM's energy again", extra={"fields": {"vm": name}})
        self._missing = {name: self._missing.get(name, 0) + 1
                         for name in [*self._counters, *self._leftover] if name not in by_directory}
        for name, count in self._missing.items():
            if count >= GONE_AFTER:
                self._drop(name, remove=True)
                self._leftover.discard(name)
        self._missing = {name: count for name, count in self._missing.items() if count < GONE_AFTER}

    def _refuse(self, name: str, reason: str) -> None:
        if name not in self._refused:
            self._refused.add(name)
            log.warning("a VM's energy is not published", extra={"fields": {"vm": name, "reason": reason}})

    def _advance(self, name: str, watts: float | None, interval_seconds: float) -> None:
        counter = self._counters.get(name) or self._open(name)
        if watts is None:
            return  # a gap on the host: the counter stops, and is not rewritten
        counter.microjoules = (counter.microjoules + max(watts, 0.0) * interval_seconds * 1e6) % self.max_energy_range_uj
        _write(counter.fd, "energy_uj", b"%d\n" % int(counter.microjoules))

    def _open(self, name: str) -> _Counter:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=self._fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=self._fd)
        start = 0.0
        with contextlib.suppress(OSError, ValueError):  # there already (a restart, a failed write): resumed
            value = int(_read(fd, "energy_uj"))
            range_before = int(_read(fd, "max_energy_range_uj"))
            if 0 <= value < self.max_energy_range_uj and range_before == self.max_energy_range_uj:
                start = float(value)
        try:
            _write(fd, "name", f"{name}\n".encode())
            _write(fd, "max_energy_range_uj", b"%d\n" % self.max_energy_range_uj)
            _write(fd, "energy_uj", b"%d\n" % int(start))
        except OSError:
            os.close(fd)
            raise
        self._counters[name] = counter = _Counter(fd, start)
        self._leftover.discard(name)
        return counter

    def _drop(self, name: str, remove: bool) -> None:
        counter = self._counters.pop(name, None)
        if counter is not None:
            os.close(counter.fd)
        if remove:
            try:
                _remove(self._fd, name)
            except OSError as exc:
                log.warning("cannot remove an ended VM's directory", extra={"fields": {"vm": name, "error": str(exc)}})


def _read(dir_fd: int, name: str) -> str:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return os.read(fd, 64).decode()
    finally:
        os.close(fd)


def _ours(dir_fd: int, name: str) -> bool:
    """A directory this writer made: its counter files and nothing else (never remove another's)."""
    try:
        entries = set(_list(dir_fd, name))
    except OSError:
        return False
    return "energy_uj" in entries and entries <= {*FILES, *(f".{f}.tmp" for f in FILES)}


def _list(dir_fd: int, name: str) -> list[str]:
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _remove(dir_fd: int, name: str) -> None:
    """Remove DIR/name if it is one of ours (its files, then itself)."""
    if not _ours(dir_fd, name):
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        for entry in os.listdir(fd):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
