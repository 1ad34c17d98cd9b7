"""Each VM's energy in `DIR/<vm>/` for its guest (agent/exporter/vm_energy.py)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from agent.exporter.vm_energy import FILES, GONE_AFTER, MAX_ENERGY_RANGE_UJ, VmEnergyWriter
from agent.monitor.snapshot import Snapshot, VMPower

UUID_A = "aaaaaaaa-0000-4000-8000-00000000000a"


def snap(*vms: tuple[str, float | None], interval: float = 5.0, uuid: str | None = None) -> Snapshot:
    return Snapshot(
        node="host", interval_seconds=interval, timestamp=0.0, source="rapl", node_watts=100.0, idle_watts=50.0,
        active_watts=50.0, idle_source="utilization", cpu_utilization=0.5, busy_cpu_seconds=10.0,
        vms=tuple(VMPower(name, uuid, 4000 + i, None, 1.0, watts) for i, (name, watts) in enumerate(vms)),
    )


def counter(directory: Path) -> int:
    return int((directory / "energy_uj").read_text())


def test_each_vm_has_its_own_directory_in_the_powercap_layout(tmp_path: Path) -> None:
    writer = VmEnergyWriter(tmp_path / "vms")
    writer.update(snap(("web", 10.0), ("db", 2.5)))
    writer.update(snap(("web", 12.0), ("db", 0.0), interval=2.0))
    assert sorted(os.listdir(tmp_path / "vms")) == ["db", "web"]
    for name in ("web", "db"):
        assert sorted(os.listdir(tmp_path / "vms" / name)) == sorted(FILES)  # no temporary file left
        assert (tmp_path / "vms" / name / "name").read_text() == f"{name}\n"
        assert int((tmp_path / "vms" / name / "max_energy_range_uj").read_text()) == MAX_ENERGY_RANGE_UJ
    assert counter(tmp_path / "vms/web") == round((10.0 * 5 + 12.0 * 2) * 1e6)
    assert counter(tmp_path / "vms/db") == round(2.5 * 5 * 1e6)
    writer.close()


def test_the_counter_wraps_at_its_range_and_keeps_fractions(tmp_path: Path) -> None:
    writer = VmEnergyWriter(tmp_path, max_energy_range_uj=50_000_000)  # 50 J
    total = 0.0
    for watts in (7.3333333, 9.1, 13.77, 11.0, 3.14159):
        writer.update(snap(("vm", watts), interval=1.7))
        total += watts * 1.7 * 1e6
    assert total > 50_000_000
    assert counter(tmp_path / "vm") == int(total % 50_000_000)


def test_a_gap_on_the_host_stops_the_counter_and_does_not_rewrite_it(tmp_path: Path) -> None:
    writer = VmEnergyWriter(tmp_path)
    writer.update(snap(("vm", 20.0)))
    written = (tmp_path / "vm/energy_uj").stat()
    writer.update(snap(("vm", None)))  # RAPL unreadable on the host: the VM's share unknown
    again = (tmp_path / "vm/energy_uj").stat()
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert counter(tmp_path / "vm") == 100_000_000
    writer.update(snap(("vm", 0.0)))  # known and zero: rewritten (alive), not grown
    assert counter(tmp_path / "vm") == 100_000_000
    assert (tmp_path / "vm/energy_uj").stat().st_ino != written.st_ino


def test_a_vm_that_ends_takes_its_directory_and_nothing_else_is_removed(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "energy_uj").write_text("1\n")
    (tmp_path / "notes" / "readme").write_text("not the agent's\n")
    writer = VmEnergyWriter(tmp_path)
    writer.update(snap(("a", 1.0), ("b", 1.0)))
    writer.update(snap(("b", 1.0)))  # missing once (a read that missed it): its guest keeps its share
    assert (tmp_path / "a").is_dir() and counter(tmp_path / "a") == 5_000_000
    writer.update(snap(("a", 1.0), ("b", 1.0)))
    assert counter(tmp_path / "a") == 10_000_000
    for _ in range(GONE_AFTER):
        writer.update(snap(("b", 1.0)))
    assert not (tmp_path / "a").exists() and (tmp_path / "b").is_dir()
    assert (tmp_path / "notes" / "readme").is_file()
    assert writer.vms == ["b"]


def test_a_directory_made_before_the_vm_started_is_used(tmp_path: Path) -> None:
    (tmp_path / "web").mkdir()  # libvirt's prepare hook: virtiofsd needs it before the VM starts
    (tmp_path / "idle").mkdir()  # another VM's, not started yet: not the writer's to remove
    writer = VmEnergyWriter(tmp_path)
    for _ in range(GONE_AFTER + 1):
        writer.update(snap(("web", 2.0)))
    assert counter(tmp_path / "web") == 30_000_000
    assert os.listdir(tmp_path / "idle") == []


def test_a_restarted_agent_resumes_running_vms_and_removes_ended_ones(tmp_path: Path) -> None:
    first = VmEnergyWriter(tmp_path)
    first.update(snap(("kept", 10.0), ("ended", 10.0)))
    first.close()
    second = VmEnergyWriter(tmp_path)
    for _ in range(GONE_AFTER):
        second.update(snap(("kept", 10.0)))
    assert counter(tmp_path / "kept") == 150_000_000  # resumed: never falls
    assert not (tmp_path / "ended").exists()


def test_unsafe_names_use_the_uuid_and_two_vms_of_one_name_are_not_published(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = VmEnergyWriter(tmp_path)
    with caplog.at_level(logging.WARNING, "kubejoule.agent.vm_energy"):
        writer.update(snap(("../../etc", 1.0), uuid=UUID_A))
        for _ in range(GONE_AFTER):
            writer.update(snap(("twin", 1.0), ("twin", 2.0)))
    assert sorted(os.listdir(tmp_path)) == []  # the uuid VM ended; the twins never published
    assert any("twin" in str(getattr(r, "fields", {})) for r in caplog.records)
    writer.update(snap(("../../etc", 1.0), uuid=UUID_A))
    assert os.listdir(tmp_path) == [UUID_A]
    assert not (tmp_path.parent / "etc").exists()


def test_a_write_that_fails_is_logged_and_tried_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = VmEnergyWriter(tmp_path)
    writer.update(snap(("vm", 10.0)))
    for name in os.listdir(tmp_path / "vm"):
        (tmp_path / "vm" / name).unlink()
    (tmp_path / "vm").rmdir()
    (tmp_path / "vm").write_text("in the way\n")  # a file where the directory was
    with caplog.at_level(logging.INFO, "kubejoule.agent.vm_energy"):
        for _ in range(3):
            writer.update(snap(("vm", 10.0)))
        assert [r.getMessage() for r in caplog.records] == ["cannot write a VM's energy"]  # once, not every interval
        (tmp_path / "vm").unlink()
        writer.update(snap(("vm", 10.0)))
    assert counter(tmp_path / "vm") == 50_000_000  # a new counter: the old one's file was gone
    assert caplog.records[-1].getMessage() == "writing a VM's energy again"


def test_a_symlink_in_place_of_a_vms_directory_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "vms").mkdir()
    (tmp_path / "vms" / "evil").symlink_to(outside)
    writer = VmEnergyWriter(tmp_path / "vms")
    writer.update(snap(("evil", 10.0), ("good", 1.0)))
    assert os.listdir(outside) == [] and writer.vms == ["good"]
