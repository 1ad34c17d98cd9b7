"""A VM's energy as its host measured it, read inside the guest like a RAPL zone.

On the host, `kubejoule-agent run --vm-energy-dir DIR` keeps `DIR/<vm>/` for each VM in the
powercap layout (agent/exporter/vm_energy.py): `name`, `energy_uj` (monotonic, wrapping at
`max_energy_range_uj`), `max_energy_range_uj`. Each VM's directory is shared into that VM alone
(virtiofs or 9p; docs/agent-devices.md), where the guest's agent reads it with `--host-energy DIR`
or finds it at `MOUNT_POINT` below the host root it is given (the parent of `--sysfs`: `/sys` →
`/run/kubejoule/host-energy`, the DaemonSet's `/host/sys` → `/host/run/kubejoule/host-energy`).

The counter is read by the RAPL reader's rules (`rapl.read_counter`: a decimal, below 2^64, within
its range); its deltas by the same wrap and plausibility rules (agent/monitor/host_power.py). What
only a shared file can do is tracked here: a counter whose value, modification time and inode have
not changed is one the host has not written since the last read (`unchanged_reads`; the host
rewrites it every interval whose energy it knows, even when it did not grow). Such an interval's
power is unknown, not 0 W — its energy comes with the next write, so the energy totals stay exact —
and after `STALE_READS` such reads the counter is stale: the host's agent stopped, or a gap on the
host (RAPL unreadable) stopped the counter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agent.device.gaps import GAP_UNREADABLE
from agent.device.hostfs import HostFS
from agent.device.rapl import RaplReading, Zone, read_counter

# Where the guest's agent looks when not told, below the host root (the parent of --sysfs).
MOUNT_POINT = ("run", "kubejoule", "host-energy")
# The counter's zone id in the RaplReading the delta rules take (no sysfs path: the directory).
ZONE_ID = "host-energy"
# Reads of an unchanged counter (value and modification time) after which it is stale.
STALE_READS = 3


def mount_point(sysfs: Path) -> Path:
    """The documented mount point below the host root that `sysfs` is in."""
    return Path(sysfs).parent.joinpath(*MOUNT_POINT)


def found_at_mount_point(sysfs: Path) -> Path | None:
    """The mount point when a host's counter is there (its `energy_uj`), else None."""
    directory = mount_point(sysfs)
    return directory if (directory / "energy_uj").is_file() else None


@dataclass(frozen=True)
class HostEnergyReading:
    """One read of the host's counter for this VM."""

    directory: str
    name: str | None  # the VM the host says the counter is for (its `name` file)
    energy_uj: int | None
    max_energy_range_uj: int | None
    error: str | None = None  # why the counter is unknown this read
    error_kind: str = GAP_UNREADABLE
    unchanged_reads: int = 0  # consecutive reads before this one that saw this same write

    def as_rapl(self) -> RaplReading:
        """As a one-zone RaplReading, so that its deltas follow the zones' rules exactly."""
        if self.error is not None or self.energy_uj is None:
            return RaplReading(present=True, errors={ZONE_ID: self.error or "no counter"},
                               error_kinds={ZONE_ID: self.error_kind})
        zone = Zone(ZONE_ID, "host", (0,), self.name or "host", None, self.max_energy_range_uj, None)
        return RaplReading(present=True, zones={ZONE_ID: zone}, energy_uj={ZONE_ID: self.energy_uj})


class HostEnergyReader:
    """Reads `DIR/name`, `DIR/energy_uj` and `DIR/max_energy_range_uj`; remembers the last write
    seen, to tell a counter the host stopped updating from one that moved."""

    def __init__(self, fs: HostFS, directory: Path) -> None:
        self.fs = fs
        self.directory = Path(directory)
        self._last: tuple[int, int, int] | None = None  # (energy_uj, mtime in ns, inode) of the last read
        self._unchanged = 0

    def read(self) -> HostEnergyReading:
        where = str(self.directory)
        try:
            name = self.fs.read_text(self.directory / "name").strip()
        except OSError as exc:
            self._last, self._unchanged = None, 0
            return HostEnergyReading(where, None, None, None, f"cannot read {self.directory / 'name'}: "
                                     f"{exc.strerror or exc} (is the host's directory for this VM mounted?)")
        try:
            status = os.stat(self.directory / "energy_uj")
            written = (status.st_mtime_ns, status.st_ino)
        except OSError:
            written = (-1, -1)  # read_counter says why
        value, max_range, error, kind = read_counter(self.fs, self.directory)
        if error is not None or value is None:
            self._last, self._unchanged = None, 0
            return HostEnergyReading(where, name or None, None, None, error, kind or GAP_UNREADABLE)
        if not name:
            self._last, self._unchanged = None, 0
            return HostEnergyReading(where, None, None, None, f"{self.directory / 'name'} is empty")
        seen = (value, *written)
        self._unchanged = self._unchanged + 1 if seen == self._last else 0
        self._last = seen
        return HostEnergyReading(where, name, value, max_range, unchanged_reads=self._unchanged)
