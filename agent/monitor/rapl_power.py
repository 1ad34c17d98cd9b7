"""Node power from two RAPL readings: each zone's energy in the interval (wraps undone, checked
for plausibility) and the node's power from the zones it is made of (DESIGN.md, "Node power
from RAPL"). A zone that may be part of node power and has a gap makes node power unknown —
never the sum of the zones that happened to be readable."""

from __future__ import annotations

from dataclasses import dataclass

from agent.device.energy import (
    PACKAGE_NAME,
    CounterError,
    ImplausibleError,
    check_power,
    energy_delta,
    power_ceiling_watts,
    uj_to_joules,
    wrap_period_seconds,
    zone_kind,
)
from agent.device.gaps import (
    GAP_IMPLAUSIBLE,
    GAP_INCOMPLETE,
    GAP_UNKNOWN,
    GAP_UNREADABLE,
    Gap,
    Subject,
)
from agent.device.rapl import (
    CLASS_LISTING,
    NO_POWERCAP_HINT,
    RaplReading,
    Zone,
)
from agent.monitor.snapshot import ZonePower


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


def zone_delta(
    before: RaplReading, after: RaplReading, zone_id: str, zone: Zone | None, interval_seconds: float
) -> tuple[float | None, str | None, str]:
    """One zone's energy in the interval in joules, or (None, reason, gap kind): the wrap,
    wrap-period and plausibility rules of every powercap-layout counter (a VM's host energy too:
    agent/monitor/host_power.py)."""
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
    previous, current = before.energy_uj[zone_id], after.energy_uj[zone_id]
    ceiling = power_ceiling_watts(zone_kind(zone.name), zone.max_power_uw, counter_fell=current < previous)
    try:
        joules = uj_to_joules(energy_delta(previous, current, max_range))
        check_power(joules, interval_seconds, ceiling)
    except ImplausibleError as exc:
        return None, str(exc), GAP_IMPLAUSIBLE
    except CounterError as exc:
        return None, str(exc), GAP_UNKNOWN
    return joules, None, GAP_UNKNOWN


def counts_in_node_power(name: str) -> bool:
    """Could a zone of this name be part of node power (psys, a package or its dram)?"""
    return name in ("psys", "dram", "package") or bool(PACKAGE_NAME.match(name))


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
            unlisted = Gap(Subject.NODE, reading.errors[CLASS_LISTING], GAP_UNREADABLE)
            return NodePower(None, (), (unlisted,), True, (), failing=True)
    # Which zones make up node power, from both reads' zones: a contributing zone that vanished
    # makes node power unknown, rather than silently smaller.
    kind, ids = node_zone_ids({**before.zones, **after.zones})
    unidentified = sorted(set(before.unidentified) | set(after.unidentified))
    doubtful = _unidentified_in_node(kind, unidentified)
    unplaced = sorted(e for e, name in {**before.unplaced, **after.unplaced}.items() if counts_in_node_power(name))
    zone_powers: list[ZonePower] = []
    known_joules: dict[str, float] = {}
    for zone_id in sorted(set(before.zones) | set(after.zones) | set(before.errors) | set(after.errors)):
        zone = after.zones.get(zone_id) or before.zones.get(zone_id)
        joules, reason, gap_kind = zone_delta(before, after, zone_id, zone, interval_seconds)
        if joules is not None:
            known_joules[zone_id] = joules
        if reason is not None:
            gaps.append(Gap(Subject.ZONE, reason, gap_kind, name=zone_id + (f" ({zone.name})" if zone else "")))
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
    watts: float | None = None
    if doubtful:
        gaps.append(Gap(Subject.NODE, (
            f"node power is unknown: zone(s) {', '.join(doubtful)} cannot be identified (see their gaps) and "
            f"may be part of it; the sum of the other zones would be a partial sum, not the node"
        ), GAP_INCOMPLETE))
    elif not ids:
        gaps.append(Gap(Subject.NODE, NO_POWERCAP_HINT.format(path="class/powercap") + " (no package or psys zone)"))
    elif not all(zid in known_joules for zid in ids):
        missing = ", ".join(zid for zid in ids if zid not in known_joules)
        gaps.append(Gap(Subject.NODE, f"node power ({kind}) is unknown because zone(s) {missing} have gaps", GAP_INCOMPLETE))
    elif unplaced:
        gaps.append(Gap(Subject.NODE, f"node power ({kind}) is unknown: powercap entry(s) {', '.join(unplaced)} "
                                "look like part of it but their ids cannot be placed", GAP_INCOMPLETE))
    else:
        watts = sum(known_joules[zid] for zid in ids) / interval_seconds
    return NodePower(watts, tuple(zone_powers), tuple(gaps), True, tuple(ids), failing=bool(doubtful))
