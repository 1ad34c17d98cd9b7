"""The RAPL meter: energy counters read through the Linux powercap interface.

The kernel lays zones out as symlinks in `<sysfs>/class/powercap/` pointing into
`devices/virtual/powercap/<control type>/...`; subzones are also plain subdirectories of their
parent there, so walking the device tree sees each subzone twice. We list `class/powercap`
once, and identify zones by their directory name (`intel-rapl:0:2`), never by walking.

Zone ids are written by the kernel as `"%s:%x"` (drivers/powercap/powercap_sys.c): the
parent's name, a colon and the zone's index in lowercase hex, at every level — the eleventh
package is `intel-rapl:a`, a subzone of it `intel-rapl:a:0`. An entry that has a `name` file but
an id we do not understand is reported (an error, so a gap and an error count), never dropped.

Which zone is which comes from its `name` file, not its index: `intel-rapl:1` can be `psys` or
`package-1`. `core` and `uncore` are inside `package` and never added to it; `mmio` zones
repeat MSR zones of the same name and are dropped when the MSR zone exists.

Nothing read here is trusted blindly (DESIGN.md, "Plausibility"): a counter outside its range
or an interval's energy above the zone's physical bound is an `implausible` gap; a zone whose
name cannot be read is unidentified, and since it may be part of node power (a `dram`, a `psys`)
node power is then unknown — never the sum of the zones that happened to be readable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from agent.device.energy import (
    COUNTER_LIMIT_UJ,
    PACKAGE_NAME,
    ImplausibleError,
    check_counter_uj,
    usable_max_power_uw,
    zone_kind,
)
from agent.device.gaps import GAP_IMPLAUSIBLE
from agent.device.hostfs import HostFS

POWERCAP_CLASS = ("class", "powercap")
# The key of RaplReading.errors when class/powercap itself cannot be listed (no zone is known).
CLASS_LISTING = "class/powercap"
_ZONE_ID = re.compile(r"^(?P<control>[a-z0-9_-]+)(?P<indices>(?::[0-9a-f]+)+)$")
_ZONE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_CONSTRAINT_MAX_POWER = re.compile(r"^constraint_\d+_max_power_uw$")

PERMISSION_HINT = (
    "energy_uj is readable only by root on kernels with the fix for CVE-2020-8694 (Platypus); "
    "run the agent as root (the privileged DaemonSet does), or check access with "
    "`kubejoule-calibrate check`"
)
NO_POWERCAP_HINT = (
    "no powercap zones under {path}: the intel_rapl_msr / intel_rapl_common driver is not "
    "loaded (try `modprobe intel_rapl_msr`), the CPU has no RAPL, or this is a virtual machine "
    "whose hypervisor does not expose RAPL"
)


@dataclass(frozen=True)
class Zone:
    """One powercap zone, as discovered."""

    zone_id: str  # directory name, e.g. "intel-rapl:0:2"
    control_type: str  # "intel-rapl", "intel-rapl-mmio", ...
    indices: tuple[int, ...]
    name: str  # contents of `name`, e.g. "package-0", "dram", "psys"
    socket: int | None
    max_energy_range_uj: int | None
    max_power_uw: int | None

    @property
    def rel_path(self) -> str:
        return "/".join((*POWERCAP_CLASS, self.zone_id))

    @property
    def is_top_level(self) -> bool:
        return len(self.indices) == 1

    @property
    def parent_id(self) -> str | None:
        if self.is_top_level:
            return None
        return zone_id_for(self.control_type, self.indices[:-1])

    @property
    def is_mmio(self) -> bool:
        return self.control_type.endswith("-mmio")

    @property
    def is_package(self) -> bool:
        return self.is_top_level and (self.name == "package" or bool(PACKAGE_NAME.match(self.name)))


@dataclass(frozen=True)
class RaplReading:
    """One read of every zone's counter."""

    present: bool  # does <sysfs>/class/powercap exist at all
    zones: dict[str, Zone] = field(default_factory=dict)
    energy_uj: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # zone id -> why its counter is unknown
    unplaced: dict[str, str] = field(default_factory=dict)  # entry with an id we cannot parse -> its name
    # zone id -> gap kind for errors that are not `unreadable` (e.g. `implausible`)
    error_kinds: dict[str, str] = field(default_factory=dict)

    @property
    def unidentified(self) -> list[str]:
        """Entries with an error, no Zone and no known name: what they are (a dram? a psys?) is
        unknown. (Unplaced entries with a name are judged by that name: `agent.monitor.rapl_power.counts_in_node_power`.)"""
        return sorted(zid for zid in self.errors if zid not in self.zones and not self.unplaced.get(zid))


def zone_id_for(control_type: str, indices: tuple[int, ...]) -> str:
    """The directory name the kernel gives a zone: `"%s:%x"` at every level."""
    return control_type + "".join(f":{i:x}" for i in indices)


def _read_int(fs: HostFS, path: Path) -> int:
    # the kernel writes digits and a newline: strip blanks only, not str.strip()'s whole set
    # (\x1c-\x1f, \x0b, \x0c too), which let "\x1c0" read as 0 J
    text = fs.read_text(path).strip(" \t\r\n")
    if not text:
        raise ValueError(f"{path.name} is empty")
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()):  # as the kernel writes it: no '+', '_' or other digits
        raise ValueError(f"{path.name} is not a number: {text[:40]!r}")
    value = int(text)
    if value < 0:
        raise ValueError(f"{path.name} is negative: {value}")
    return value


def _read_metadata(fs: HostFS, path: Path) -> int | None:
    """A zone's range or power bound: None when it is 0, not a u64 or cannot be read (as good as
    absent: a wrap then is a gap, the ceiling the zone kind's); ValueError when it is there but is
    not a number."""
    try:
        value = _read_int(fs, path)
    except OSError:
        return None
    return value if 0 < value < COUNTER_LIMIT_UJ else None


def _read_hint(fs: HostFS, path: Path) -> int | None:
    """A `constraint_*_max_power_uw`: None when it cannot be read or is not a number. It is a
    plausibility hint, not a measurement: a bad one is ignored, never a reason to lose the zone."""
    try:
        return _read_int(fs, path)
    except (OSError, ValueError):
        return None


def _socket_for(name: str, indices: tuple[int, ...], parent: Zone | None) -> int | None:
    if parent is not None:
        return parent.socket
    match = PACKAGE_NAME.match(name)
    if match:
        return int(match.group("socket"))
    if name == "package":
        return indices[0]
    return None


def _describe_os_error(path: Path, exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return f"permission denied reading {path}: {PERMISSION_HINT}"
    if isinstance(exc, FileNotFoundError):
        return f"{path} disappeared (the zone was removed)"
    return f"cannot read {path}: {exc.strerror or exc}"


def discover_zones(fs: HostFS) -> tuple[bool, dict[str, Zone], dict[str, str]]:
    """Find the zones; returns (powercap present, zones by id, zone id -> error)."""
    present, zones, errors, _ = _discover(fs)
    return present, zones, errors


def _discover(fs: HostFS) -> tuple[bool, dict[str, Zone], dict[str, str], dict[str, str]]:
    """discover_zones, and the entries with a name but no zone id we understand (-> name)."""
    class_dir = fs.sys(*POWERCAP_CLASS)
    if not class_dir.is_dir():
        return False, {}, {}, {}
    try:
        entries = fs.listdir(class_dir)
    except OSError as exc:  # present but unreadable: a gap with the reason, never a traceback
        return True, {}, {CLASS_LISTING: _describe_os_error(class_dir, exc)}, {}
    found: list[tuple[str, str, tuple[int, ...]]] = []
    errors: dict[str, str] = {}
    unplaced: dict[str, str] = {}
    for entry in entries:
        match = _ZONE_ID.match(entry)
        if match:
            indices = tuple(int(i, 16) for i in match.group("indices").split(":")[1:])
            found.append((entry, match.group("control"), indices))
        elif (class_dir / entry / "name").is_file():
            # Control types (`intel-rapl`) have no `name`; anything else that has one is a zone
            # we cannot place. Reported, so it is a gap and counted, not silently left out.
            try:
                unplaced[entry] = fs.read_text(class_dir / entry / "name").strip()
            except OSError:
                unplaced[entry] = ""
            errors[entry] = (
                f"powercap entry {entry} (name {unplaced[entry]!r}) is not a zone id as the kernel writes "
                'them ("<control type>:<hex index>[:<hex index>…]"): its energy cannot be read or placed'
            )
    # Parents before children, so a subzone can inherit its package's socket.
    found.sort(key=lambda item: (item[1], item[2]))
    zones: dict[str, Zone] = {}
    for zone_id, control, indices in found:
        directory = class_dir / zone_id
        try:
            name = fs.read_text(directory / "name").strip()
        except OSError as exc:
            errors[zone_id] = _describe_os_error(directory / "name", exc)
            continue
        if not name:
            errors[zone_id] = f"{directory / 'name'} is empty"
            continue
        if not _ZONE_NAME.match(name):  # the kernel's names are plain ASCII words ("package-0", "dram")
            errors[zone_id] = f"{directory / 'name'} is not a zone name: {name[:40]!r}"
            continue
        parent_id = zone_id_for(control, indices[:-1]) if len(indices) > 1 else None
        parent = zones.get(parent_id) if parent_id else None
        try:
            listing = fs.listdir(directory)
        except OSError as exc:
            errors[zone_id] = _describe_os_error(directory, exc)
            continue
        # The range is optional, but one that is there and is not a number makes the zone's
        # counter untrustworthy (its wraps): a gap. The power bounds are only hints for the
        # plausibility check: one that is unreadable, garbage or absurd is ignored
        # (energy.usable_max_power_uw), never a reason to lose a counter that reads fine.
        try:
            max_range = _read_metadata(fs, directory / "max_energy_range_uj") if "max_energy_range_uj" in listing else None
        except ValueError as exc:
            errors[zone_id] = f"{directory}: {exc}"
            continue
        kind = zone_kind(name)
        powers = [
            value
            for entry in listing
            if _CONSTRAINT_MAX_POWER.match(entry)
            and (value := usable_max_power_uw(kind, _read_hint(fs, directory / entry))) is not None
        ]
        zones[zone_id] = Zone(
            zone_id=zone_id,
            control_type=control,
            indices=indices,
            name=name,
            socket=_socket_for(name, indices, parent),
            max_energy_range_uj=max_range,
            max_power_uw=max(powers) if powers else None,
        )
    # mmio zones repeat the MSR zone of the same name (same package, other access path).
    msr_names = {(z.name, len(z.indices)) for z in zones.values() if not z.is_mmio}
    zones = {
        zid: z for zid, z in zones.items() if not (z.is_mmio and (z.name, len(z.indices)) in msr_names)
    }
    return True, zones, errors, unplaced


def read_rapl(fs: HostFS) -> RaplReading:
    present, zones, errors, unplaced = _discover(fs)
    energy: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for zone_id, zone in zones.items():
        path = fs.sys(*POWERCAP_CLASS, zone_id, "energy_uj")
        try:
            value = _read_int(fs, path)
            check_counter_uj(value, zone.max_energy_range_uj)
            energy[zone_id] = value
        except OSError as exc:
            errors[zone_id] = _describe_os_error(path, exc)
        except ImplausibleError as exc:
            errors[zone_id] = f"{path}: {exc}"
            kinds[zone_id] = GAP_IMPLAUSIBLE
        except ValueError as exc:
            errors[zone_id] = f"{path}: {exc}"
    return RaplReading(
        present=present, zones=zones, energy_uj=energy, errors=errors, unplaced=unplaced, error_kinds=kinds
    )


def read_counter(fs: HostFS, directory: Path) -> tuple[int | None, int | None, str | None, str | None]:
    """A counter in the powercap layout outside class/powercap (a VM's energy published by its
    host: agent/device/host_energy.py), by the rules `read_rapl` applies to a zone: `energy_uj` a
    decimal below 2^64 and within `max_energy_range_uj` (optional; garbage there is an error).
    Returns (energy_uj, max_energy_range_uj, error, gap kind of the error)."""
    path = directory / "max_energy_range_uj"
    try:
        max_range = _read_metadata(fs, path)
        path = directory / "energy_uj"
        value = _read_int(fs, path)
        check_counter_uj(value, max_range)
    except OSError as exc:
        return None, None, _describe_os_error(path, exc), None
    except ImplausibleError as exc:
        return None, None, f"{path}: {exc}", GAP_IMPLAUSIBLE
    except ValueError as exc:
        return None, None, f"{path}: {exc}", None
    return value, max_range, None, None

