"""A pool worker's work for rl/evaluation/parallel.py's tests, in a module that imports little (a spawned
worker imports it)."""

from __future__ import annotations

import time


def slow_square(delays: dict[int, float], task: int) -> int:
    """Earlier tasks take longer; a negative task fails."""
    time.sleep(delays[task])
    if task < 0:
        raise ArithmeticError(f"task {task}")
    return task * task


def square_after(waits: dict[str, object], task: int) -> int:
    """Task 0 finishes only once task 2 has (a file in waits["dir"] says so; at most 60 s), so two
    workers finish out of order whatever their start-up times; a negative task fails."""
    from pathlib import Path

    directory = Path(str(waits["dir"]))
    if task == 0:
        deadline = time.monotonic() + 60.0
        while not (directory / "2").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    if task < 0:
        raise ArithmeticError(f"task {task}")
    (directory / str(task)).touch()
    return task * task


def exit_on(codes: dict[int, int], task: int) -> int:
    """The worker process ends at once with exit status `codes[task]` where there is one, as a
    crash would end it; other tasks return themselves."""
    import os

    if task in codes:
        os._exit(codes[task])
    return task
