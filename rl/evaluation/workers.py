"""The worker processes behind `--jobs N` (rl/evaluation/parallel.py): plain child processes,
each a fresh interpreter started by `subprocess`, fed over two pipes of its own.

Why not `concurrent.futures.ProcessPoolExecutor`: started fresh (its `spawn` start method), its
workers and its queues' semaphores start multiprocessing's resource tracker, a process of its
own that outlives the pool and, orphaned when this process exits, stays a zombie under an init
that does not reap (a container's, a sandbox's); only CPython's private
`resource_tracker._resource_tracker` can stop it. Here nothing but the workers starts, and they
are joined when the pool closes, and at once when a task fails.

A worker is `python -c BOOT` with this process's `sys.path`, so it imports what this process
imports. It receives `(work, context)` once, then one task at a time, and answers each with
`(True, result)` or `(False, (exception, its traceback as text))`. A message is a pickle behind
its length (8 bytes, little-endian), read whole before it is unpickled.
"""

from __future__ import annotations

import os
import pickle
import selectors
import struct
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

Context = TypeVar("Context")
Task = TypeVar("Task")
Result = TypeVar("Result")

_HEADER = struct.Struct("<Q")
# A worker's first statements: this process's sys.path (argv[3:]) before anything is imported.
BOOT = (
    "import sys; sys.path[:] = sys.argv[3:]; from rl.evaluation.workers import serve; "
    "serve(int(sys.argv[1]), int(sys.argv[2]))"
)


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (the `__cause__` of the one re-raised)."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0])


def _write(fd: int, payload: bytes) -> None:
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int) -> Any:  # whatever was pickled
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    return pickle.loads(_read_exactly(fd, size))


def _failure(exc: BaseException) -> bytes:
    """A worker's answer for `exc`: the exception itself, or a RuntimeError naming it when it
    cannot travel."""
    text = "".join(traceback.format_exception(exc))
    try:
        return pickle.dumps((False, (exc, text)), pickle.HIGHEST_PROTOCOL)
    except Exception:  # an exception that does not pickle
        return pickle.dumps((False, (RuntimeError(f"{type(exc).__name__}: {exc}"), text)))


def serve(tasks_fd: int, results_fd: int) -> None:
    """A worker's loop: every task received until the pipe closes, each answered."""
    work, context = _receive(tasks_fd)
    while True:
        try:
            task = _receive(tasks_fd)
        except EOFError:
            return
        try:
            answer = pickle.dumps((True, work(context, task)), pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # the task's error (or its result's pickling) goes back
            answer = _failure(exc)
        _write(results_fd, answer)


class _Worker:
    """One worker process and this process's ends of its pipes."""

    def __init__(self) -> None:
        tasks_read, self.tasks = os.pipe()
        self.results, results_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", BOOT, str(tasks_read), str(results_write), *sys.path],
                stdin=subprocess.DEVNULL,
                pass_fds=(tasks_read, results_write),
            )
        except BaseException:
            os.close(self.tasks)
            os.close(self.results)
            raise
        finally:
            os.close(tasks_read)
            os.close(results_write)

    def send(self, message: object) -> None:
        try:
            _write(self.tasks, pickle.dumps(message, pickle.HIGHEST_PROTOCOL))
        except BrokenPipeError:
            raise BrokenProcessPool(f"a worker process exited ({self._status()})") from None

    def receive(self) -> tuple[bool, Any]:
        try:
            answer: tuple[bool, Any] = _receive(self.results)
        except EOFError:
            raise BrokenProcessPool(f"a worker process exited while running a task ({self._status()})") from None
        return answer

    def _status(self) -> str:
        code = self.process.wait()
        return f"exit status {code}" if code >= 0 else f"killed by signal {-code}"

    def close(self, kill: bool) -> None:
        """End the worker (at once with `kill`, else once it has read every task) and reap it."""
        if kill:
            self.process.kill()
        os.close(self.tasks)
        self.process.wait()
        os.close(self.results)


class WorkerPool(Generic[Context, Task, Result]):
    """`processes` workers running `work(context, task)`, started at once, each sent `context`
    once; `run()` as often as needed, then `close()` (or a `with` block) joins them."""

    def __init__(self, work: Callable[[Context, Task], Result], context: Context, processes: int) -> None:
        self._workers: list[_Worker] = []
        try:
            for _ in range(processes):
                self._workers.append(_Worker())
            for worker in self._workers:
                worker.send((work, context))
        except BaseException:
            self.close(kill=True)
            raise

    def run(self, tasks: Sequence[Task], done: Callable[[int, Result], None] | None = None) -> list[Result]:
        """Every task's result, in task order. `done(position, result)` runs here as each
        finishes; a worker's exception is raised here (its traceback as the cause), after which
        every worker is killed and reaped and the pool is closed."""
        found: dict[int, Result] = {}
        waiting = iter(enumerate(tasks))
        running: dict[_Worker, int] = {}
        try:
            with selectors.DefaultSelector() as selector:
                for worker, (position, task) in zip(self._workers, waiting, strict=False):
                    selector.register(worker.results, selectors.EVENT_READ, worker)
                    worker.send(task)
                    running[worker] = position
                while running:
                    for key, _ in selector.select():
                        worker = key.data
                        position = running.pop(worker)
                        ok, value = worker.receive()
                        if not ok:
                            exc, text = value
                            raise exc from RemoteTraceback(text)
                        found[position] = value
                        if done is not None:
                            done(position, value)
                        following = next(waiting, None)
                        if following is not None:
                            worker.send(following[1])
                            running[worker] = following[0]
        except BaseException:
            self.close(kill=True)
            raise
        return [found[position] for position in range(len(tasks))]

    def close(self, kill: bool = False) -> None:
        """Join the workers (with `kill`, at once); the pool runs nothing more."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.close(kill)

    def __enter__(self) -> WorkerPool[Context, Task, Result]:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self.close(kill=kind is not None)
