"""The decision log: JSONL lines written through, group fsync, rotation, crash safety,
torn lines (what the lines hold and when the scheduler writes them: test_decision_log_records.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchmarks.harness.crash_runs import decision_log_files
from scheduler.decisionlog.logfile import (
    DecisionLog,
    DecisionLogConfig,
    read_records,
)

ROOT = Path(__file__).resolve().parents[3]


def _all_records(path: Path) -> tuple[list[dict], int]:
    records: list[dict] = []
    bad = 0
    for file in decision_log_files(path):
        got, broken = read_records(file)
        records += got
        bad += broken
    return records, bad


def test_records_are_written_through_and_fsynced_in_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.jsonl"
    synced: list[list[int]] = []  # the records in the file at each fsync
    fsynced = threading.Event()

    def fsync(fd: int) -> None:
        synced.append([r["n"] for r in read_records(path)[0]])
        fsynced.set()

    monkeypatch.setattr(os, "fsync", fsync)
    decision_log = DecisionLog(
        DecisionLogConfig(str(path), batch_records=3, flush_interval_seconds=60.0)
    )
    decision_log.write({"n": 1})
    decision_log.write({"n": 2})
    # In the file (the kernel's) as soon as write() returns; not fsynced yet.
    assert [r["n"] for r in read_records(path)[0]] == [1, 2] and synced == []
    decision_log.write({"n": 3})  # the group is full: the background thread fsyncs it
    assert fsynced.wait(10)
    assert synced == [[1, 2, 3]]
    decision_log.write({"n": 4})
    decision_log.close()  # the rest is fsynced on close
    assert synced == [[1, 2, 3], [1, 2, 3, 4]]
    assert decision_log.batches_written == 2 and decision_log.records_written == 4
    decision_log.write({"n": 5})  # after close: counted, not written, not an error
    assert decision_log.records_dropped == 1 and len(read_records(path)[0]) == 4


def test_group_fsync_at_most_the_interval_after_a_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.jsonl"
    fsyncs: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd))
    decision_log = DecisionLog(
        DecisionLogConfig(str(path), batch_records=1000, flush_interval_seconds=0.05)
    )
    for n in range(5):
        decision_log.write({"n": n})
    deadline = time.monotonic() + 10
    while not fsyncs and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(fsyncs) == 1  # one fsync for the group of five
    decision_log.close()
    assert len(fsyncs) == 1  # nothing left to sync on close


def test_no_interval_fsyncs_every_record_in_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d.jsonl"
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(len(read_records(path)[0])))
    decision_log = DecisionLog(DecisionLogConfig(str(path), flush_interval_seconds=0))
    for n in range(3):
        decision_log.write({"n": n})
        assert synced[-1] == n + 1  # fsynced before write() returned
    decision_log.close()
    assert synced == [1, 2, 3]


def test_flush_if_due_follows_the_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    path = tmp_path / "d.jsonl"
    fsyncs: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd))
    decision_log = DecisionLog(
        DecisionLogConfig(str(path), batch_records=100, flush_interval_seconds=1.0),
        clock=lambda: now[0],
    )
    decision_log.write({"n": 1})
    decision_log.flush_if_due()
    assert fsyncs == [] and read_records(path)[0] == [{"n": 1}]
    now[0] = 1.5
    decision_log.flush_if_due()
    deadline = time.monotonic() + 10
    while not fsyncs and time.monotonic() < deadline:  # the caller or the thread, once
        time.sleep(0.01)
    assert len(fsyncs) == 1
    decision_log.close()


def test_rotation_by_size_keeps_the_newest_files(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    decision_log = DecisionLog(DecisionLogConfig(str(path), max_bytes=200, backups=2))
    for i in range(40):
        decision_log.write({"n": i, "pad": "x" * 40})
    decision_log.close()
    files = decision_log_files(path)
    assert [f.name for f in files] == ["d.jsonl.2", "d.jsonl.1", "d.jsonl"]
    assert all(f.stat().st_size <= 200 for f in files)
    numbers = [r["n"] for r in _all_records(path)[0]]
    assert numbers == list(range(numbers[0], 40))  # oldest dropped, the rest in order
    assert decision_log.rotations > 2


@pytest.mark.parametrize(
    ("tail", "bad"),
    [
        (b'{"n": 3, "trunc', 1),  # cut mid-record
        (b'{"n": 3, "s": "\xe2\x82', 1),  # cut inside a UTF-8 character
        (b"\x00" * 40, 1),  # a power cut: the file's length reached the disk, its data not
        (b"[3]\n", 1),  # JSON, but not a record
        (b"", 0),
    ],
)
def test_the_reader_skips_and_counts_a_torn_last_line(tmp_path: Path, tail: bytes, bad: int) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n' + tail)
    records, broken = read_records(path)
    assert [r["n"] for r in records] == [1, 2] and broken == bad


def test_restart_appends_and_seals_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n{"n": 3, "trunc')  # a crash mid-line
    decision_log = DecisionLog(DecisionLogConfig(str(path)))
    decision_log.write({"n": 4})
    decision_log.close()
    records, bad = read_records(path)
    assert [r["n"] for r in records] == [1, 2, 4]
    assert bad == 1
    assert path.read_bytes().startswith(b'{"n": 1}\n{"n": 2}\n{"n": 3, "trunc\n')


WRITER = """
import sys
from scheduler.decisionlog.logfile import DecisionLogConfig, DecisionLog
path, max_bytes, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
decision_log = DecisionLog(DecisionLogConfig(path, max_bytes=max_bytes, backups=50))
while True:
    decision_log.write({"type": "decision", "seq": seq, "pad": "x" * 300})
    seq += 1
    print(seq, flush=True)  # write() returned: the line is the kernel's
"""


def _run_writer_until(path: Path, start: int, at_least: int) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "60000", str(start)],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
    )
    assert proc.stdout is not None
    durable = start
    try:
        for line in proc.stdout:
            durable = int(line)
            if durable >= at_least:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # no chance to flush or close anything
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    return durable


def test_decision_log_survives_kill_minus_nine(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    first = _run_writer_until(path, 0, 400)
    records, bad = _all_records(path)
    seqs = [r["seq"] for r in records]
    assert seqs == list(range(len(seqs)))  # in order, no gaps, no duplicates
    assert len(seqs) >= first  # everything acknowledged is there
    assert bad <= 1  # at most the line being written when the process died
    assert len(decision_log_files(path)) > 1  # it rotated on the way

    restart_at = len(seqs)
    second = _run_writer_until(path, restart_at, restart_at + 200)
    records, bad = _all_records(path)
    seqs = [r["seq"] for r in records]
    assert seqs[:restart_at] == list(range(restart_at))  # nothing truncated on restart
    assert seqs == list(range(len(seqs))) and len(seqs) >= second
    assert bad <= 2
