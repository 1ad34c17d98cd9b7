"""Node power from RAPL fixture trees laid out like the kernel's, through `kubejoule-agent replay`."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.device.gaps import Gap, Subject
from agent.device.hostfs import HostFS
from agent.device.rapl import discover_zones, read_rapl, zone_id_for
from agent.monitor.energy_ledger import error_kind
from tests.helpers.agent_cli import POWERCAP, cli_as_user, replay_record, root_only_copy

INTERVAL = 2.0


def energy_j(tree: Path, zone_id: str) -> float:
    return int((tree / "sys/class/powercap" / zone_id / "energy_uj").read_text()) / 1e6


def delta_j(case: str, zone_id: str) -> float:
    return energy_j(POWERCAP / case / "after", zone_id) - energy_j(POWERCAP / case / "before", zone_id)


def replay(case: str, interval: float = INTERVAL) -> dict:
    return replay_record(POWERCAP / case / "before", POWERCAP / case / "after", interval)


def test_one_socket_is_package_plus_dram_never_core_or_uncore() -> None:
    record = replay("intel-1s")
    expected = (delta_j("intel-1s", "intel-rapl:0") + delta_j("intel-1s", "intel-rapl:0:2")) / INTERVAL
    assert record["source"] == "rapl"
    assert record["node_watts"] == pytest.approx(expected, rel=1e-9)
    assert record["node_watts"] == pytest.approx(27.5, rel=1e-9)
    zones = {z["path"].rsplit("/", 1)[-1]: z for z in record["zones"]}
    assert set(zones) == {"intel-rapl:0", "intel-rapl:0:0", "intel-rapl:0:1", "intel-rapl:0:2"}
    assert all(z["socket"] == 0 for z in zones.values())
    assert zones["intel-rapl:0:0"]["zone"] == "core"
    assert zones["intel-rapl:0:0"]["watts"] == pytest.approx(15.0, rel=1e-9)


def test_psys_wins_and_the_zone_index_is_not_the_socket() -> None:
    record = replay("intel-2s-psys")
    assert record["node_watts"] == pytest.approx(delta_j("intel-2s-psys", "intel-rapl:1") / INTERVAL, rel=1e-9)
    by_id = {z["path"].rsplit("/", 1)[-1]: z for z in record["zones"]}
    assert by_id["intel-rapl:1"]["zone"] == "psys" and by_id["intel-rapl:1"]["socket"] is None
    assert by_id["intel-rapl:2"]["zone"] == "package-1" and by_id["intel-rapl:2"]["socket"] == 1
    assert by_id["intel-rapl:2:0"]["socket"] == 1  # dram inherits its package's socket


def test_two_sockets_sum_package_and_dram_over_sockets() -> None:
    record = replay("intel-2s")
    ids = ["intel-rapl:0", "intel-rapl:0:0", "intel-rapl:1", "intel-rapl:1:0"]
    expected = sum(delta_j("intel-2s", z) for z in ids) / INTERVAL
    assert record["node_watts"] == pytest.approx(expected, rel=1e-9)
    sockets = {z["path"].rsplit("/", 1)[-1]: z["socket"] for z in record["zones"]}
    assert sockets == {"intel-rapl:0": 0, "intel-rapl:0:0": 0, "intel-rapl:1": 1, "intel-rapl:1:0": 1}


def test_twelve_packages_with_hex_zone_ids_all_count() -> None:
    """The kernel writes zone ids as "%s:%x": package 10 is intel-rapl:a, and package 11's dram at
    index 10 is intel-rapl:b:a. Every package and dram is in node power; nothing is a gap."""
    record = replay("intel-12s-hex")
    packages = [f"intel-rapl:{s:x}" for s in range(12)]
    drams = [f"intel-rapl:{s:x}:1" for s in range(11)] + ["intel-rapl:b:a"]
    expected = sum(delta_j("intel-12s-hex", z) for z in packages + drams) / INTERVAL
    assert record["node_watts"] == pytest.approx(expected, rel=1e-9)
    assert record["node_watts"] == pytest.approx(165.0, rel=1e-9)
    assert record["gaps"] == []
    by_id = {z["path"].rsplit("/", 1)[-1]: z for z in record["zones"]}
    cores = [f"intel-rapl:{s:x}:0" for s in range(12)]
    assert sorted(by_id) == sorted(packages + drams + cores)
    assert by_id["intel-rapl:a"]["zone"] == "package-10" and by_id["intel-rapl:a"]["socket"] == 10
    assert by_id["intel-rapl:b:a"]["zone"] == "dram" and by_id["intel-rapl:b:a"]["socket"] == 11
    assert by_id["intel-rapl:a:0"]["socket"] == 10  # a subzone of a hex parent inherits its socket
    assert by_id["intel-rapl:b"]["watts"] == pytest.approx(31 / INTERVAL, rel=1e-9)


def test_zone_ids_parse_as_hex_at_every_level() -> None:
    fs = HostFS(POWERCAP / "intel-12s-hex/before/proc", POWERCAP / "intel-12s-hex/before/sys")
    _, zones, errors = discover_zones(fs)
    assert errors == {}
    assert zones["intel-rapl:a"].indices == (10,) and zones["intel-rapl:b:a"].indices == (11, 10)
    assert zones["intel-rapl:b:a"].parent_id == "intel-rapl:b"
    assert zone_id_for("intel-rapl", (11, 10)) == "intel-rapl:b:a"


def unknown_entry_tree(tmp_path: Path, entry: str, name: str) -> tuple[Path, Path]:
    """intel-1s with one more class/powercap entry that has a name file and an id we cannot parse."""
    trees = []
    for phase in ("before", "after"):
        tree = tmp_path / phase
        shutil.copytree(POWERCAP / "intel-1s" / phase, tree, symlinks=True)
        directory = tree / "sys/devices/virtual/powercap/intel-rapl" / entry
        directory.mkdir(parents=True)
        (directory / "name").write_text(name + "\n")
        (directory / "energy_uj").write_text("1000000\n")
        (tree / "sys/class/powercap" / entry).symlink_to(f"../../devices/virtual/powercap/intel-rapl/{entry}")
        trees.append(tree)
    return trees[0], trees[1]


def test_an_entry_with_a_name_we_cannot_place_is_a_gap_never_dropped(tmp_path: Path) -> None:
    before, after = unknown_entry_tree(tmp_path, "intel-rapl:0:Z", "uncore")
    record = replay_record(before, after, INTERVAL)
    gaps = [g for g in record["gaps"] if "intel-rapl:0:Z" in g["what"]]
    assert len(gaps) == 1 and "not a zone id as the kernel writes them" in gaps[0]["reason"]
    assert gaps[0]["what"].startswith("zone intel-rapl:0:Z")
    zone_gap = Gap(Subject.ZONE, gaps[0]["reason"], gaps[0]["kind"], name="intel-rapl:0:Z")
    assert error_kind(zone_gap) == "rapl"  # counted in kubejoule_agent_errors_total{kind="rapl"}
    # an uncore zone is never part of node power: node power stands
    assert record["node_watts"] == pytest.approx(27.5, rel=1e-9)
    # the control type directory (no name file) is not an entry to report
    assert not any(g["what"].endswith("intel-rapl") for g in record["gaps"])


def test_an_unplaced_entry_named_like_a_package_makes_node_power_unknown(tmp_path: Path) -> None:
    before, after = unknown_entry_tree(tmp_path, "intel-rapl:g", "package-16")
    record = replay_record(before, after, INTERVAL)
    assert record["node_watts"] is None
    assert any(g["what"] == "node" and "intel-rapl:g" in g["reason"] for g in record["gaps"])
    assert any("intel-rapl:g" in g["what"] for g in record["gaps"])


def test_amd_packages_without_dram() -> None:
    record = replay("amd")
    expected = (delta_j("amd", "intel-rapl:0") + delta_j("amd", "intel-rapl:1")) / INTERVAL
    assert record["node_watts"] == pytest.approx(expected, rel=1e-9)
    assert record["gaps"] == []


def test_mmio_duplicate_is_counted_once() -> None:
    record = replay("mmio-duplicate")
    assert record["node_watts"] == pytest.approx(delta_j("mmio-duplicate", "intel-rapl:0") / INTERVAL, rel=1e-9)
    assert [z["path"] for z in record["zones"]] == ["class/powercap/intel-rapl:0"]


def test_wrapped_counter_gives_the_true_energy() -> None:
    before = POWERCAP / "wrap/before/sys/class/powercap/intel-rapl:0"
    max_range = int((before / "max_energy_range_uj").read_text())
    prev = int((before / "energy_uj").read_text())
    cur = int((POWERCAP / "wrap/after/sys/class/powercap/intel-rapl:0/energy_uj").read_text())
    assert cur < prev  # the fixture really wraps
    package_j = (cur + max_range - prev) / 1e6
    record = replay("wrap")
    assert record["node_watts"] == pytest.approx((package_j + delta_j("wrap", "intel-rapl:0:0")) / INTERVAL, rel=1e-9)
    assert record["gaps"] == []


def test_discovery_lists_each_subzone_once_though_the_tree_nests_them() -> None:
    sys_root = POWERCAP / "intel-1s/before/sys"
    nested = sys_root / "devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:0"
    assert nested.is_dir()  # a naive walk would meet this and the class/powercap link
    present, zones, errors = discover_zones(HostFS(POWERCAP / "intel-1s/before/proc", sys_root))
    assert present and not errors
    assert sorted(zones) == ["intel-rapl:0", "intel-rapl:0:0", "intel-rapl:0:1", "intel-rapl:0:2"]
    assert zones["intel-rapl:0"].max_power_uw == 150_000_000  # max over constraint_*_max_power_uw


def test_utilization_and_utilization_idle_split() -> None:
    record = replay("intel-1s")
    # fixture: 200 busy ticks of 800 -> u = 0.25
    assert record["cpu_utilization"] == pytest.approx(0.25)
    assert record["idle_source"] == "utilization"
    assert record["idle_watts"] == pytest.approx(record["node_watts"] * 0.75)
    assert record["active_watts"] + record["idle_watts"] == pytest.approx(record["node_watts"])


@pytest.mark.parametrize(
    ("case", "interval", "what", "reason"),
    [
        ("falling-no-range", INTERVAL, "intel-rapl:0", "max_energy_range_uj is unreadable or zero"),
        ("garbage", INTERVAL, "intel-rapl:0", "energy_uj is empty"),
        ("garbage", INTERVAL, "intel-rapl:1", "not a number"),
        ("disappearing", INTERVAL, "intel-rapl:0:0", "disappeared between samples"),
        ("intel-1s", 2000.0, "intel-rapl:0", "longer than the counter's wrap period"),
    ],
)
def test_bad_inputs_are_gaps_with_reasons_never_numbers(case: str, interval: float, what: str, reason: str) -> None:
    record = replay(case, interval)
    assert record["node_watts"] is None
    assert record["idle_watts"] is None and record["active_watts"] is None
    assert any(what in g["what"] and reason in g["reason"] for g in record["gaps"]), record["gaps"]
    assert any(g["what"] == "node" for g in record["gaps"])
    for zone in record["zones"]:
        assert zone["watts"] is None or zone["watts"] >= 0


@pytest.fixture
def root_only_tree() -> Iterator[Path]:
    with root_only_copy(POWERCAP / "permission") as tree:
        yield tree


@pytest.mark.root
def test_permission_denied_names_the_cause_and_the_fix(root_only_tree: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file unreadable for another user")
    # The venv's interpreter lives under /root, out of another user's reach, so the CLI runs in
    # a forked child of this process that has dropped to nobody: the open fails for real.
    code, out, err = cli_as_user(
        "nobody", ["replay", str(root_only_tree / "before"), str(root_only_tree / "after"), "--interval", "2", "--json"]
    )
    assert code == 0, err
    record = json.loads(out)
    assert record["node_watts"] is None and record["source"] == "none"
    reasons = " ".join(g["reason"] for g in record["gaps"])
    assert "permission denied" in reasons
    assert "CVE-2020-8694" in reasons and "root" in reasons and "DaemonSet" in reasons  # the cause and the fix
    # and root, who may read, gets the number
    assert replay_record(root_only_tree / "before", root_only_tree / "after")["node_watts"] == pytest.approx(27.5)


def test_read_rapl_reports_unreadable_zone_name(tmp_path: Path) -> None:
    shutil.copytree(POWERCAP / "intel-1s/before", tmp_path / "t", symlinks=True)
    (tmp_path / "t/sys/devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:1/name").write_text("")
    reading = read_rapl(HostFS(tmp_path / "t/proc", tmp_path / "t/sys"))
    assert "intel-rapl:0:1" in reading.errors and "empty" in reading.errors["intel-rapl:0:1"]
    assert "intel-rapl:0" in reading.energy_uj
