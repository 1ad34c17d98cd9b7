"""The fixture trees: laid out as the kernel lays out sysfs, and exactly what their generators make."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agent.device.hostfs import HostFS
from agent.device.rapl import discover_zones, read_rapl
from tests.fixtures import make_powercap, make_workloads
from tests.helpers.agent_cli import FIXTURES, POWERCAP

POWERCAP_CASES = sorted(p.name for p in POWERCAP.iterdir() if p.is_dir())
WORKLOAD_CASES = sorted(p.name for p in (FIXTURES / "workloads").iterdir() if p.is_dir())


def tree_listing(root: Path) -> dict[str, tuple[str, str | bytes]]:
    """Every file and link under root (links not followed): relative path -> (kind, content)."""
    listing: dict[str, tuple[str, str | bytes]] = {}
    for directory, subdirs, files in os.walk(root):
        for name in subdirs + files:
            path = Path(directory) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                listing[rel] = ("link", os.readlink(path))
            elif path.is_file():
                listing[rel] = ("file", path.read_bytes())
    return listing


@pytest.mark.parametrize(("generator", "checked_in"), [(make_powercap, POWERCAP), (make_workloads, FIXTURES / "workloads")])
def test_the_generators_make_exactly_the_checked_in_trees(generator: object, checked_in: Path, tmp_path: Path) -> None:
    generator.main(tmp_path / "out")  # type: ignore[attr-defined]
    made, kept = tree_listing(tmp_path / "out"), tree_listing(checked_in)
    assert sorted(made) == sorted(kept)
    assert [k for k in kept if made[k] != kept[k]] == []


def zone_dirs(sys_root: Path) -> dict[str, Path]:
    return {entry.name: entry for entry in (sys_root / "class/powercap").iterdir() if ":" in entry.name}


def check_kernel_layout(sys_root: Path, backlinks: bool) -> None:
    devices = (sys_root / "devices/virtual/powercap").resolve()
    class_dir = (sys_root / "class/powercap").resolve()
    for zone_id, link in zone_dirs(sys_root).items():
        # class/powercap/<zone> is a relative link into devices/virtual/powercap/<control>/...
        assert link.is_symlink() and not os.path.isabs(os.readlink(link))
        target = link.resolve()
        control = zone_id.split(":")[0]
        assert target.name == zone_id and target.is_relative_to(devices / control)
        # a subzone is nested in its parent's directory: the device tree holds it twice over
        depth = zone_id.count(":")
        assert len(target.relative_to(devices / control).parts) == depth
        assert (target / "power").is_dir() and (target / "uevent").is_file()
        if backlinks:
            # every class device links back to its class and to its parent (a cycle for walkers)
            assert (target / "subsystem").resolve() == class_dir
            assert (target / "device").resolve() == target.parent
        else:
            assert not (target / "subsystem").is_symlink() and not (target / "device").is_symlink()
    for control in {z.split(":")[0] for z in zone_dirs(sys_root)}:
        assert (sys_root / "class/powercap" / control).resolve() == devices / control


@pytest.mark.parametrize("case", POWERCAP_CASES)
def test_powercap_trees_have_the_kernels_layout_without_cycles(case: str) -> None:
    """Checked in without the cyclic back-links: `pip install -e .` walks the repository
    following links and would never finish."""
    for phase in ("before", "after"):
        check_kernel_layout(POWERCAP / case / phase / "sys", backlinks=False)


@pytest.fixture(scope="module")
def cyclic_trees(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cyclic") / "powercap"
    make_powercap.main(out, backlinks=True)
    return out


@pytest.mark.parametrize("case", ["intel-1s", "intel-2s-psys", "amd", "mmio-duplicate"])
def test_discovery_finds_each_zone_once_despite_nesting_and_cycles(case: str, cyclic_trees: Path) -> None:
    sys_root = cyclic_trees / case / "before" / "sys"
    check_kernel_layout(sys_root, backlinks=True)
    present, zones, errors = discover_zones(HostFS(cyclic_trees / case / "before/proc", sys_root))
    assert present and errors == {}
    listed = set(zone_dirs(sys_root))
    assert ("intel-rapl-mmio:0" in listed) == (case == "mmio-duplicate")
    assert set(zones) == {z for z in listed if "mmio" not in z}  # the mmio duplicate is dropped
    # and the same as on the checked-in tree without the links
    _, plain, _ = discover_zones(HostFS(POWERCAP / case / "before/proc", POWERCAP / case / "before/sys"))
    assert plain == zones


@pytest.mark.parametrize("case", WORKLOAD_CASES)
def test_workload_trees_carry_the_same_powercap_layout(case: str) -> None:
    sys_root = FIXTURES / "workloads" / case / "after" / "sys"
    for link in zone_dirs(sys_root).values():
        assert (link.resolve() / "uevent").is_file() and not (link.resolve() / "subsystem").is_symlink()


def link_cycles(root: Path) -> list[str]:
    """Paths where following links leads back into a directory already being walked."""
    found: list[str] = []

    def walk(directory: Path, chain: frozenset[str]) -> None:
        for entry in sorted(directory.iterdir()):
            if not entry.is_dir():
                continue
            real = os.path.realpath(entry)
            if real in chain:
                found.append(str(entry.relative_to(root)))
                continue
            walk(entry, chain | {real})

    walk(root, frozenset({os.path.realpath(root)}))
    return found


def test_the_checked_in_trees_have_no_link_cycles() -> None:
    """Following links must end: tools that walk the repository following them (setuptools'
    file finder during `pip install -e .`) would otherwise never finish."""
    assert link_cycles(FIXTURES) == []


def test_the_cycle_check_sees_the_kernels_back_links(cyclic_trees: Path) -> None:
    cycles = link_cycles(cyclic_trees / "intel-1s" / "before")
    assert any(c.endswith("subsystem") for c in cycles) and any(c.endswith("device") for c in cycles)


@pytest.mark.parametrize("garbage", [b"\x1c0\n", b"\x1f123\n", b"12\x1e\n", b"\x0b5\n", b"7\x0c\n"])
def test_a_counter_with_a_control_character_is_not_a_number(garbage: bytes, tmp_path: Path) -> None:
    """str.strip() also strips \\x1c-\\x1f, \\x0b and \\x0c: a counter holding `\\x1c0` read as 0 J
    (found by test_fuzz_garbage), a wrong watts figure without a gap. Only the kernel's own newline
    (and blanks around it) may be stripped; anything else makes the zone a gap."""
    root = tmp_path / "host"
    shutil.copytree(POWERCAP / "intel-1s" / "before", root, symlinks=True)
    fs = HostFS(procfs=root / "proc", sysfs=root / "sys")
    assert read_rapl(fs).errors == {}  # the tree as copied reads cleanly
    counter = next(p for p in (root / "sys").rglob("energy_uj") if p.parent.name == "intel-rapl:0")
    counter.write_bytes(garbage)
    reading = read_rapl(fs)
    assert "intel-rapl:0" not in reading.energy_uj
    assert "not a number" in reading.errors["intel-rapl:0"]
