"""The agent's command line: once on this host, snapshot → replay, misuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.agent_cli import POWERCAP, check_record, replay_record, run_agent


def test_once_json_on_this_host_is_a_valid_record() -> None:
    proc = run_agent("once", "--interval", "0.2", "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    check_record(record)  # DESIGN.md's shape, types and rules
    assert record["schema"] == "kubejoule.sample/v1"
    assert 0.0 <= record["cpu_utilization"] <= 1.0
    # the measured time between the two reads: at least the sleep (reading 1000 processes on a
    # busy machine can add a lot, so no tight upper bound)
    assert 0.2 <= record["interval_seconds"] < 30
    if not Path("/sys/class/powercap").is_dir():
        # no RAPL here: say so, with null watts, never zeros, and a line in words
        assert record["source"] == "none"
        assert record["node_watts"] is None and record["idle_watts"] is None
        assert "powercap" in proc.stderr
        assert any(g["what"] == "node" for g in record["gaps"])


def test_once_table_on_a_fixture_host_without_traceback() -> None:
    tree = POWERCAP / "intel-1s/after"
    proc = run_agent("once", "--interval", "0.1", "--procfs", str(tree / "proc"), "--sysfs", str(tree / "sys"))
    assert proc.returncode == 0
    # the tree's counters do not move: 0 W is what was measured, with a real source
    assert "source rapl" in proc.stdout and "0.00 W" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_once_table_without_powercap_says_why_in_words(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    proc = run_agent("once", "--interval", "0.1", "--procfs", str(POWERCAP / "intel-1s/after/proc"),
                     "--sysfs", str(tmp_path / "sys"), "--no-kube", "--no-network")
    assert proc.returncode == 0 and proc.stderr == ""
    assert "source none" in proc.stdout and "node power   unknown" in proc.stdout
    assert "no powercap zones under" in proc.stdout and "intel_rapl" in proc.stdout
    assert " 0.00 W" not in proc.stdout  # unknown, never zero


def test_snapshot_copies_what_the_agent_reads_and_replays_identically(tmp_path: Path) -> None:
    for phase in ("before", "after"):
        tree = POWERCAP / "intel-2s-psys" / phase
        proc = run_agent("snapshot", str(tmp_path / phase), "--procfs", str(tree / "proc"), "--sysfs", str(tree / "sys"))
        assert proc.returncode == 0, proc.stderr
    copied = tmp_path / "before/sys/class/powercap/intel-rapl:2:0"
    assert copied.is_symlink()  # the kernel's links are kept
    assert (tmp_path / "before/sys/devices/virtual/powercap/intel-rapl/intel-rapl:2/intel-rapl:2:0/energy_uj").is_file()
    assert (tmp_path / "before/proc/stat").is_file()
    original = replay_record(POWERCAP / "intel-2s-psys/before", POWERCAP / "intel-2s-psys/after", 2.0, "--node", "n1")
    replayed = replay_record(tmp_path / "before", tmp_path / "after", 2.0, "--node", "n1")
    assert replayed == original


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["once", "--interval", "-1"],
        ["once", "--interval", "abc"],
        ["replay", "only-one-tree"],
        ["replay", "/nonexistent/a", "/nonexistent/b", "--interval", "1"],
        ["replay", str(POWERCAP / "wrap/before"), str(POWERCAP / "wrap/after")],  # no --interval
        ["snapshot"],
        ["once", "--power-profile", "/nonexistent/profile.yaml"],  # refused after parsing
        ["once", "--process-top", "many"],
    ],
)
def test_misuse_exits_2_with_usage(argv: list[str]) -> None:
    proc = run_agent(*argv)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    command = argv[0] if argv and argv[0] in ("once", "snapshot", "replay") else ""
    # the usage of the subcommand that was misused, and the reason
    assert proc.stderr.startswith(f"usage: kubejoule-agent {command}".rstrip())
    assert proc.stderr.rstrip().splitlines()[-1].startswith(f"kubejoule-agent {command}".rstrip() + ": error: ")
