"""The fuzz corpus' replay and verdict (tests/agent/cmd/test_fuzz_corpus.py's docstring says what
the verdict is), shared with tests/agent/cmd/test_fuzz_garbage.py."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import select
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.agent_cli import FIXTURES, check_record, strict_json

BASE = FIXTURES / "workloads" / "v2-systemd-containerd"
MANIFEST = json.loads((BASE / "workload.json").read_text())
PODS = {p["name"]: p for p in MANIFEST["pods"]}
NODE_WATTS = 27.5  # package +50 J and dram +5 J over 2 s
RAPL = "sys/devices/virtual/powercap/intel-rapl/intel-rapl:0"
DRAM = f"{RAPL}/intel-rapl:0:1"
MAX_POWER = f"{RAPL}/constraint_0_max_power_uw"
NOBODY = 65534
TIMEOUT_S = 30.0


def pod_file(pod: str, name: str) -> str:
    return f"sys/fs/cgroup/{PODS[pod]['cgroup']}/{name}"


@dataclass(frozen=True)
class Case:
    """One corruption: what it does to the trees, and what its verdict needs beyond the common one."""

    corrupt: Callable[[Path, Path], None]  # (before, after) trees, modified in place
    gap: str | None  # the start of an expected gap's `what` (None: the corruption loses nothing)
    kinds: tuple[str, ...]  # its kind, one of these
    node_known: bool | None  # True: node power must be exactly 27.5 W; False: null; None: either
    unreadable: tuple[str, ...] = ()  # paths (in the after tree) that must be unreadable: run as nobody
    unknown_pod: str | None = None  # a pod whose watts must be null


WEB_CPU = pod_file("web-7d9f8", "cpu.stat")
@dataclass
class Outcome:
    code: int | None  # None: killed at the timeout (a hang)
    out: str = ""
    err: str = ""
    denied: list[bool] = field(default_factory=list)  # per unreadable path: not readable by the child


def replay_in_child(before: Path, after: Path, user: int | None, unreadable: list[Path],
                    timeout: float = TIMEOUT_S) -> Outcome:
    """`kubejoule-agent replay BEFORE AFTER --interval 2 --json` in a forked child (as USER when
    given), killed after TIMEOUT seconds."""
    from agent.cmd import cli
    argv = ["replay", str(before), str(after), "--interval", "2", "--json", "--node", "n1"]
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        result: dict[str, Any] = {"code": 1, "denied": []}
        out, err = io.StringIO(), io.StringIO()
        try:
            if user is not None:
                os.setgroups([])
                os.setgid(user)
                os.setuid(user)
            result["denied"] = [not os.access(path, os.R_OK) for path in unreadable]
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    result["code"] = cli.main(argv)
                except SystemExit as exc:
                    result["code"] = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # a crash: its traceback is the finding
            err.write(traceback.format_exc())
        finally:
            result.update(out=out.getvalue(), err=err.getvalue())
            view = memoryview(json.dumps(result).encode())
            while view:
                view = view[os.write(write_fd, view):]
            os._exit(0)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            ready = select.select([read_fd], [], [], max(remaining, 0))[0] if remaining > 0 else []
            if not ready:
                os.kill(pid, signal.SIGKILL)
                return Outcome(None)
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks))
    return Outcome(result["code"], result["out"], result["err"], result["denied"])


def numbers(record: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every measured number of a record, by a key that names it."""
    for key in ("node_watts", "idle_watts", "active_watts", "cpu_utilization", "busy_cpu_seconds", "host_watts"):
        if key in record:
            yield key, record[key]
    for zone in record["zones"]:
        yield f"zone {zone['path'].rsplit('/', 1)[-1]}", zone["watts"]
    for pod in record["pods"]:
        yield f"pod {pod['uid']} watts", pod["watts"]
        yield f"pod {pod['uid']} cpu", pod["cpu_seconds"]
        for container in pod["containers"]:
            yield f"container {container['id']} watts", container["watts"]
            yield f"container {container['id']} cpu", container["cpu_seconds"]
    for vm in record["vms"]:
        yield f"vm {vm['pid']} watts", vm["watts"]
        yield f"vm {vm['pid']} cpu", vm["cpu_seconds"]

def violations(case: Case, outcome: Outcome, truth: dict[str, Any]) -> list[str]:
    """What is wrong with a case's outcome: empty when its verdict holds."""
    if outcome.code is None:
        return [f"hang: no answer within {TIMEOUT_S:g} s"]
    found: list[str] = []
    if not all(outcome.denied):
        found.append("the unreadable path was readable to the child: the case tests nothing")
    if outcome.code != 0:
        return [*found, f"crash: exit {outcome.code}: {outcome.err[-2000:]}"]
    try:
        record = strict_json(outcome.out)
        check_record(record)
    except Exception as exc:  # noqa: BLE001 - any invalid output is the finding
        return [*found, f"invalid record: {exc!r}"]
    for key, value in numbers(record):
        if value is None:
            continue
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            found.append(f"wrong number: {key} = {value!r}")
        elif key not in truth or truth[key] is None or not math.isclose(value, truth[key], rel_tol=1e-9, abs_tol=1e-12):
            found.append(f"wrong number: {key} = {value!r}, the true value is {truth.get(key)!r}")
    node = record["node_watts"]
    if case.node_known is True and node is None:
        found.append("node power lost although every zone it needs was read")
    if case.node_known is False and node is not None:
        found.append(f"node power {node} W given although a zone it needs is missing")
    if node is not None:
        pods = sum(p["watts"] or 0.0 for p in record["pods"])
        if pods > node * (1 + 1e-9):
            found.append(f"pods add up to {pods} W, more than the node's {node} W")
    if case.unknown_pod is not None:
        uid = PODS[case.unknown_pod]["uid"]
        pod = next((p for p in record["pods"] if p["uid"] == uid), None)
        if pod is None:
            found.append(f"pod {case.unknown_pod} disappeared (its power would move into the host)")
        elif pod["watts"] is not None:
            found.append(f"pod {case.unknown_pod} has {pod['watts']} W from a corrupt read")
        if record["host_watts"] is not None:
            found.append("host power given although a pod's CPU time is unknown")
    if case.gap is not None and not any(g["what"].startswith(case.gap) and g["kind"] in case.kinds
                                        for g in record["gaps"]):
        found.append(f"no gap '{case.gap}…' of kind {case.kinds}: {record['gaps']}")
    return found
