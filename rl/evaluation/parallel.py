"""Running many independent simulations: in this process, in a process pool (`--jobs N`), or
one slice of them (`--shard K/N`) whose results `kubejoule-rl merge` joins (rl/evaluation/shards.py).

* A task is a small picklable value; `work(context, task)` runs one, where `context` holds what
  every task shares (the cluster, the trace) and `work` is a module-level function. A pool
  worker receives the context once, from the pool's initializer, not with every task.
* Results come back in task order whatever order the workers finish in, and a simulation
  depends only on its task (its seed included), so `--jobs N` writes the same bytes as
  `--jobs 1`.
* Shard K of N (K counted from 0, as a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`) is the
  tasks i with i mod N = K: round robin, so every shard gets a share of every policy's runs.

The pool is `concurrent.futures.ProcessPoolExecutor` with the `spawn` start method (a worker
starts from a fresh interpreter, whatever threads the parent has). When it is done its workers
are joined, and multiprocessing's resource tracker — a process the pool's semaphores start
under `spawn`, which would otherwise outlive the pool and, orphaned when we exit, stay a zombie
under an init that does not reap (a container's, a sandbox's) — is stopped and reaped too,
unless it ran before the pool.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import resource_tracker
from typing import Any, TypeVar

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


# In a pool worker: (work, context), set once by the pool's initializer (`_start_worker`).
_worker: tuple[Callable[[Any, Any], Any], Any] | None = None


def _start_worker(work: Callable[[Any, Any], Any], context: Any) -> None:
    global _worker
    _worker = (work, context)


def _run_in_worker(task: Any) -> Any:
    assert _worker is not None, "the pool's initializer did not run"
    work, context = _worker
    return work(context, task)


def run_tasks(
    work: Callable[[Any, Task], Result],
    context: Any,
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
    tracker_before = _tracker_running()
    try:
        found = _run_in_pool(work, context, tasks, jobs, done)
    finally:
        if not tracker_before:
            _stop_tracker()
    return [found[position] for position in range(len(tasks))]


def _tracker_running() -> bool:
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    return getattr(tracker, "_fd", None) is not None


def _stop_tracker() -> None:
    """Stop multiprocessing's resource tracker and reap it (module docstring). The pool's
    semaphores are collected first: one finalized later would start it again."""
    gc.collect()
    stop = getattr(getattr(resource_tracker, "_resource_tracker", None), "_stop", None)
    if stop is not None:  # CPython's tracker; another implementation keeps its own
        stop()


def _run_in_pool(
    work: Callable[[Any, Task], Result],
    context: Any,
    tasks: Sequence[Task],
    jobs: int,
    done: Callable[[int, Result], None] | None,
) -> dict[int, Result]:
    found: dict[int, Result] = {}
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(tasks)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(work, context),
    ) as pool:
        futures: dict[Future[Result], int] = {
            pool.submit(_run_in_worker, task): position for position, task in enumerate(tasks)
        }
        waiting = set(futures)
        try:
            while waiting:
                finished, waiting = wait(waiting, return_when=FIRST_COMPLETED)
                for future in finished:
                    position = futures[future]
                    found[position] = future.result()  # a worker's exception is raised here
                    if done is not None:
                        done(position, found[position])
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return found
