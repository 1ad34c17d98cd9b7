"""Reading the host's counter inside a guest (agent/device/host_energy.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_UNREADABLE
from agent.device.host_energy import HostEnergyReader, found_at_mount_point, mount_point
from agent.device.hostfs import HostFS


def published(directory: Path, energy: str = "1000\n", name: str = "vm1\n", max_range: str | None = "1000000\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "name").write_text(name)
    (directory / "energy_uj").write_text(energy)
    if max_range is not None:
        (directory / "max_energy_range_uj").write_text(max_range)
    return directory


def rewrite(path: Path, text: str) -> None:
    tmp = path.with_name(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_the_counter_is_read_with_its_name_and_range(tmp_path: Path) -> None:
    reading = HostEnergyReader(HostFS(), published(tmp_path / "d")).read()
    assert (reading.name, reading.energy_uj, reading.max_energy_range_uj, reading.error) == ("vm1", 1000, 1_000_000, None)
    zone = reading.as_rapl().zones["host-energy"]
    assert (zone.name, zone.max_energy_range_uj, zone.max_power_uw) == ("vm1", 1_000_000, None)


@pytest.mark.parametrize(
    ("files", "kind", "words"),
    [
        ({"energy": "12abc\n"}, GAP_UNREADABLE, "not a number"),
        ({"energy": "\n"}, GAP_UNREADABLE, "empty"),
        ({"energy": "-5\n"}, GAP_UNREADABLE, "negative"),
        ({"energy": "2000000\n"}, GAP_IMPLAUSIBLE, "above max_energy_range_uj"),
        ({"energy": f"{2**64}\n", "max_range": None}, GAP_IMPLAUSIBLE, "64-bit"),
        ({"max_range": "lots\n"}, GAP_UNREADABLE, "not a number"),
        ({"name": "\n"}, GAP_UNREADABLE, "empty"),
    ],
    ids=["garbage", "empty", "negative", "above-range", "beyond-u64", "garbage-range", "no-name"],
)
def test_garbage_is_an_error_with_its_reason(tmp_path: Path, files: dict[str, str | None], kind: str, words: str) -> None:
    directory = published(tmp_path / "d", **files)  # type: ignore[arg-type]
    reading = HostEnergyReader(HostFS(), directory).read()
    assert reading.energy_uj is None and reading.error is not None and words in reading.error
    assert reading.error_kind == kind
    assert reading.as_rapl().errors == {"host-energy": reading.error}


def test_a_missing_directory_says_to_mount_it(tmp_path: Path) -> None:
    reading = HostEnergyReader(HostFS(), tmp_path / "absent").read()
    assert reading.error is not None and "mounted" in reading.error and reading.error_kind == GAP_UNREADABLE


def test_unchanged_reads_count_reads_without_a_write_and_a_rewrite_resets_them(tmp_path: Path) -> None:
    directory = published(tmp_path / "d")
    reader = HostEnergyReader(HostFS(), directory)
    assert [reader.read().unchanged_reads for _ in range(4)] == [0, 1, 2, 3]
    rewrite(directory / "energy_uj", "1000\n")  # the same value written again (a VM at 0 W): alive
    assert reader.read().unchanged_reads == 0
    rewrite(directory / "energy_uj", "2000\n")
    assert reader.read().unchanged_reads == 0
    (directory / "energy_uj").write_text("oops\n")
    assert reader.read().error is not None
    rewrite(directory / "energy_uj", "2000\n")
    assert reader.read().unchanged_reads == 0  # after an error: a fresh start


def test_the_mount_point_is_found_beside_sysfs_only_when_it_holds_a_counter(tmp_path: Path) -> None:
    sysfs = tmp_path / "host" / "sys"
    assert mount_point(sysfs) == tmp_path / "host/run/kubejoule/host-energy"
    assert mount_point(Path("/sys")) == Path("/run/kubejoule/host-energy")
    assert found_at_mount_point(sysfs) is None
    mount_point(sysfs).mkdir(parents=True)  # an empty mount point (nothing shared): not used
    assert found_at_mount_point(sysfs) is None
    published(mount_point(sysfs))
    assert found_at_mount_point(sysfs) == mount_point(sysfs)
