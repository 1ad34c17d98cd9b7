"""Helpers for the calibration tests: `kubejoule-calibrate` run in a child (watched by a
CpuMonitor), as another user, or a finished calibration made from a known curve."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agent.calibration.fit import Window, select_model
from agent.calibration.measure import Phase
from agent.cmd.calibrate_cli import Measured
from common.curves import PowerCurve
from tests.helpers.agent_cli import main_as_user
from tests.helpers.calibrate_meter import REPO, CpuMonitor


def calibrate_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `kubejoule-calibrate ARGS` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "agent.cmd.calibrate_cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def finished_calibration(curve: PowerCurve, phases: Sequence[tuple[str, float]], seconds: int = 10) -> Measured:
    """A calibration as `measure_and_fit` returns it — the seam between measuring and writing:
    PHASES (name, wall-clock start) at levels evenly spaced from 0 % to 100 %, the first the idle
    baseline, each of 1 s windows exactly on CURVE; zone intel-rapl:0, 2 cores."""
    measured = []
    for index, (name, start) in enumerate(phases):
        level = index / (len(phases) - 1)
        windows = [
            Window(level, curve.watts(level), 1.0, name, start + k, start + k + 1, level) for k in range(seconds)
        ]
        measured.append(Phase(name, level, windows))
    fit = select_model([w for p in measured for w in p.windows])
    zones = [{"zone_id": "intel-rapl:0", "name": "package-0", "socket": 0}]
    return Measured("packages", zones, 2, measured[:1], measured[1:], fit)


@dataclass
class WatchedRun:
    """A finished `kubejoule-calibrate run`, its stderr lines with their arrival (monotonic) times,
    and the CPU monitor that sampled the machine meanwhile."""

    returncode: int
    stdout: str
    stderr_lines: list[tuple[float, str]]
    monitor: CpuMonitor

    @property
    def stderr(self) -> str:
        return "\n".join(line for _, line in self.stderr_lines)


def calibrate_watched(*args: str, monitor: CpuMonitor, timeout: float = 240) -> WatchedRun:
    """Run `kubejoule-calibrate ARGS` in a subprocess, as `calibrate_cli`, noting when each stderr
    line (warnings, the progress lines of finished phases) arrives; MONITOR (sampled by a running
    VirtualMeter) learns the calibration's pid."""
    monitor.sample()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.cmd.calibrate_cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    monitor.pid = proc.pid
    lines: list[tuple[float, str]] = []
    out: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip("\n")))

    def read_stdout() -> None:
        assert proc.stdout is not None
        out.append(proc.stdout.read())

    readers = [threading.Thread(target=read, daemon=True) for read in (read_stderr, read_stdout)]
    for reader in readers:
        reader.start()
    # A blocking wait, not a polling one: this thread then never holds the GIL the meter needs.
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    watchdog = threading.Timer(timeout, kill)
    watchdog.start()
    try:
        proc.wait()
    finally:
        watchdog.cancel()
        for reader in readers:
            reader.join(5)
    monitor.sample()
    if timed_out.is_set():
        raise subprocess.TimeoutExpired(proc.args, timeout)
    return WatchedRun(proc.returncode, "".join(out), lines, monitor)


def calibrate_as_user(user: str, argv: list[str]) -> tuple[int, str, str]:
    """Run `kubejoule-calibrate ARGV` in a forked child that dropped privileges to USER."""
    from agent.cmd.calibrate_cli import main

    return main_as_user(user, main, argv)
