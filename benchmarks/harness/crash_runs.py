"""`kill -9` runs for the decision log: the standalone scheduler against kmock's emulator and
the extender in shadow mode, each killed (SIGKILL) again and again while it works; then every
acknowledged decision — a binding the emulator accepted, an extender answer the client
received — is looked up in the decision log. Shared by the tests and the benchmark."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.extender_process import ExtenderProcess, post, small_body, start_extender
from benchmarks.harness.processes import free_port
from benchmarks.harness.standalone_kmock import EmulatedCluster
from benchmarks.harness.standalone_objects import node, pod
from scheduler.decisionlog.logfile import read_records

ROOT = Path(__file__).resolve().parents[2]


def decision_log_files(path: str | Path) -> list[Path]:
    """A decision log's live file and its rotations, oldest first."""
    base = Path(path)
    rotated = sorted(
        (p for p in base.parent.glob(base.name + ".*") if p.suffix[1:].isdigit()),
        key=lambda p: int(p.suffix[1:]),
        reverse=True,
    )
    return rotated + ([base] if base.exists() else [])


@dataclass
class CrashRun:
    kills: int = 0
    acknowledged: int = 0  # bindings accepted / answers received
    lost: list[str] = field(default_factory=list)  # acknowledged without a decision line
    torn_lines: int = 0  # lines the reader skipped (a line cut by a kill)
    decision_lines: int = 0
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "kills": self.kills,
            "acknowledged": self.acknowledged,
            "lost": len(self.lost),
            "torn_lines": self.torn_lines,
            "decision_lines": self.decision_lines,
            "seconds": round(self.seconds, 1),
        }


def decision_records(path: Path) -> tuple[list[dict[str, Any]], int]:
    records: list[dict[str, Any]] = []
    torn = 0
    for file in decision_log_files(path):
        got, bad = read_records(file)
        records += [r for r in got if r.get("type") == "decision"]
        torn += bad
    return records, torn


def _kill(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)


def standalone_kill_run(workdir: Path, kills: int, seed: int = 1, pods_per_kill: int = 30) -> CrashRun:
    """Pods keep arriving; the scheduler is killed a random few bindings after it starts
    binding, `kills` times, then a last one schedules the rest and is killed too."""
    rng = random.Random(seed)
    decisions = workdir / "decisions.jsonl"
    run = CrashRun()
    started = time.monotonic()
    with EmulatedCluster() as cluster:
        for i in range(4):
            cluster.create_node(node(f"n{i}", cpu="64", memory="256Gi", pods="1000"))
        config = workdir / "scheduler.yaml"
        config.write_text(f"kubernetes:\n  host: {cluster.url}\nrefresh_seconds: 1\n")
        created = 0
        for round_ in range(kills + 1):
            for _ in range(pods_per_kill):
                cluster.create_pod(pod(f"p{created}", requests={"cpu": "10m"}))
                created += 1
            before = sum(a.accepted for a in cluster.bindings())
            proc = subprocess.Popen(
                [sys.executable, "-m", "scheduler.cmd.cli", "run", "--config", str(config),
                 "--listen", f"127.0.0.1:{free_port()}", "--decision-log", str(decisions),
                 "--identity", "crash-test", "--lease-duration", "2", "--renew-deadline", "1.5",
                 "--retry-period", "0.2", "--seed", str(seed + round_), "--log-level", "error"],
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            # Killed after a random number of this round's bindings (the last round: all).
            target = before + (rng.randint(3, pods_per_kill - 3) if round_ < kills else created - before)
            deadline = time.monotonic() + 60
            try:
                while sum(a.accepted for a in cluster.bindings()) < target:
                    if proc.poll() is not None:
                        raise RuntimeError(f"the scheduler exited with {proc.returncode}")
                    if time.monotonic() > deadline:
                        raise RuntimeError("the scheduler made no progress")
                    time.sleep(0.002)
            finally:
                _kill(proc)
            run.kills += 1
        accepted = [a for a in cluster.bindings() if a.accepted]
    records, run.torn_lines = decision_records(decisions)
    run.decision_lines = len(records)
    logged = {(r["pod"]["namespace"], r["pod"]["name"], r["chosen"]) for r in records}
    run.acknowledged = len(accepted)
    run.lost = [f"{a.namespace}/{a.pod}" for a in accepted if (a.namespace, a.pod, a.node) not in logged]
    run.seconds = time.monotonic() - started
    return run


def extender_kill_run(workdir: Path, kills: int, seed: int = 1, clients: int = 4) -> CrashRun:
    """Clients keep asking /prioritize of an extender in shadow mode with a decision log; it
    is killed at a random moment (0.3–1.5 s into each life), `kills` times."""
    rng = random.Random(seed)
    decisions = workdir / "decisions.jsonl"
    run = CrashRun()
    answered: list[str] = []
    lock = threading.Lock()
    started = time.monotonic()
    counter = iter(range(10**9))
    for _ in range(kills):
        server = start_extender(workdir, mode="shadow", decision_log=decisions)
        stop = threading.Event()

        def client(server: ExtenderProcess = server, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                with lock:
                    name = f"pod-{next(counter)}"
                try:
                    answer = post(server.port, "/prioritize", small_body(name, nodes=50), timeout=10)
                except OSError:
                    continue  # killed mid-request: not acknowledged
                if answer.status == 200:
                    with lock:
                        answered.append(name)

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.3, 1.5))
        server.kill()
        stop.set()
        for t in threads:
            t.join(15)
        run.kills += 1
    records, run.torn_lines = decision_records(decisions)
    run.decision_lines = len(records)
    logged = {r["pod"]["name"] for r in records}
    run.acknowledged = len(answered)
    run.lost = [name for name in answered if name not in logged]
    run.seconds = time.monotonic() - started
    return run
