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

from agent.energy import (
    COUNTER_LIMIT_UJ,
    CounterError,
    ImplausibleError,
    check_counter_uj,
    check_power,
    energy_delta_uj,
    power_ceiling_watts,
    uj_to_joules,
    wrap_period_seconds,
)
from agent.hostfs import HostFS
from agent.snapshot import (
    GAP_IMPLAUSIBLE,
    GAP_INCOMPLETE,
    GAP_UNKNOWN,
    GAP_UNREADABLE,
    Gap,
    ZonePower,
)

POWERCAP_CLASS = ("class", "powercap")
# The key of RaplReading.errors when class/powercap itself cannot be listed (no zone is known).
CLASS_LISTING = "class/powercap"
_ZONE_ID = re.compile(r"^(?P<control>[a-z0-9_-]+)(?P<indices>(?::[0-9a-f]+)+)$")
_PACKAGE_NAME = re.compile(r"^package-(?P<socket>\d+)(?:-die-\d+)?$")
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
        return self.is_top_level and (self.name == "package" or bool(_PACKAGE_NAME.match(self.name)))


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
        unknown. (Unplaced entries with a name are judged by that name: `_counts_in_node_power`.)"""
        return sorted(zid for zid in self.errors if zid not in self.zones and not self.unplaced.get(zid))


def zone_id_for(control_type: str, indices: tuple[int, ...]) -> str:
    """The directory name the kernel gives a zone: `"%s:%x"` at every level."""
    return control_type + "".join(f":{i:x}" for i in indices)


def zone_kind(name: str) -> str:
    """The kind of a zone for the `zone` label: `package-0`, `package-1-die-0` and AMD's `package`
    are all `package` (the socket is its own label); `core`, `uncore`, `dram`, `psys` as named."""
    return "package" if _PACKAGE_NAME.match(name) else name


def _read_int(fs: HostFS, path: Path) -> int:
    text = fs.read_text(path).strip()
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


def _socket_for(name: str, indices: tuple[int, ...], parent: Zone | None) -> int | None:
    if parent is not None:
        return parent.socket
    match = _PACKAGE_NAME.match(name)
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
        # The range and the power bounds are optional, but one that is there and is not a
        # number makes the zone's counter untrustworthy (its wraps, its ceiling): a gap.
        try:
            powers = [
                value
                for entry in listing
                if _CONSTRAINT_MAX_POWER.match(entry)
                and (value := _read_metadata(fs, directory / entry)) is not None
            ]
            max_range = _read_metadata(fs, directory / "max_energy_range_uj") if "max_energy_range_uj" in listing else None
        except ValueError as exc:
            errors[zone_id] = f"{directory}: {exc}"
            continue
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


def _counts_in_node_power(name: str) -> bool:
    """Could a zone of this name be part of node power (psys, a package or its dram)?"""
    return name in ("psys", "dram", "package") or bool(_PACKAGE_NAME.match(name))


def node_zone_ids(zones: dict[str, Zone]) -> tuple[str, list[str]]:
    """Which zones make up node power: ("psys", [psys]) or ("packages", [package…, dram…])."""
    psys = [zid for zid, z in zones.items() if z.is_top_level and z.name == "psys"]
    if psys:
        return "psys", sorted(psys)
    packages = [zid for zid, z in zones.items() if z.is_package]
    drams = [
        zid
        for zid, z in zones.items()
        if z.name == "dram" and (z.is_top_level or (z.parent_id in zones and zones[z.parent_id].is_package))
    ]
    return "packages", sorted(packages) + sorted(drams)


@dataclass(frozen=True)
class NodePower:
    watts: float | None
    zones: tuple[ZonePower, ...]
    gaps: tuple[Gap, ...]
    present: bool
    zone_ids: tuple[str, ...]
    # RAPL is there but could not be read or identified (class/powercap unlistable, a zone whose
    # name is unreadable): node power must stay a gap, never be estimated in its place
    failing: bool = False


def _zone_delta(
    before: RaplReading, after: RaplReading, zone_id: str, zone: Zone | None, interval_seconds: float
) -> tuple[float | None, str | None, str]:
    """One zone's energy in the interval in joules, or (None, reason, gap kind)."""
    if zone_id in after.errors:
        return None, after.errors[zone_id], after.error_kinds.get(zone_id, GAP_UNREADABLE)
    if zone_id in before.errors:
        return None, before.errors[zone_id], before.error_kinds.get(zone_id, GAP_UNREADABLE)
    if zone_id not in after.zones:
        return None, f"zone {zone_id} disappeared between samples", GAP_UNKNOWN
    if zone_id not in before.zones or zone is None:
        return None, f"zone {zone_id} appeared between samples; its first delta comes next interval", GAP_UNKNOWN
    max_range = after.zones[zone_id].max_energy_range_uj or before.zones[zone_id].max_energy_range_uj
    period = wrap_period_seconds(max_range, zone.max_power_uw)
    if period is not None and interval_seconds > period:
        return None, (
            f"interval {interval_seconds:g} s is longer than the counter's wrap period "
            f"{period:.1f} s at the zone's maximum power: more than one wrap may have happened"
        ), GAP_UNKNOWN
    try:
        joules = uj_to_joules(energy_delta_uj(before.energy_uj[zone_id], after.energy_uj[zone_id], max_range))
        check_power(joules, interval_seconds, power_ceiling_watts(zone_kind(zone.name), zone.max_power_uw))
    except ImplausibleError as exc:
        return None, str(exc), GAP_IMPLAUSIBLE
    except CounterError as exc:
        return None, str(exc), GAP_UNKNOWN
    return joules, None, GAP_UNKNOWN


def _unidentified_in_node(kind: str, unidentified: list[str]) -> list[str]:
    """Unidentified entries that may be part of node power: any of them when node power is
    packages + dram (each may be a dram, a package or a psys); only top-level ones under psys
    (a subzone is inside a package, which psys already covers)."""
    if kind == "psys":
        return [zid for zid in unidentified if zid.count(":") == 1]
    return unidentified


def compute_power(before: RaplReading, after: RaplReading, interval_seconds: float) -> NodePower:
    """Zone and node watts between two readings; unknowns become gaps, never numbers."""
    gaps: list[Gap] = []
    if not after.present:
        return NodePower(None, (), (), False, ())
    for reading in (before, after):
        if CLASS_LISTING in reading.errors:
            unlisted = Gap("node", reading.errors[CLASS_LISTING], GAP_UNREADABLE)
            return NodePower(None, (), (unlisted,), True, (), failing=True)
    zone_powers: list[ZonePower] = []
    known_joules: dict[str, float] = {}
    for zone_id in sorted(set(before.zones) | set(after.zones) | set(before.errors) | set(after.errors)):
        zone = after.zones.get(zone_id) or before.zones.get(zone_id)
        joules, reason, gap_kind = _zone_delta(before, after, zone_id, zone, interval_seconds)
        if joules is not None:
            known_joules[zone_id] = joules
        if reason is not None:
            gaps.append(Gap(f"zone {zone_id}" + (f" ({zone.name})" if zone else ""), reason, gap_kind))
        if zone is not None:
            zone_powers.append(
                ZonePower(
                    zone=zone.name,
                    zone_id=zone_id,
                    socket=zone.socket,
                    path=zone.rel_path,
                    watts=None if joules is None else joules / interval_seconds,
                    energy_joules=joules,
                )
            )
    # Zones from both reads: a contributing zone that vanished makes node power unknown,
    # rather than silently smaller.
    kind, ids = node_zone_ids({**before.zones, **after.zones})
    unidentified = sorted(set(before.unidentified) | set(after.unidentified))
    doubtful = _unidentified_in_node(kind, unidentified)
    watts: float | None = None
    if doubtful:
        gaps.append(Gap("node", (
            f"node power is unknown: zone(s) {', '.join(doubtful)} cannot be identified (see their gaps) and "
            f"may be part of it; the sum of the other zones would be a partial sum, not the node"
        ), GAP_INCOMPLETE))
    elif not ids:
        gaps.append(Gap("node", NO_POWERCAP_HINT.format(path="class/powercap") + " (no package or psys zone)"))
    elif not all(zid in known_joules for zid in ids):
        missing = ", ".join(zid for zid in ids if zid not in known_joules)
        gaps.append(Gap("node", f"node power ({kind}) is unknown because zone(s) {missing} have gaps", GAP_INCOMPLETE))
    elif unplaced := sorted(e for e, name in {**before.unplaced, **after.unplaced}.items() if _counts_in_node_power(name)):
        gaps.append(Gap("node", f"node power ({kind}) is unknown: powercap entry(s) {', '.join(unplaced)} "
                                "look like part of it but their ids cannot be placed", GAP_INCOMPLETE))
    else:
        watts = sum(known_joules[zid] for zid in ids) / interval_seconds
    return NodePower(watts, tuple(zone_powers), tuple(gaps), True, tuple(ids), failing=bool(doubtful))
