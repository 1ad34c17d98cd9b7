"""kvm_power_monitor.sh run with bash against fake host trees whose counters the test advances."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.harness.components import require_binary
from tests.helpers.deploy_hosttree import (
    AS_NOBODY,
    CLOCK_TICKS_PER_SECOND,
    CpuTimes,
    HostState,
    Proc,
    StepSleeper,
    Zone,
    needs_another_user,
    script_env,
    traversable_tree,
)

SCRIPT = Path(__file__).resolve().parents[2] / "host_scripts" / "kvm_power_monitor.sh"
MAX_UJ = 262143328850


@pytest.fixture(autouse=True)
def _bash() -> None:
    require_binary("bash", "bash is not installed")


def qemu(pid: int, name_arg: str, ticks: int) -> Proc:
    return Proc(
        pid,
        "qemu-system-x86",
        [
            "/usr/bin/qemu-system-x86_64",
            "-name",
            name_arg,
            "-uuid",
            "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
            "-m",
            "2048",
            "-drive",
            "file=/var/lib/vm.img,secret=hunter2",
        ],
        ticks,
    )


def intel_zones(package_uj: int, dram_uj: int, max_uj: int | str = MAX_UJ) -> list[Zone]:
    """package-0 with core and dram subzones, plus an mmio duplicate of package-0."""
    return [
        Zone("intel-rapl:0", "package-0", package_uj, max_uj),
        Zone("intel-rapl:0:0", "core", package_uj // 2, max_uj),  # inside package: never added
        Zone("intel-rapl:0:1", "dram", dram_uj, max_uj),
        Zone("intel-rapl-mmio:0", "package-0", package_uj * 3, max_uj),  # duplicate: ignored
    ]


def run_monitor(
    root: Path, work: Path, first: HostState, steps: Sequence[HostState], args: Sequence[str]
) -> tuple[subprocess.CompletedProcess[str], StepSleeper]:
    first.write(root)
    sleeper = StepSleeper(root, work, list(steps))
    sleep_cmd = sleeper.install()
    result = subprocess.run(
        ["bash", str(SCRIPT), *args],
        env=script_env(root, {"KJ_SLEEP": str(sleep_cmd)}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result, sleeper


def rows(stdout: str) -> list[dict[str, str]]:
    lines = [line for line in stdout.splitlines() if line and not line.startswith("#")]
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]


def totals(stdout: str) -> dict[str, float]:
    """Each VM's total joules from the closing lines, checked against their kWh."""
    found: dict[str, float] = {}
    for line in stdout.splitlines():
        if line.startswith("# total"):
            fields = dict(part.split("=", 1) for part in line.split("\t")[1:])
            found[fields["vm"]] = float(fields["joules"])
            assert float(fields["kwh"]) == pytest.approx(found[fields["vm"]] / 3.6e6, abs=1e-9)
    return found


@pytest.fixture
def host(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "host"
    work = tmp_path / "work"
    work.mkdir()
    return root, work


def test_vm_watts_follow_the_cpu_share_of_active_energy(host: tuple[Path, Path]) -> None:
    root, work = host
    cpu0 = CpuTimes(user=10_000, system=2_000, idle=50_000, iowait=1_000, steal=500)
    procs0 = [
        qemu(4242, "guest=vm-a,debug-threads=on", 1_000),
        qemu(4343, "vm-b", 3_000),
        Proc(99, "bash", ["bash"], 7_000),
    ]
    first = HostState(intel_zones(1_000_000_000, 200_000_000), cpu0, 100.00, procs0)
    # Interval 1: 5 s, node 60 J package + 15 J dram; busy 300 ticks of 1000 non-steal ticks.
    cpu1 = replace(cpu0, user=10_250, system=2_050, idle=50_650, iowait=1_050, steal=900)
    procs1 = [
        qemu(4242, "guest=vm-a,debug-threads=on", 1_100),
        qemu(4343, "vm-b", 3_050),
        Proc(99, "bash", ["bash"], 7_150),
    ]
    step1 = HostState(intel_zones(1_060_000_000, 215_000_000), cpu1, 105.00, procs1)
    # Interval 2: 5 s, node 100 J; busy 800 of 1000; vm-a 400 ticks, vm-b 0.
    cpu2 = replace(cpu1, user=10_850, system=2_250, idle=50_800, iowait=1_100)
    procs2 = [
        qemu(4242, "guest=vm-a,debug-threads=on", 1_500),
        qemu(4343, "vm-b", 3_050),
        Proc(99, "bash", ["bash"], 7_550),
    ]
    step2 = HostState(intel_zones(1_150_000_000, 225_000_000), cpu2, 110.00, procs2)

    result, sleeper = run_monitor(
        root, work, first, [step1, step2], ["--interval", "5", "--duration", "10"]
    )
    assert result.returncode == 0, result.stderr
    assert sleeper.calls() == 2
    assert "package+dram (2 zone(s))" in result.stdout  # core and the mmio duplicate left out
    assert "hunter2" not in result.stdout and "secret" not in result.stdout

    got = {(r["time_s"], r["vm"]): r for r in rows(result.stdout)}
    assert set(got) == {("5.00", "vm-a"), ("5.00", "vm-b"), ("10.00", "vm-a"), ("10.00", "vm-b")}

    # Interval 1: node 75 J over 5 s = 15 W; active = 75 x 300/1000 = 22.5 J;
    # vm-a 100 of 300 busy ticks = 7.5 J (1.5 W); vm-b 50 ticks = 3.75 J (0.75 W).
    assert got[("5.00", "vm-a")]["node_watts"] == "15.000"
    assert got[("5.00", "vm-a")]["pid"] == "4242"
    assert float(got[("5.00", "vm-a")]["cpu_seconds"]) == pytest.approx(
        100 / CLOCK_TICKS_PER_SECOND
    )
    assert float(got[("5.00", "vm-a")]["vm_watts"]) == pytest.approx(1.5, abs=1e-3)
    assert float(got[("5.00", "vm-b")]["vm_watts"]) == pytest.approx(0.75, abs=1e-3)
    # Interval 2: node 100 J = 20 W; active = 100 x 800/1000 = 80 J; vm-a 400/800 -> 40 J = 8 W.
    assert got[("10.00", "vm-a")]["node_watts"] == "20.000"
    assert float(got[("10.00", "vm-a")]["vm_watts"]) == pytest.approx(8.0, abs=1e-3)
    assert float(got[("10.00", "vm-b")]["vm_watts"]) == 0.0
    assert float(got[("10.00", "vm-a")]["vm_joules_total"]) == pytest.approx(47.5, abs=1e-3)
    assert totals(result.stdout) == pytest.approx({"vm-a": 47.5, "vm-b": 3.75}, abs=1e-3)


def test_calibrated_idle_watts_replace_the_utilization_split(host: tuple[Path, Path]) -> None:
    root, work = host
    cpu0 = CpuTimes(user=1_000, idle=9_000)
    first = HostState(intel_zones(5_000_000, 0), cpu0, 10.0, [qemu(10, "solo", 0)])
    # 50 J over 10 s = 5 W node; idle 3 W x 10 s = 30 J; active 20 J; the VM has all busy time.
    step = HostState(
        intel_zones(55_000_000, 0),
        replace(cpu0, user=1_100, idle=9_900),
        20.0,
        [qemu(10, "solo", 100)],
    )
    result, _ = run_monitor(
        root, work, first, [step], ["--interval", "10", "--duration", "10", "--idle-watts", "3"]
    )
    assert result.returncode == 0, result.stderr
    (row,) = rows(result.stdout)
    assert row["node_watts"] == "5.000"
    assert float(row["vm_watts"]) == pytest.approx(2.0, abs=1e-3)
    assert totals(result.stdout)["solo"] == pytest.approx(20.0, abs=1e-3)


def test_counter_wraparound_uses_max_energy_range(host: tuple[Path, Path]) -> None:
    root, work = host
    max_uj = 1_000_000_000
    cpu0 = CpuTimes(user=0, idle=1_000)
    first = HostState(
        [Zone("intel-rapl:0", "package-0", max_uj - 4_000_000, max_uj)],
        cpu0,
        50.0,
        [qemu(7, "wrapper", 0)],
    )
    # Counter wraps: 4 J to the top, 6 J after it: 10 J in 2 s = 5 W.
    step = HostState(
        [Zone("intel-rapl:0", "package-0", 6_000_000, max_uj)],
        replace(cpu0, user=100, idle=1_100),
        52.0,
        [qemu(7, "wrapper", 100)],
    )
    result, _ = run_monitor(root, work, first, [step], ["--interval", "2", "--duration", "2"])
    assert result.returncode == 0, result.stderr
    (row,) = rows(result.stdout)
    assert row["node_watts"] == "5.000"
    # busy 100 of 200 ticks: active 5 J, all of it the VM's: 2.5 W.
    assert float(row["vm_watts"]) == pytest.approx(2.5, abs=1e-3)


@pytest.mark.parametrize("max_range", [0, "garbage"])
def test_falling_counter_without_range_is_a_gap_not_zero(
    host: tuple[Path, Path], max_range: int | str
) -> None:
    root, work = host
    cpu0 = CpuTimes(user=0, idle=1_000)
    procs = [qemu(7, "gappy", 0)]
    first = HostState([Zone("intel-rapl:0", "package-0", 9_000_000, max_range)], cpu0, 1.0, procs)
    fell = HostState(
        [Zone("intel-rapl:0", "package-0", 1_000_000, max_range)],
        replace(cpu0, user=50, idle=1_050),
        2.0,
        [qemu(7, "gappy", 50)],
    )
    rose = HostState(
        [Zone("intel-rapl:0", "package-0", 3_000_000, max_range)],
        replace(cpu0, user=100, idle=1_100),
        3.0,
        [qemu(7, "gappy", 100)],
    )
    result, _ = run_monitor(root, work, first, [fell, rose], ["--interval", "1", "--duration", "2"])
    assert result.returncode == 0, result.stderr
    gap, after = rows(result.stdout)
    assert gap["node_watts"] == "NA" and gap["vm_watts"] == "NA"
    assert after["node_watts"] == "2.000"
    # Only the interval after the gap counts: 2 J, half busy, all busy time the VM's: 1 J.
    assert totals(result.stdout)["gappy"] == pytest.approx(1.0, abs=1e-3)


def test_psys_is_node_power_when_present(host: tuple[Path, Path]) -> None:
    root, work = host
    zones0 = [*intel_zones(1_000_000, 1_000_000), Zone("intel-rapl:1", "psys", 10_000_000)]
    zones1 = [*intel_zones(2_000_000, 2_000_000), Zone("intel-rapl:1", "psys", 40_000_000)]
    cpu0 = CpuTimes(user=0, idle=100)
    first = HostState(zones0, cpu0, 1.0)
    step = HostState(zones1, replace(cpu0, idle=200), 2.0)
    result, _ = run_monitor(root, work, first, [step], ["--interval", "1", "--duration", "1"])
    assert result.returncode == 0, result.stderr
    assert "node power from psys" in result.stdout
    (row,) = rows(result.stdout)
    assert row["vm"] == "-"  # no VM on this host: the node line alone
    assert row["node_watts"] == "30.000"


def test_vm_filter_and_a_vm_that_appears_mid_run(host: tuple[Path, Path]) -> None:
    root, work = host
    cpu0 = CpuTimes(user=0, idle=1_000)
    first = HostState(intel_zones(0, 0), cpu0, 1.0, [qemu(7, "keep", 0)])
    step1 = HostState(
        intel_zones(10_000_000, 0),
        replace(cpu0, user=100, idle=1_000),
        2.0,
        [qemu(7, "keep", 50), qemu(8, "other", 50)],
    )
    step2 = HostState(
        intel_zones(20_000_000, 0),
        replace(cpu0, user=200, idle=1_000),
        3.0,
        [qemu(7, "keep", 100), qemu(8, "other", 100), qemu(9, "keep-late", 0)],
    )
    result, _ = run_monitor(
        root, work, first, [step1, step2], ["--interval", "1", "--duration", "2", "--vm", "keep"]
    )
    assert result.returncode == 0, result.stderr
    assert {r["vm"] for r in rows(result.stdout)} == {"keep"}
    # Each interval: 10 J, all busy (100 of 100 non-steal ticks), keep has half: 5 W.
    assert [float(r["vm_watts"]) for r in rows(result.stdout)] == pytest.approx(
        [5.0, 5.0], abs=1e-3
    )


def test_real_sleep_runs_for_the_duration_and_stops(tmp_path: Path) -> None:
    state = HostState(intel_zones(1, 1), CpuTimes(user=1, idle=1), 1.0, [qemu(3, "idle-vm", 5)])
    state.write(tmp_path)
    result = subprocess.run(
        ["bash", str(SCRIPT), "--interval", "0.2", "--duration", "0.5"],
        env=script_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    # ceil(0.5 / 0.2) = 3 intervals; the counters never moved: a measured 0 W, not a gap.
    assert [r["node_watts"] for r in rows(result.stdout)] == ["0.000"] * 3


@pytest.mark.parametrize(
    "args",
    [["--interval", "abc"], ["--interval", "0"], ["--duration"], ["--pid", "12x"], ["--bogus"]],
)
def test_bad_options_exit_64_with_a_message(args: list[str]) -> None:
    result = subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 64
    assert "kvm_power_monitor" in result.stderr


def test_missing_powercap_says_what_to_do(host: tuple[Path, Path]) -> None:
    root, _ = host
    (root / "sys").mkdir(parents=True)
    (root / "proc").mkdir()
    result = subprocess.run(
        ["bash", str(SCRIPT), "--duration", "1"],
        env=script_env(root),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "rapl_check.sh" in result.stderr


@needs_another_user
def test_not_root_fails_with_a_clear_message_and_no_password_prompt() -> None:
    with traversable_tree() as root:
        HostState(intel_zones(1, 1), CpuTimes(user=1, idle=1), 1.0).write(root)
        result = subprocess.run(
            [*AS_NOBODY, "bash", str(SCRIPT), "--interval", "1", "--duration", "1"],
            env=script_env(root),
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 77
    assert "must run as root" in result.stderr
    assert "CVE-2020-8694" in result.stderr
    assert result.stdout == ""


def test_script_has_no_password_and_passes_shellcheck() -> None:
    text = SCRIPT.read_text()
    assert "sudo -S" not in text and "password=" not in text.lower()
    require_binary("shellcheck", "shellcheck not installed (Debian package shellcheck)")
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("ctrl_c", [False, True], ids=["sigterm", "ctrl-c-to-the-group"])
def test_stopping_prints_the_totals_so_far(ctrl_c: bool, tmp_path: Path) -> None:
    state = HostState(intel_zones(1, 1), CpuTimes(user=1, idle=1), 1.0, [qemu(3, "stopper", 5)])
    state.write(tmp_path)
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), "--interval", "0.1"],  # no --duration: runs until stopped
        env=script_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line[:1].isdigit():  # the first interval's line
            break
    if ctrl_c:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: the sleep dies too
    else:
        proc.terminate()
    rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "# total\tvm=stopper\tpid=3\tjoules=0.000" in rest


def test_control_characters_in_a_vm_name_cannot_forge_rows(host: tuple[Path, Path]) -> None:
    # A guest named with a newline, a tab and an escape sequence: one row, its name made printable.
    root, work = host
    cpu0 = CpuTimes(user=0, idle=1_000)
    name = "evil\n5.00\t1.0\tfake\t1\t0\t999\t999\t\x1b[2Jx"
    first = HostState(intel_zones(0, 0), cpu0, 1.0, [qemu(7, name, 0)])
    step = HostState(intel_zones(10_000_000, 0), replace(cpu0, user=100, idle=1_000), 2.0, [qemu(7, name, 100)])
    result, _ = run_monitor(root, work, first, [step], ["--interval", "1", "--duration", "1"])
    assert result.returncode == 0, result.stderr
    (row,) = rows(result.stdout)
    assert row["vm"] == "evil?5.00?1.0?fake?1?0?999?999??[2Jx"
    assert "\x1b" not in result.stdout
