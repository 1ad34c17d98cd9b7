"""The load generator: workers follow their duty cycle, stop when told, and never outlive a
killed calibration."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.calibration.load import LoadGenerator
from agent.calibration.measure import levels
from agent.procstat import clock_ticks_per_second
from tests.helpers.calibrate_meter import REPO


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clock_ticks_per_second()  # utime + stime


def busy_share(pids: list[int], seconds: float) -> float:
    before = sum(cpu_seconds(p) for p in pids)
    time.sleep(seconds)
    return (sum(cpu_seconds(p) for p in pids) - before) / seconds / len(pids)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_workers_follow_the_duty_and_stop() -> None:
    with LoadGenerator(workers=1, period_seconds=0.05) as generator:
        pids = generator.pids
        assert len(pids) == 1
        generator.set_duty(0.0)
        # once started (spawn imports the module first), a worker at duty 0 only sleeps
        deadline = time.monotonic() + 10
        while (idle_share := busy_share(pids, 0.3)) >= 0.05 and time.monotonic() < deadline:
            pass
        assert idle_share < 0.05
        generator.set_duty(0.5)
        share = busy_share(pids, 0.8)
        # at most the duty (plus bookkeeping); how much less depends on what else runs on the
        # shared CPUs, which is why the calibration measures utilization instead of trusting it
        assert 0.05 < share < 0.62
        assert generator.set_duty(1.7) == 1.0 and generator.set_duty(-1) == 0.0
    deadline = time.monotonic() + 3
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)


def test_workers_of_a_killed_calibration_stop_by_themselves() -> None:
    script = (
        "import time\n"
        "from agent.calibration.load import LoadGenerator\n"
        "g = LoadGenerator(workers=1)\n"
        "g.start()\n"
        "g.set_duty(0.1)\n"
        "print(*g.pids, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert pids and all(alive(p) for p in pids)
    finally:
        parent.send_signal(signal.SIGKILL)  # no cleanup runs in the parent
        parent.wait()
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    leftover = [p for p in pids if alive(p)]
    for pid in leftover:  # never leave a spinning process behind, even when failing
        os.kill(pid, signal.SIGKILL)
    assert not leftover


def test_levels_are_evenly_spaced_from_idle_to_full() -> None:
    assert levels(11) == pytest.approx([i / 10 for i in range(11)])
    assert levels(2) == [0.0, 1.0]
    with pytest.raises(ValueError):
        levels(1)
