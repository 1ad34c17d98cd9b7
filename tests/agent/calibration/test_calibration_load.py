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
from agent.device.procstat import clock_ticks_per_second
from tests.helpers.calibrate_meter import REPO


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clock_ticks_per_second()  # utime + stime


def sched_seconds(pid: int) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting for one) from /proc/PID/schedstat."""
    try:
        on_cpu, waiting, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return None
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def shares(pid: int, seconds: float) -> tuple[float, float]:
    """Over SECONDS: (the share the process ran, the share it wanted a CPU).

    Wanting a CPU is running or being runnable and waiting for one (/proc/PID/schedstat). A
    worker spins for its duty and sleeps for the rest, so its wanted share is its duty whatever
    else runs on the CPUs, whereas the share it ran is also cut by every other runnable task.
    Without schedstat (a kernel without CONFIG_SCHED_INFO) the share it ran stands in.
    """
    cpu_before, sched_before, started = cpu_seconds(pid), sched_seconds(pid), time.monotonic()
    time.sleep(seconds)
    cpu_after, sched_after, elapsed = cpu_seconds(pid), sched_seconds(pid), time.monotonic() - started
    ran = (cpu_after - cpu_before) / elapsed
    if sched_before is None or sched_after is None or sched_after[0] == 0:
        return ran, ran
    return ran, (sum(sched_after) - sum(sched_before)) / elapsed


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_workers_follow_the_duty_and_stop() -> None:
    # A long period, so a late wake-up (a loaded host) is a small part of it.
    with LoadGenerator(workers=1, period_seconds=0.2) as generator:
        [pid] = generator.pids
        generator.set_duty(0.0)
        # once started (spawn imports the module first), a worker at duty 0 only sleeps
        deadline = time.monotonic() + 10
        while (idle := shares(pid, 0.3)[0]) >= 0.05 and time.monotonic() < deadline:
            pass
        assert idle < 0.05
        wanted = {}
        for duty in (0.25, 0.75):
            generator.set_duty(duty)
            time.sleep(0.2)  # the period under way when the duty changed
            wanted[duty] = shares(pid, 1.2)[1]
        # a late wake-up on a loaded host only adds to the share (the worker waits runnable);
        # a duty ignored or inverted fails one of the two
        assert 0.15 < wanted[0.25] < 0.45, wanted
        assert 0.6 < wanted[0.75] < 1.05, wanted
        assert generator.set_duty(1.7) == 1.0 and generator.set_duty(-1) == 0.0
    deadline = time.monotonic() + 3
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


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
