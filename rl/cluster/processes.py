"""Starting, watching and stopping the control plane's processes: each in a process group of its
own (so that stopping it stops whatever it spawned), its output in `<dir>/logs/<name>.log`, ready
when its probe answers, and a failure that names the component and shows its last log lines."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

LOG_TAIL_LINES = 25


class ComponentError(RuntimeError):
    """A component that could not start, or died: its name, command and last log lines."""

    def __init__(self, name: str, what: str, log: Path | None = None) -> None:
        tail = log_tail(log) if log is not None else ""
        super().__init__(f"{name}: {what}" + (f"\n--- last lines of {log} ---\n{tail}" if tail else ""))
        self.component = name
        self.log_text = tail


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Process:
    """A started component."""

    name: str
    argv: tuple[str, ...]
    log: Path
    popen: subprocess.Popen[bytes] | None
    pid: int

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped by its parent) is not alive.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start(name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str] | None = None) -> Process:
    """Start `argv` in a new session (its own process group), output appended to its log."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    if not Path(argv[0]).is_file():
        raise ComponentError(name, f"no binary at {argv[0]} (build the components: `make k8s-tools`)")
    with log.open("ab") as out:
        out.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
        out.flush()
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    return Process(name, tuple(argv), log, popen, popen.pid)


def wait_ready(process: Process, probe: Callable[[], bool], timeout: float) -> None:
    """Return when `probe()` is true; ComponentError when the process exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        if not process.alive():
            code = process.popen.returncode if process.popen is not None else None
            raise ComponentError(process.name, f"exited (code {code}) before it was ready", process.log)
        if probe():
            return
        if time.monotonic() > deadline:
            raise ComponentError(process.name, f"not ready after {timeout:g} s", process.log)
        time.sleep(0.2)


def port_in_use(process: Process) -> bool:
    """Did the component die because its port was taken (another port is then tried)?"""
    text = log_tail(process.log).lower()
    return "address already in use" in text or "bind: address in use" in text


def stop(process_or_pid: Process | int, grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL after `grace` seconds; reap our own child."""
    if isinstance(process_or_pid, Process):
        pid, popen = process_or_pid.pid, process_or_pid.popen
    else:
        pid, popen = process_or_pid, None
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if popen is not None:
                if popen.poll() is not None:
                    break
            elif not pid_alive(pid):
                break
            time.sleep(0.1)
        else:
            continue
        break
    # Whatever else the group spawned goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)
