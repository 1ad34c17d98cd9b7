"""Running many independent simulations: in this process, in a process pool (`--jobs N`), or
one slice of them (`--shard K/N`) whose results `kubejoule-rl merge` joins (rl/evaluation/shards.py).

* A task is a small picklable value; `work(context, task)` runs one, where `context` holds what
  every task shares (the cluster, the trace) and `work` is a module-level function. A worker
  process receives the context once, not with every task.
* Results come back in task order whatever order the workers finish in, and a simulation
  depends only on its task (its seed included), so `--jobs N` writes the same bytes as
  `--jobs 1`.
* Shard K of N (K counted from 0, as a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`) is the
  tasks i with i mod N = K: round robin, so every shard gets a share of every policy's runs.

The workers (rl/evaluation/workers.py) are fresh interpreters, whatever threads this process
has, started by `subprocess` and joined before the results return: nothing outlives them (no
resource tracker, which `concurrent.futures.ProcessPoolExecutor` would leave behind).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rl.evaluation.workers import WorkerPool

Context = TypeVar("Context")
Task = TypeVar("Task")
Result = TypeVar("Result")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0 ≤ index < count)."""

    index: int
    count: int

    def indices(self, total: int) -> list[int]:
        """The task indices of this shard among `total` tasks."""
        return list(range(self.index, total, self.count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """`K/N`: shard K (from 0) of N. ValueError saying what is wrong."""
    index_text, slash, count_text = text.strip().partition("/")
    if not slash or not index_text.strip().isdigit() or not count_text.strip().isdigit():
        raise ValueError(f"--shard {text!r}: expected K/N with integers 0 <= K < N, e.g. 0/4")
    index, count = int(index_text), int(count_text)
    if count < 1:
        raise ValueError(f"--shard {text!r}: N must be at least 1")
    if index >= count:
        raise ValueError(f"--shard {text!r}: K must be below N (the shards are 0/{count} … "
                         f"{count - 1}/{count})")
    return Shard(index, count)


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_jobs(text: str) -> int:
    """`--jobs N`: an integer ≥ 1. ValueError otherwise."""
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1 or str(jobs) != text.strip():
        raise ValueError(f"--jobs {text!r}: expected a whole number of processes >= 1")
    return jobs


def run_tasks(
    work: Callable[[Context, Task], Result],
    context: Context,
    tasks: Sequence[Task],
    jobs: int = 1,
    done: Callable[[int, Result], None] | None = None,
) -> list[Result]:
    """`work(context, task)` for every task, in `jobs` processes; the results in task order.
    `done(position, result)` is called in this process as each task finishes."""
    if jobs <= 1 or len(tasks) <= 1:
        results = []
        for position, task in enumerate(tasks):
            results.append(work(context, task))
            if done is not None:
                done(position, results[-1])
        return results
    with WorkerPool(work, context, min(jobs, len(tasks))) as pool:
        return pool.run(tasks, done)


