"""Run the agent's CLI in a subprocess, as a user would."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
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


def main_as_user(user: str, main: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str, str]:
    """Run `main(argv)` (a command line's entry point) in a forked child that has dropped
    privileges to USER, so opens fail for real where USER may not read.

    Returns (exit code, stdout, stderr). Needs root. Everything is imported before the fork,
    so the child needs no access to the interpreter's files (the venv lives under /root).
    """
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
                    code = main(argv)
                except SystemExit as exc:
                    code = int(exc.code or 0)
        except BaseException as exc:  # report anything to the parent
            err.write(repr(exc))
        finally:
            payload = json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}).encode()
            view = memoryview(payload)
            while view:
                view = view[os.write(write_fd, view):]
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks))
    return result["code"], result["out"], result["err"]


def cli_as_user(user: str, argv: list[str]) -> tuple[int, str, str]:
    """`kubejoule-agent ARGV` as USER (see main_as_user)."""
    from agent import cli

    return main_as_user(user, cli.main, argv)


@contextlib.contextmanager
def root_only_copy(tree: Path) -> Iterator[Path]:
    """A copy of a fixture tree whose energy_uj files are root-only (0400), as on kernels with
    the CVE-2020-8694 fix, under a directory any user can traverse; removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="kj-perm-", dir="/tmp"))
    os.chmod(base, 0o755)
    try:
        copy = base / tree.name
        shutil.copytree(tree, copy, symlinks=True)
        for path in copy.rglob("*"):
            if path.is_symlink():
                continue
            if path.name == "energy_uj":
                os.chmod(path, stat.S_IRUSR)
            elif path.is_dir():
                os.chmod(path, 0o755)
        yield copy
    finally:
        shutil.rmtree(base)
