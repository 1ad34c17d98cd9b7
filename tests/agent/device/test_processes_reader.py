"""/proc/<pid>/stat reading: odd comms, pid reuse, and real processes that come and go."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.device.hostfs import HostFS
from agent.device.processes import ProcessReader, ProcStat, cpu_ticks_delta, parse_stat

TAIL = " ".join(["0"] * 30)


def read_processes(fs: HostFS) -> tuple[dict[int, ProcStat], int]:
    """One read of every process, keeping no descriptors."""
    reader = ProcessReader(fs)
    reader.keep_open = False
    try:
        return reader.read()
    finally:
        reader.close()


def line(pid: int, comm: str, utime: int, stime: int, start: int) -> bytes:
    # fields 3..13, then utime (14), stime (15), 16..21, starttime (22), the rest
    return (f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 10 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} " + TAIL + "\n").encode()


@pytest.mark.parametrize("comm", ["nginx", "tmux: server", "a) (b", "(sd-pam)", "x)", "kworker/0:1-events"])
def test_comm_may_hold_spaces_and_parentheses(comm: str) -> None:
    stat = parse_stat(42, line(42, comm, 120, 30, 777))
    assert stat == ProcStat(42, comm.encode(), 150, 777)
    assert stat.comm_text == comm


def test_garbage_stat_is_a_value_error() -> None:
    with pytest.raises((ValueError, IndexError)):
        parse_stat(1, b"1 nocomm S")
    with pytest.raises((ValueError, IndexError)):
        parse_stat(1, b"1 (x) S 1 2")


def test_a_reused_pid_counts_from_zero_and_counters_never_go_back() -> None:
    old = ProcStat(7, b"old", 500, 100)
    assert cpu_ticks_delta(old, ProcStat(7, b"old", 530, 100)) == 30
    assert cpu_ticks_delta(old, ProcStat(7, b"new", 20, 9000)) == 20  # another process now
    assert cpu_ticks_delta(None, ProcStat(7, b"new", 20, 9000)) == 20  # started in the interval
    assert cpu_ticks_delta(old, ProcStat(7, b"old", 400, 100)) == 0


def test_a_process_whose_stat_vanished_or_is_garbage_is_skipped(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "10").mkdir(parents=True)
    (proc / "10" / "stat").write_bytes(line(10, "ok", 1, 2, 3))
    (proc / "11").mkdir()  # exited between the listing and the read
    (proc / "12").mkdir()
    (proc / "12" / "stat").write_bytes(b"garbage")
    (proc / "self").mkdir()
    (proc / "stat").write_text("cpu 0 0 0 0\n")
    processes, unparsable = read_processes(HostFS(proc, tmp_path / "sys"))
    assert set(processes) == {10} and unparsable == 1


def test_real_processes_their_cpu_time_and_churn_while_reading() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass"])
    try:
        fs = HostFS()
        deadline = time.monotonic() + 10
        first, _ = read_processes(fs)
        assert busy.pid in first and os.getpid() in first
        assert first[busy.pid].comm_text == Path(sys.executable).name[:15]  # comm: the exec'd file's name
        # processes start and exit while we read: never an exception, never a bad value
        churn = [subprocess.Popen(["sleep", f"0.0{i % 5}"]) for i in range(20)]
        seen: dict[int, ProcStat] = {}
        while time.monotonic() < deadline:
            now, unparsable = read_processes(fs)
            assert unparsable == 0
            seen = now
            if now[busy.pid].cpu_ticks - first[busy.pid].cpu_ticks >= 20:
                break
        for child in churn:
            child.wait()
        assert seen[busy.pid].cpu_ticks - first[busy.pid].cpu_ticks >= 20  # 0.2 s of CPU, in ticks
        assert seen[busy.pid].start_ticks == first[busy.pid].start_ticks
    finally:
        busy.kill()
        busy.wait()


def test_kept_descriptors_see_fresh_values_and_are_dropped_when_a_process_exits() -> None:
    from agent.device.processes import ProcessReader

    reader = ProcessReader(HostFS())
    assert reader.keep_open  # /proc here is a real procfs
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass"])
    try:
        first, _ = reader.read()
        assert busy.pid in first and reader.open_descriptors >= len(first) - 5
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            again, _ = reader.read()
            if again[busy.pid].cpu_ticks - first[busy.pid].cpu_ticks >= 10:
                break
            time.sleep(0.05)
        assert again[busy.pid].cpu_ticks - first[busy.pid].cpu_ticks >= 10  # pread re-generates the line
        busy.kill()
        busy.wait()
        gone, _ = reader.read()
        assert busy.pid not in gone
    finally:
        busy.kill()
        busy.wait()
        reader.close()
    assert reader.open_descriptors == 0


def test_no_descriptors_are_kept_on_a_fixture_tree(tmp_path: Path) -> None:
    from agent.device.processes import ProcessReader

    (tmp_path / "proc/10").mkdir(parents=True)
    (tmp_path / "proc/10/stat").write_bytes(line(10, "ok", 1, 2, 3))
    reader = ProcessReader(HostFS(tmp_path / "proc", tmp_path / "sys"))
    assert not reader.keep_open
    assert reader.read()[0][10].cpu_ticks == 3
    (tmp_path / "proc/10/stat").write_bytes(line(10, "ok", 5, 2, 3))  # files are replaced, not regenerated
    assert reader.read()[0][10].cpu_ticks == 7
    assert reader.open_descriptors == 0
