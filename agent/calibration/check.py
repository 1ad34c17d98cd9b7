"""`kubejoule-calibrate check`: can this node's RAPL counters be used, and as whom?

For each powercap zone: can the current user read `energy_uj` (and could a non-root user), does
the counter move, how often it updates, its `max_energy_range_uj` and how long it takes to wrap
at the zone's maximum power. Then a verdict: usable or not, with each problem's reason and fix.
Its table: agent/calibration/console.py (`format_check`).
"""

from __future__ import annotations

import os
import pwd
import statistics
import time
from dataclasses import dataclass, field

from agent.device.energy import CounterError, energy_delta, uj_to_joules, wrap_period_seconds
from agent.device.hostfs import HostFS
from agent.device.rapl import POWERCAP_CLASS, Zone, discover_zones
from agent.monitor.rapl_power import node_zone_ids

OK = "ok"
WARN = "warn"
FAIL = "fail"
AGENT_DEFAULT_INTERVAL_SECONDS = 5.0
POLL_INTERVAL_SECONDS = 0.001
HYPERVISOR_VENDORS = ("qemu", "kvm", "vmware", "xen", "microsoft", "amazon ec2", "google", "innotek", "openstack", "hetzner", "digitalocean")


@dataclass
class Problem:
    severity: str  # warn | fail
    what: str
    reason: str
    fix: str

    def to_record(self) -> dict[str, str]:
        return {"severity": self.severity, "what": self.what, "reason": self.reason, "fix": self.fix}


@dataclass
class ZoneCheck:
    zone_id: str
    name: str | None
    socket: int | None
    node_power: bool  # does node power use this zone
    readable: bool
    read_error: str | None = None
    access: str | None = None  # e.g. "0400 root only"
    moves: bool | None = None
    updates: int = 0
    update_seconds: float | None = None
    watts: float | None = None
    max_energy_range_uj: int | None = None
    max_power_uw: int | None = None
    wrap_seconds: float | None = None
    verdict: str = OK

    def to_record(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class CheckResult:
    sysfs: str
    user: str
    uid: int
    powercap_present: bool
    zones: list[ZoneCheck] = field(default_factory=list)
    node_power: str | None = None  # "psys" | "packages"
    node_zone_ids: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # mmio duplicates
    problems: list[Problem] = field(default_factory=list)
    poll_seconds: float = 0.0

    @property
    def usable(self) -> bool:
        if not self.powercap_present or not self.node_zone_ids:
            return False
        node = [z for z in self.zones if z.node_power]
        return bool(node) and all(z.verdict != FAIL for z in node)

    def to_record(self) -> dict[str, object]:
        return {
            "sysfs": self.sysfs,
            "user": self.user,
            "uid": self.uid,
            "usable": self.usable,
            "powercap_present": self.powercap_present,
            "node_power": self.node_power,
            "node_zones": self.node_zone_ids,
            "zones": [z.to_record() for z in self.zones],
            "ignored": self.ignored,
            "problems": [p.to_record() for p in self.problems],
        }


def current_user() -> tuple[str, int]:
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return f"uid {uid}", uid


def _read_optional(fs: HostFS, *parts: str, proc: bool = False) -> str:
    path = fs.proc(*parts) if proc else fs.sys(*parts)
    try:
        return fs.read_text(path)
    except OSError:
        return ""


def virtualization(fs: HostFS) -> str | None:
    """A description of the hypervisor when this looks like a virtual machine, else None."""
    vendor = " ".join(
        _read_optional(fs, "class", "dmi", "id", name).strip() for name in ("sys_vendor", "product_name")
    ).strip()
    flags = ""
    for line in _read_optional(fs, "cpuinfo", proc=True).splitlines():
        if line.startswith("flags"):
            flags = line
            break
    lowered = vendor.lower()
    if any(v in lowered for v in HYPERVISOR_VENDORS):
        return f"a virtual machine ({vendor})"
    if " hypervisor" in flags:
        return "a virtual machine (the CPU reports the `hypervisor` flag)" + (f", {vendor}" if vendor else "")
    return None


def cpu_vendor(fs: HostFS) -> str | None:
    for line in _read_optional(fs, "cpuinfo", proc=True).splitlines():
        if line.startswith("vendor_id"):
            return line.split(":", 1)[1].strip()
    return None


def _no_powercap_problem(fs: HostFS, present: bool) -> Problem:
    where = fs.sys(*POWERCAP_CLASS)
    vm = virtualization(fs)
    reason = f"no RAPL zones under {where}" if present else f"{where} does not exist"
    if vm:
        return Problem(
            FAIL,
            "powercap",
            f"{reason}: this is {vm}, and hypervisors do not pass RAPL through to guests",
            "calibrate a bare-metal node of the same type and give its profile to the agent "
            "(`kubejoule-agent run --power-profile FILE`), or use an example profile from "
            "agent/power_profiles/: node power is then estimated from CPU utilization (source `estimated`)",
        )
    loaded = any(fs.sys("module", m).is_dir() for m in ("intel_rapl_common", "intel_rapl_msr"))
    vendor = cpu_vendor(fs) or "unknown"
    if not loaded:
        fix = "load the driver: `modprobe intel_rapl_msr` (it pulls in intel_rapl_common)"
        if vendor == "AuthenticAMD":
            fix += "; on AMD (Zen and later) the kernel must be recent enough for its intel_rapl driver to know AMD RAPL"
        return Problem(FAIL, "powercap", f"{reason}: the intel_rapl driver is not loaded", fix)
    return Problem(
        FAIL,
        "powercap",
        f"{reason} although the intel_rapl driver is loaded: this CPU ({vendor}) exposes no RAPL "
        "domains, or the firmware disabled them",
        "check the BIOS power-management settings and `dmesg | grep -i rapl`; without RAPL, use a "
        "power profile measured on a node of the same type (source `estimated`)",
    )


def _access(path: os.PathLike[str] | str) -> str | None:
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        return None
    return f"{mode:04o} " + ("readable by all users" if mode & 0o004 else "root only")


def _poll(fs: HostFS, zones: dict[str, Zone], seconds: float) -> dict[str, tuple[list[int], list[float], str | None]]:
    """Read every zone's counter for `seconds`: its distinct values, when each appeared, any error."""
    series: dict[str, tuple[list[int], list[float], str | None]] = {}
    values: dict[str, list[int]] = {zid: [] for zid in zones}
    times: dict[str, list[float]] = {zid: [] for zid in zones}
    errors: dict[str, str | None] = dict.fromkeys(zones)
    deadline = time.monotonic() + seconds
    first = True
    while first or time.monotonic() < deadline:
        for zone_id in zones:
            if errors[zone_id] is not None:
                continue
            path = fs.sys(*POWERCAP_CLASS, zone_id, "energy_uj")
            try:
                text = fs.read_text(path).strip()
                value = int(text)
            except FileNotFoundError:
                errors[zone_id] = f"{path} disappeared during the check"
                continue
            except PermissionError as exc:
                errors[zone_id] = f"permission denied reading {path}: {exc.strerror or exc}"
                continue
            except OSError as exc:
                errors[zone_id] = f"cannot read {path}: {exc.strerror or exc}"
                continue
            except ValueError:
                errors[zone_id] = f"{path} is not a number: {text[:40]!r}" if text else f"{path} is empty"
                continue
            now = time.monotonic()
            if not values[zone_id] or values[zone_id][-1] != value:
                values[zone_id].append(value)
                times[zone_id].append(now)
        first = False
        time.sleep(POLL_INTERVAL_SECONDS)
    for zone_id in zones:
        series[zone_id] = (values[zone_id], times[zone_id], errors[zone_id])
    return series


def _update_seconds(change_times: list[float]) -> float | None:
    if len(change_times) < 3:
        return None
    return statistics.median(b - a for a, b in zip(change_times[1:], change_times[2:], strict=False))


def run_check(fs: HostFS, poll_seconds: float = 1.0) -> CheckResult:
    user, uid = current_user()
    present, zones, discover_errors = discover_zones(fs)
    result = CheckResult(str(fs.sysfs), user, uid, present, poll_seconds=poll_seconds)
    if not present or (not zones and not discover_errors):
        result.problems.append(_no_powercap_problem(fs, present))
        return result
    class_dir = fs.sys(*POWERCAP_CLASS)
    try:
        listed = [e for e in fs.listdir(class_dir) if ":" in e]
    except OSError:  # class/powercap unreadable: discover_errors says so (CLASS_LISTING)
        listed = []
    result.ignored = [e for e in listed if e not in zones and e not in discover_errors and "mmio" in e]
    kind, node_ids = node_zone_ids(zones)
    result.node_power = kind
    result.node_zone_ids = node_ids

    for zone_id, reason in sorted(discover_errors.items()):
        check = ZoneCheck(zone_id, None, None, False, readable=False, read_error=reason, verdict=FAIL)
        result.zones.append(check)
        result.problems.append(_read_problem(zone_id, None, reason, user, uid))

    series = _poll(fs, zones, poll_seconds)
    _, zones_after, _ = discover_zones(fs)
    for zone_id, zone in sorted(zones.items()):
        values, change_times, error = series[zone_id]
        if error is None and zone_id not in zones_after:
            error = f"zone {zone_id} disappeared during the check"
        check = ZoneCheck(
            zone_id=zone_id,
            name=zone.name,
            socket=zone.socket,
            node_power=zone_id in node_ids,
            readable=bool(values),
            access=_access(fs.sys(*POWERCAP_CLASS, zone_id, "energy_uj")),
            max_energy_range_uj=zone.max_energy_range_uj,
            max_power_uw=zone.max_power_uw,
            wrap_seconds=wrap_period_seconds(zone.max_energy_range_uj, zone.max_power_uw),
        )
        result.zones.append(check)
        label = f"zone {zone_id} ({zone.name})"
        if error is not None:
            check.read_error = error
            check.verdict = FAIL
            result.problems.append(_read_problem(zone_id, zone.name, error, user, uid))
            continue
        check.updates = len(values) - 1
        check.moves = check.updates > 0
        check.update_seconds = _update_seconds(change_times)
        if check.moves:
            check.watts = _watts(values, change_times, zone.max_energy_range_uj)
        else:
            check.verdict = FAIL if check.node_power else WARN
            result.problems.append(
                Problem(
                    check.verdict,
                    label,
                    f"the counter did not change in {poll_seconds:g} s",
                    "RAPL is exposed but not updated: the firmware may have disabled it (BIOS "
                    "power-management settings), or a hypervisor exposes a stub; check again under load",
                )
            )
        if not zone.max_energy_range_uj:
            check.verdict = _worse(check.verdict, WARN)
            result.problems.append(
                Problem(
                    WARN,
                    label,
                    "max_energy_range_uj is unreadable or zero, so a counter wrap cannot be undone",
                    "every interval with a wrap becomes a gap (never a wrong number); a newer kernel "
                    "or firmware usually reports the range",
                )
            )
        elif check.wrap_seconds is not None and check.wrap_seconds < 2 * AGENT_DEFAULT_INTERVAL_SECONDS:
            check.verdict = _worse(check.verdict, WARN)
            result.problems.append(
                Problem(
                    WARN,
                    label,
                    f"the counter wraps every {check.wrap_seconds:.1f} s at the zone's maximum power",
                    f"run the agent with `--interval` below {check.wrap_seconds / 2:.1f} s, or intervals "
                    "that may hold two wraps become gaps",
                )
            )
    if not node_ids:
        result.problems.append(
            Problem(
                FAIL,
                "node power",
                "there is no package or psys zone, so node power cannot be formed",
                "check `ls /sys/class/powercap` and the kernel log; report the layout with "
                "`kubejoule-agent snapshot DIR`",
            )
        )
    return result


def _worse(a: str, b: str) -> str:
    order = {OK: 0, WARN: 1, FAIL: 2}
    return a if order[a] >= order[b] else b


def _watts(values: list[int], change_times: list[float], max_range: int | None) -> float | None:
    if len(values) < 2 or change_times[-1] <= change_times[0]:
        return None
    total = 0
    try:
        for previous, current in zip(values, values[1:], strict=False):
            total += energy_delta(previous, current, max_range)
    except CounterError:
        return None
    return uj_to_joules(total) / (change_times[-1] - change_times[0])


def _read_problem(zone_id: str, name: str | None, reason: str, user: str, uid: int) -> Problem:
    label = f"zone {zone_id}" + (f" ({name})" if name else "")
    if "permission denied" in reason:
        return Problem(
            FAIL,
            label,
            f"{user} (uid {uid}) cannot read the counter: {reason.split(':', 1)[0]}",
            "energy_uj is readable only by root on kernels with the fix for CVE-2020-8694 "
            "(Platypus): run the agent as root (the privileged DaemonSet does) and this check with "
            "sudo; granting other users read access re-opens the side channel the fix closed",
        )
    if "disappeared" in reason:
        return Problem(
            FAIL,
            label,
            reason,
            "zones come and go when the intel_rapl driver is reloaded or CPUs are hot-plugged; check "
            "`dmesg` and run the check again",
        )
    return Problem(
        FAIL,
        label,
        reason,
        "the powercap driver returned content that is not a counter; check `dmesg | grep -i rapl` "
        "and report it with a `kubejoule-agent snapshot DIR` tree",
    )

