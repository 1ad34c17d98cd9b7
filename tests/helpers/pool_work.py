"""A pool worker's work for rl/parallel.py's tests, in a module that imports little (a spawned
worker imports it)."""

from __future__ import annotations

import time


def slow_square(delays: dict[int, float], task: int) -> int:
    """Earlier tasks take longer; a negative task fails."""
    time.sleep(delays[task])
    if task < 0:
        raise ArithmeticError(f"task {task}")
    return task * task
