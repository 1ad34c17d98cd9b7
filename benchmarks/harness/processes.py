"""Real processes on loopback, for tests and benchmarks: a free port, waiting for a process's
HTTP endpoint, stopping it, the CPU time it used."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on (yet)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, process: subprocess.Popen[Any], seconds: float = 30.0) -> None:
    """Until `url` answers 2xx; RuntimeError (with its stderr, if piped) when `process` exits
    first, TimeoutError after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        if process.poll() is not None:
            error = process.stderr.read() if process.stderr is not None else ""
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}: {error}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {seconds:.0f} s") from None
            time.sleep(0.1)


def stop(process: subprocess.Popen[Any], seconds: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited after `seconds`."""
    process.terminate()
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(seconds)


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process, from /proc/<pid>/stat (OSError when it is gone)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its live children (a process's cost is the whole
    process: the extender's telemetry refresher, say, runs in a child)."""
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        children = []
    total = 0.0
    for member in [pid, *children]:
        with contextlib.suppress(OSError):  # a child that just ended
            total += cpu_seconds(member)
    return total
