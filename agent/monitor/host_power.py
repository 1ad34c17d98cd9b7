"""Node power of a VM from its host's counter (`source="host"`; agent/device/host_energy.py).

The delta goes through `rapl_power.zone_delta`, the zones' own rules: a fall within the range
is a wrap, a fall with no usable range is a gap, an interval's energy above the ceiling
(`energy.DEFAULT_ZONE_CEILING_WATTS`: a VM's share of a host never exceeds what a whole platform
can draw) is `implausible` — a counter that fell without a wrap lands there. Beyond those: a
counter the host has not written since the last read is unknown this interval (its energy comes
with the next write), one not written for `STALE_READS` reads is stale, and a counter whose `name`
changed between two reads is another VM's — all gaps, never a number.
"""

from __future__ import annotations

from agent.device.gaps import GAP_UNKNOWN, Gap, Subject
from agent.device.host_energy import STALE_READS, ZONE_ID, HostEnergyReading
from agent.monitor.rapl_power import NodePower, compute_power, zone_delta
from agent.monitor.raw_sample import RawSample
from agent.monitor.snapshot import SOURCE_HOST, SOURCE_NONE, SOURCE_RAPL


def node_power(before: RawSample, after: RawSample, interval_seconds: float) -> tuple[NodePower, str]:
    """The CPU side's power and its source: the host's counter when the agent reads one, else RAPL."""
    if before.host_energy is None or after.host_energy is None:
        power = compute_power(before.rapl, after.rapl, interval_seconds)
        return power, SOURCE_RAPL if power.watts is not None else SOURCE_NONE
    power = host_power(before.host_energy, after.host_energy, interval_seconds)
    return power, SOURCE_HOST if power.watts is not None else SOURCE_NONE


def _unknown(reason: str, kind: str, subject: Subject = Subject.NODE) -> NodePower:
    # present and failing: a node reading its host's counter is never estimated in its place
    return NodePower(None, (), (Gap(subject, reason, kind),), True, (ZONE_ID,), failing=True)


def host_power(before: HostEnergyReading, after: HostEnergyReading, interval_seconds: float) -> NodePower:
    """This VM's power from two reads of its host's counter, or a gap saying why not."""
    where = f"the host's counter {after.directory}"
    if after.error is None and after.unchanged_reads >= STALE_READS:
        return _unknown(f"{where} has not been updated for {after.unchanged_reads} intervals: the host's agent "
                        "stopped, or a gap on the host (RAPL unreadable) stopped the counter", GAP_UNKNOWN)
    if after.error is None and after.unchanged_reads:
        # the host writes once per its own interval: not an error, its energy comes with the next write
        return _unknown(f"{where} was not updated since the last read: this interval's energy comes with the "
                        "host's next update (the guest's interval should be at least the host's)", GAP_UNKNOWN,
                        subject=Subject.HOST_ENERGY)
    if before.name is not None and after.name is not None and before.name != after.name:
        return _unknown(f"{where} is now VM {after.name!r}'s, not {before.name!r}'s: a renamed VM or "
                        "another VM's directory, so this interval's delta is not this node's energy", GAP_UNKNOWN)
    then, now = before.as_rapl(), after.as_rapl()
    joules, reason, kind = zone_delta(then, now, ZONE_ID, now.zones.get(ZONE_ID), interval_seconds)
    if joules is None:
        return _unknown(f"{where}: {reason or 'unknown'}", kind)
    return NodePower(joules / interval_seconds, (), (), True, (ZONE_ID,))
