"""Run the agent's CLI in a subprocess, as a user would."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
POWERCAP = FIXTURES / "powercap"


def run_agent(*args: str, user: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        user=user,
    )


def replay_record(before: Path, after: Path, interval: float = 2.0, *extra: str) -> dict[str, Any]:
    proc = run_agent("replay", str(before), str(after), "--interval", str(interval), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    record: dict[str, Any] = json.loads(proc.stdout)
    return record


def cli_as_user(user: str, argv: list[str]) -> tuple[int, str, str]:
    """Run `kubejoule-agent ARGV` in a forked child that has dropped privileges to USER.

    Returns (exit code, stdout, stderr). Needs root. Everything is imported before the fork,
    so the child needs no access to the interpreter's files.
    """
    from agent import cli

    entry = pwd.getpwnam(user)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        code = 1
        out, err = io.StringIO(), io.StringIO()
        try:
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli.main(argv)
                except SystemExit as exc:
                    code = int(exc.code or 0)
        except BaseException as exc:  # report anything to the parent
            err.write(repr(exc))
        finally:
            payload = json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}).encode()
            os.write(write_fd, payload)
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks))
    return result["code"], result["out"], result["err"]
