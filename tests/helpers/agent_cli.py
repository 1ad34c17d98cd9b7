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

from agent.monitor import record_schema

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
POWERCAP = FIXTURES / "powercap"


def machine_rapl_zones(sysfs: Path = Path("/sys")) -> list[str]:
    """The RAPL zones the agent finds on this machine, found the way it finds them. Tests of "no
    RAPL here" run where this is empty — a stock kernel has /sys/class/powercap (POWERCAP is built
    in) with no zone in it, and that is a machine without RAPL as much as one without the folder."""
    from agent.device.hostfs import HostFS
    from agent.device.rapl import discover_zones

    _, zones, _ = discover_zones(HostFS(Path("/proc"), sysfs))
    return sorted(zones)


def run_agent(*args: str, user: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent.cmd.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        user=user,
    )


def replay_record(before: Path, after: Path, interval: float = 2.0, *extra: str) -> dict[str, Any]:
    """`kubejoule-agent replay ... --json`: exit 0 and a valid record (check_record), returned."""
    proc = run_agent("replay", str(before), str(after), "--interval", str(interval), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    record = strict_json(proc.stdout)
    check_record(record)
    return record


def strict_json(text: str) -> dict[str, Any]:
    """json.loads that refuses NaN and Infinity (Python's json accepts them; JSON does not)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    record: dict[str, Any] = json.loads(text, parse_constant=refuse)
    return record


# The sample record's schema (kubejoule.sample/v1), strict: agent/monitor/record_schema.py.
SAMPLE_SCHEMA = record_schema.SAMPLE_SCHEMA


def check_record(record: dict[str, Any]) -> None:
    """A sample record is valid: DESIGN.md's shape and types, and its rules — no source, no
    watts; unknown node power leaves every share unknown (null, never 0); known shares add up
    to node power (Σ pods (watts + gpu_watts) + host + idle + gpu_unattributed = node, 1e-6 relative)."""
    import jsonschema

    jsonschema.validate(record, SAMPLE_SCHEMA)
    if record["source"] == "none":
        assert record["node_watts"] is None
    if record["node_watts"] is None:
        shares = [record["idle_watts"], record["active_watts"], record["host_watts"]]
        shares += [p["watts"] for p in record["pods"]] + [v["watts"] for v in record["vms"]]
        shares += [p.get("gpu_watts") for p in record["pods"]] + [record.get("gpu_unattributed_watts")]
        shares += [p["watts"] for p in record["processes"]]
        assert all(w is None for w in shares), "a share of unknown node power is not null"
        assert any(g["what"] == "node" or g["what"].startswith(("zone", "gpu")) for g in record["gaps"]), \
            "no reason given"
    for pod in record["pods"]:  # a share needs its CPU time; unknown CPU time is a gap
        entities = [pod, *pod["containers"]]
        assert all(e["cpu_seconds"] is not None or e["watts"] is None for e in entities), pod
        if pod["cpu_seconds"] is None:
            assert any(g["what"] == f"pod {pod['uid']}" for g in record["gaps"]), f"pod {pod['uid']}: no reason given"
    parts = [record["idle_watts"], record["host_watts"], *(p["watts"] for p in record["pods"])]
    parts += [p["gpu_watts"] for p in record["pods"] if "gpu_watts" in p]  # and the GPUs' split
    parts += [record.get("gpu_unattributed_watts") or 0.0]
    if record["node_watts"] is not None and all(w is not None for w in parts):
        total = sum(parts)
        assert abs(total - record["node_watts"]) <= 1e-6 * max(record["node_watts"], 1e-9), (total, record["node_watts"])


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
    from agent.cmd import cli
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
