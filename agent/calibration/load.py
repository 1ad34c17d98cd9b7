"""The built-in load generator: one worker process per CPU, each busy for a duty cycle.

Each worker spins for `duty × period` and sleeps for the rest of every period, so a duty of
0.3 on every CPU keeps the node about 30 % busy. The calibration never trusts the duty: it
measures utilization from /proc/stat and, when other work shares the host, nudges the duty so
the measured load reaches each level.

This module imports nothing heavy: workers are started with the `spawn` method and import it
fresh. A worker whose parent disappears (killed calibration) stops within one period, so a
crashed calibration never leaves CPUs spinning.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.context import SpawnProcess
from multiprocessing.sharedctypes import Synchronized
from types import TracebackType

DEFAULT_PERIOD_SECONDS = 0.05


class LoadError(RuntimeError):
    """The load generator could not run."""


def available_cpus() -> int:
    """CPUs this process may run on (its affinity), which is what the workers can load."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _spin_until(deadline: float) -> int:
    spins = 0
    while time.perf_counter() < deadline:
        spins += 1
    return spins


def _worker(
    duty: Synchronized[float], stop: Synchronized[int], ready: Synchronized[int], period: float, parent_pid: int
) -> None:
    """Busy for duty × period, asleep for the rest, until told to stop or orphaned."""
    with ready.get_lock():
        ready.value += 1
    while not stop.value and os.getppid() == parent_pid:
        start = time.perf_counter()
        share = min(max(duty.value, 0.0), 1.0)
        if share > 0.0:
            _spin_until(start + share * period)
        remaining = start + period - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)


class LoadGenerator:
    """Duty-cycle workers; use as a context manager so they always stop."""

    def __init__(self, workers: int | None = None, period_seconds: float = DEFAULT_PERIOD_SECONDS) -> None:
        self.workers = workers if workers is not None else available_cpus()
        if self.workers < 1:
            raise ValueError(f"need at least one worker, got {self.workers}")
        if period_seconds <= 0:
            raise ValueError(f"the duty-cycle period must be positive, got {period_seconds}")
        self.period_seconds = period_seconds
        self._context = multiprocessing.get_context("spawn")
        self._duty: Synchronized[float] = self._context.Value("d", 0.0, lock=False)
        self._stop: Synchronized[int] = self._context.Value("i", 0, lock=False)
        self._ready: Synchronized[int] = self._context.Value("i", 0)
        self._processes: list[SpawnProcess] = []

    @property
    def duty(self) -> float:
        return float(self._duty.value)

    def set_duty(self, duty: float) -> float:
        """Set every worker's busy share of each period (clamped to 0–1); returns what was set."""
        value = min(max(float(duty), 0.0), 1.0)
        self._duty.value = value
        return value

    def start(self, timeout_seconds: float = 30.0) -> None:
        """Start the workers and wait until each runs its loop: their start-up (a fresh
        interpreter importing this module) is load of its own, and must not land in a step."""
        if self._processes:
            return
        self._stop.value = 0
        self._ready.value = 0
        for index in range(self.workers):
            process = self._context.Process(
                target=_worker,
                args=(self._duty, self._stop, self._ready, self.period_seconds, os.getpid()),
                name=f"kubejoule-load-{index}",
                daemon=True,
            )
            process.start()
            self._processes.append(process)
        deadline = time.monotonic() + timeout_seconds
        while self._ready.value < self.workers and time.monotonic() < deadline:
            if not all(p.is_alive() for p in self._processes):
                break
            time.sleep(0.01)
        if self._ready.value < self.workers:
            self.stop()
            raise LoadError(f"the load generator's {self.workers} worker process(es) did not start")

    def stop(self, timeout_seconds: float = 2.0) -> None:
        self._duty.value = 0.0
        self._stop.value = 1
        deadline = time.monotonic() + timeout_seconds
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.terminate()
                process.join(1.0)
        self._processes.clear()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.pid is not None]

    def __enter__(self) -> LoadGenerator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
