"""`kubejoule-agent snapshot DIR` writes only inside DIR, whatever the tree it copies holds (it
may run as root under sudo): crafted trees with links out of the tree, and a DIR someone filled
with links beforehand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.device.hostfs import copy_preserving_links, link_inside, write_inside


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    return victim


def test_a_link_out_of_the_tree_is_never_made_nor_written_through(tmp_path: Path, outside: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "class" / "powercap").mkdir(parents=True)
    # The zone links up past the tree's root, to where `victim` sits for the copy too.
    (src / "class" / "powercap" / "intel-rapl:0").symlink_to("../../../victim")
    (outside / "energy_uj").write_text("1\n")
    rel = Path("class/powercap/intel-rapl:0/energy_uj")
    assert copy_preserving_links(src, rel, dst, b"666\n") is False
    assert not (dst / "class" / "powercap" / "intel-rapl:0").is_symlink()  # checked before linking
    assert (outside / "energy_uj").read_text() == "1\n"
    assert not any(p.is_symlink() for p in dst.rglob("*"))


def test_links_inside_the_tree_are_kept_and_written_at_their_target(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    zone = src / "devices" / "virtual" / "powercap" / "intel-rapl" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text("5\n")
    (src / "class" / "powercap").mkdir(parents=True)
    (src / "class" / "powercap" / "intel-rapl:0").symlink_to("../../devices/virtual/powercap/intel-rapl/intel-rapl:0")
    assert copy_preserving_links(src, Path("class/powercap/intel-rapl:0/energy_uj"), dst, b"7\n")
    assert (dst / "class" / "powercap" / "intel-rapl:0").is_symlink()
    assert (dst / "devices/virtual/powercap/intel-rapl/intel-rapl:0/energy_uj").read_text() == "7\n"


def test_links_already_in_dir_are_refused_not_followed(tmp_path: Path, outside: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "1").mkdir(parents=True)
    (src / "1" / "stat").write_text("1 (init) S\n")
    dst.mkdir()
    (dst / "1").symlink_to(outside)  # planted before the snapshot
    assert copy_preserving_links(src, Path("1/stat"), dst, b"1 (init) S\n") is False
    assert list(outside.iterdir()) == []
    (outside / "stat").write_text("mine\n")
    (dst / "2").mkdir()
    (dst / "2" / "stat").symlink_to(outside / "stat")  # the file itself a planted link
    with pytest.raises(OSError):
        write_inside(dst, Path("2/stat"), b"x")
    assert (outside / "stat").read_text() == "mine\n"


def test_no_path_or_link_may_climb_out(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_inside(tmp_path, Path("../escape"), b"x")
    with pytest.raises(ValueError):
        link_inside(tmp_path, Path("a/b"), "../../..")
    with pytest.raises(ValueError):
        link_inside(tmp_path, Path("a"), "/etc")
    link_inside(tmp_path, Path("a/b"), "../c")
    assert os.readlink(tmp_path / "a" / "b") == "../c"
