"""A host publishes each VM's energy (agent/exporter/vm_energy.py), each guest reads its own
(agent/device/host_energy.py, agent/monitor/host_power.py): `source="host"`.

The target (issue 37): over a fake host with three qemu VMs and known RAPL, the sum of the guests'
`source="host"` energies equals the host's VM attribution within 0.1 %, and no guest's energy
includes another VM's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_UNREADABLE, Subject
from agent.device.host_energy import HostEnergyReader
from agent.device.hostfs import HostFS
from agent.exporter.vm_energy import FILES, VmEnergyWriter
from agent.monitor.energy_ledger import EnergyLedger, error_kind
from agent.monitor.sampler import Sampler
from agent.monitor.snapshot import Snapshot
from tests.helpers.host_counters import write_atomic
from tests.helpers.vm_hosts import advance_guest, advance_host, guest, vm_host

VMS = ("alpha", "beta", "gamma")
INTERVAL = 5.0


def guest_sampler(root: Path, directory: Path) -> Sampler:
    return Sampler(HostFS(root / "proc", guest(root)), root.name, process_top=0,
                   host_energy=HostEnergyReader(HostFS(), directory))


def test_the_guests_host_energies_add_up_to_the_hosts_vm_attribution(tmp_path: Path) -> None:
    counters, pids = vm_host(tmp_path / "host", VMS)
    host = Sampler(HostFS(counters.procfs, counters.sysfs), "host", process_top=0)
    # a range of 300 J: every counter wraps during the test (about 1 kJ each; at most 200 J an interval)
    writer = VmEnergyWriter(tmp_path / "vms", max_energy_range_uj=300_000_000)
    guests = {vm: guest_sampler(tmp_path / vm, tmp_path / "vms" / vm) for vm in VMS}
    host_before = host.read()
    host_snapshot = host.compute(host_before, host.read(), INTERVAL)
    writer.update(host_snapshot)  # the directories exist before the guests start
    guest_before = {vm: sampler.read() for vm, sampler in guests.items()}
    attributed = dict.fromkeys(VMS, 0.0)
    ledgers = {vm: EnergyLedger() for vm in VMS}
    guest_gaps: list[Snapshot] = []
    for step in range(16):
        shares = {"alpha": 1.0 + step % 3, "beta": 2.5, "gamma": 4.0 + (step % 5) / 2}
        advance_host(counters, pids, package_j=400.0 + 37 * step, dram_j=40.0 + step, busy_s=12.0, idle_s=8.0,
                     vm_s=shares)
        if step == 7:  # RAPL unreadable for one read: two host intervals unknown, the counters stop
            package = counters.zone_dir("intel-rapl:0") / "energy_uj"
            good = package.read_text()
            write_atomic(package, "garbage\n")
        host_after = host.read()
        if step == 7:
            write_atomic(package, good)
        host_snapshot = host.compute(host_before, host_after, INTERVAL)
        host_before = host_after
        writer.update(host_snapshot)
        for vm in host_snapshot.vms:
            if vm.watts is not None:
                attributed[vm.name] += vm.watts * INTERVAL
        for name, sampler in guests.items():
            advance_guest(tmp_path / name, busy_s=2.0 + step % 2, idle_s=3.0)
            after = sampler.read()
            snapshot = sampler.compute(guest_before[name], after, INTERVAL)
            guest_before[name] = after
            ledgers[name].add(snapshot)
            if snapshot.node_watts is None:
                guest_gaps.append(snapshot)
            else:
                assert snapshot.source == "host" and snapshot.zones == ()
                assert snapshot.active_watts is not None  # attribution inside the guest unchanged
    assert all(attributed.values())
    got = {vm: ledgers[vm].totals.node.get("host", 0.0) for vm in VMS}
    assert sum(got.values()) == pytest.approx(sum(attributed.values()), rel=1e-3)
    for vm in VMS:  # each guest its own VM's energy: never another's (they differ by far more than 0.1 %)
        assert got[vm] == pytest.approx(attributed[vm], rel=1e-3)
        others = [attributed[o] for o in VMS if o != vm]
        assert all(abs(got[vm] - other) > 0.05 * other for other in others)
        assert sorted(os.listdir(tmp_path / "vms" / vm)) == sorted(FILES)
        assert (tmp_path / "vms" / vm / "name").read_text() == f"{vm}\n"
        assert attributed[vm] > 300.0  # wrapped at least once
    # the host's gap: those intervals unknown in every guest (the counter stopped), never 0 W
    assert len(guest_gaps) == 2 * len(VMS)
    assert all(s.source == "none" and any(g.subject is Subject.HOST_ENERGY for g in s.gaps) for s in guest_gaps)
    writer.close()


def publish(directory: Path, energy_uj: int, name: str = "vm1", max_range: int = 2**50) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(directory / "name", f"{name}\n")
    write_atomic(directory / "max_energy_range_uj", f"{max_range}\n")
    write_atomic(directory / "energy_uj", f"{energy_uj}\n")


def two_reads(tmp_path: Path, first: int, second: int | str, **changes: object) -> Snapshot:
    directory = tmp_path / "vm1"
    publish(directory, first)
    sampler = guest_sampler(tmp_path / "guest", directory)
    before = sampler.read()
    if isinstance(second, str):
        write_atomic(directory / "energy_uj", second)
    else:
        publish(directory, second, **changes)  # type: ignore[arg-type]
    advance_guest(tmp_path / "guest", 1.0, 1.0)
    return sampler.compute(before, sampler.read(), INTERVAL)


def node_gap(snapshot: Snapshot) -> tuple[str, str]:
    assert snapshot.node_watts is None and snapshot.source == "none"
    assert snapshot.pods == () and snapshot.host_watts is None
    gap = next(g for g in snapshot.gaps if g.what == "node")
    return gap.kind, gap.reason


def test_a_counter_that_rises_is_power_with_source_host(tmp_path: Path) -> None:
    snapshot = two_reads(tmp_path, 10_000_000, 60_000_000)
    assert (snapshot.source, snapshot.node_watts, snapshot.gaps) == ("host", pytest.approx(10.0), ())


def test_a_wrap_within_the_range_is_undone(tmp_path: Path) -> None:
    snapshot = two_reads(tmp_path, 990_000_000, 40_000_000, max_range=1_000_000_000)
    assert snapshot.node_watts == pytest.approx(10.0)


def test_a_counter_that_falls_without_a_wrap_is_implausible(tmp_path: Path) -> None:
    kind, reason = node_gap(two_reads(tmp_path, 5_000_000_000, 1_000_000))  # the host's counter reset
    assert kind == GAP_IMPLAUSIBLE and "plausible maximum" in reason


def test_garbage_in_the_hosts_directory_is_a_gap_with_its_reason(tmp_path: Path) -> None:
    kind, reason = node_gap(two_reads(tmp_path, 5_000_000, "0x1f3\n"))
    assert kind == GAP_UNREADABLE and "not a number" in reason


def test_a_renamed_vm_is_another_counter(tmp_path: Path) -> None:
    kind, reason = node_gap(two_reads(tmp_path, 5_000_000, 6_000_000, name="vm2"))
    assert "'vm2'" in reason and "'vm1'" in reason


def test_a_counter_not_updated_is_unknown_then_stale_after_three_intervals(tmp_path: Path) -> None:
    directory = tmp_path / "vm1"
    publish(directory, 5_000_000)
    sampler = guest_sampler(tmp_path / "guest", directory)
    before = sampler.read()
    snapshots = []
    for _ in range(4):
        advance_guest(tmp_path / "guest", 1.0, 1.0)
        after = sampler.read()
        snapshots.append(sampler.compute(before, after, INTERVAL))
        before = after
    for snapshot in snapshots[:2]:  # the host writes once per its own interval: unknown, not 0 W, no error
        assert snapshot.node_watts is None and [g.subject for g in snapshot.gaps] == [Subject.HOST_ENERGY]
        assert error_kind(snapshot.gaps[0]) is None
    for count, snapshot in zip((3, 4), snapshots[2:], strict=True):
        assert f"has not been updated for {count} intervals" in node_gap(snapshot)[1]
    publish(directory, 5_000_000)  # rewritten, not grown (a VM at 0 W): alive again, 0 W measured
    advance_guest(tmp_path / "guest", 1.0, 1.0)
    assert sampler.compute(before, sampler.read(), INTERVAL).node_watts == 0.0


def test_a_missing_mount_is_a_gap_and_never_an_estimate(tmp_path: Path) -> None:
    sampler = guest_sampler(tmp_path / "guest", tmp_path / "not-mounted")
    before = sampler.read()
    advance_guest(tmp_path / "guest", 1.0, 1.0)
    kind, reason = node_gap(sampler.compute(before, sampler.read(), INTERVAL))
    assert kind == GAP_UNREADABLE and "mounted" in reason
