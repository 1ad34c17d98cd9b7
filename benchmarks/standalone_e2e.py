"""The standalone scheduler end to end, as deployed: `kubejoule-scheduler run` in its own
process against kmock's emulated API server in another (watch, bind, Events, leader election
on, as shipped), telemetry from a fake Prometheus in a third (every node's series, new each
second: `benchmarks/fake_prometheus.py`), for benchmarks/bench_standalone.py.

Measured from the moment the first pod is created to the moment the last one is bound (the
scheduler's count of binding attempts says when to ask the emulator): the scheduler
process's own CPU time (utime + stime from /proc, its threads and any child) per bound pod —
the emulator's and Prometheus' cost is theirs, not ours — and the wall-clock pods/s beside it;
and the same process's CPU per second while idle, before the pods (telemetry refresh, lease).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Emulator:
    """kmock's emulated API server in a process of its own."""

    def __enter__(self) -> Emulator:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.harness.standalone_kmock"], cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url:
            raise RuntimeError("the emulator did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def post(self, path: str, body: dict) -> None:
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()

    def post_all(self, path: str, bodies: list[dict], threads: int = 8) -> None:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda body: self.post(path, body), bodies))

    def bound_pods(self) -> int:
        with urllib.request.urlopen(self.url + "/api/v1/pods", timeout=60) as response:
            pods = json.loads(response.read())["items"]
        return sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))


class FakePrometheus:
    """benchmarks/fake_prometheus.py in a process of its own (nodes named node-00000…)."""

    def __init__(self, nodes: int, workdir: Path) -> None:
        self.notify = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.notify.bind(("127.0.0.1", 0))
        port_file = workdir / f"prometheus-{nodes}.port"
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "fake_prometheus.py"), str(nodes), str(port_file),
             str(self.notify.getsockname()[1])], cwd=ROOT,
        )
        deadline = time.monotonic() + 120
        while not port_file.exists() or not port_file.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the fake Prometheus did not start")
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{port_file.read_text()}"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.notify.close()


def _attempts(metrics_url: str) -> float:
    """Pods the scheduler bound or failed to (kubejoule_scheduler_schedule_attempts_total)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
        if line.startswith(('kubejoule_scheduler_schedule_attempts_total{result="scheduled"}',
                            'kubejoule_scheduler_schedule_attempts_total{result="error"}'))
    )


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def run(
    nodes: list[dict], pods: list[dict], idle_seconds: float = 5.0,
    on_ready: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """One end-to-end run (module docstring). `on_ready(pid)` is called with the scheduler's
    process id before the pods come (to attach a sampling profiler: `py-spy record --pid`)."""
    from benchmarks.harness.processes import free_port, tree_cpu_seconds

    with tempfile.TemporaryDirectory() as tmp, Emulator() as emulator:
        workdir = Path(tmp)
        emulator.post_all("/api/v1/nodes", nodes)
        prometheus = FakePrometheus(len(nodes), workdir)
        scheduler: subprocess.Popen[bytes] | None = None
        try:
            config = workdir / "scheduler.yaml"
            config.write_text(json.dumps({
                "mode": "active",
                "kubernetes": {"host": emulator.url},
                "telemetry": {"prometheus": {"url": prometheus.url}, "node_capacity_from_kubernetes": False},
            }))
            port = free_port()
            scheduler = subprocess.Popen(
                [sys.executable, "-m", "scheduler.cmd.cli", "run", "--config", str(config), "--listen",
                 f"127.0.0.1:{port}", "--lease-namespace", "default", "--log-level", "warning"],
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 300
            while not _ready(base + "/readyz"):
                if scheduler.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the scheduler did not get ready")
                time.sleep(0.2)
            time.sleep(3.0)  # the lease taken, a few refreshes done
            idle_cpu = tree_cpu_seconds(scheduler.pid)
            time.sleep(idle_seconds)
            idle_share = (tree_cpu_seconds(scheduler.pid) - idle_cpu) / idle_seconds
            if on_ready is not None:
                on_ready(scheduler.pid)
            cpu_before, started = tree_cpu_seconds(scheduler.pid), time.perf_counter()
            creator = threading.Thread(
                target=emulator.post_all, args=("/api/v1/namespaces/default/pods", pods), daemon=True
            )
            creator.start()
            deadline = time.monotonic() + 600
            # Done when every pod is bound. The scheduler's count of bindings says when to look
            # (a binding whose answer was lost counts as an error, although the pod is bound).
            while _attempts(base + "/metrics") < len(pods) or emulator.bound_pods() < len(pods):
                if scheduler.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the pods were not all bound in time")
                time.sleep(0.05)
            elapsed = time.perf_counter() - started
            cpu = tree_cpu_seconds(scheduler.pid) - cpu_before
            creator.join(60)
        finally:
            if scheduler is not None:
                scheduler.terminate()
                try:
                    scheduler.wait(30)
                except subprocess.TimeoutExpired:
                    scheduler.kill()
            prometheus.close()
        bound = emulator.bound_pods()
    if bound != len(pods):
        raise RuntimeError(f"{bound} pods bound of {len(pods)}")
    return {
        "nodes": len(nodes),
        "pods": len(pods),
        "seconds": round(elapsed, 3),
        "pods_per_s": round(len(pods) / elapsed, 1),
        "scheduler_cpu_seconds": round(cpu, 3),
        "scheduler_cpu_ms_per_pod": round(cpu * 1000.0 / len(pods), 3),
        "scheduler_idle_cpu_share": round(idle_share, 4),
    }
