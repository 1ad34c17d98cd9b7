"""What the end-to-end tests share: processes left behind, a kubernetes client on the harness's
kubeconfig, ServiceAccount tokens, and waiting for what the real components do in their time."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rl.simulation.traces.scenario import PodSpec

T = TypeVar("T")


def leftover_processes(marker: str) -> list[str]:
    """pid and command line of every process whose command line contains `marker`."""
    found = []
    own = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in argv and state != "Z":
            found.append(f"{entry.name}: {argv[:200]}")
    return found


def eventually(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.25) -> T:
    """The first truthy value of `check()` within `timeout` seconds, else AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout:g} s (last: {last!r})")


def random_trace(seed: int, count: int) -> list[PodSpec]:
    """`count` bare pods arriving ~40 s apart (exponential), 300–900 s long, asking 0.5, 1 or 2
    cores and as many GiB, using 50–100 % of their CPU request."""
    rng = random.Random(seed)
    pods, t = [], 0.0
    for i in range(count):
        t += rng.expovariate(1 / 40)
        cpu = rng.choice([0.5, 1.0, 2.0])
        pods.append(PodSpec(i, round(t, 1), round(rng.uniform(300, 900), 1), cpu, cpu, round(cpu * rng.uniform(0.5, 1), 3)))
    return pods
