"""Extender latency: `POST /prioritize` over loopback HTTP, p50/p99, at 100, 1,000, 5,000 nodes.

Every node has fresh telemetry and a calibration curve, so every node is really scored (no
neutral short cut). The server is the real app under uvicorn on 127.0.0.1, in active mode; the
client is one keep-alive HTTP connection sending the `NodeNames` form (`nodeCacheCapable: true`,
as the example KubeSchedulerConfiguration sets), timed from send to the last byte read. A smaller
run of the `Nodes.items` form (whole v1.Node objects) shows why the names form matters.

Targets (issue 6): p99 ≤ 10 ms at 1,000 nodes, ≤ 50 ms at 5,000 nodes.

    python benchmarks/run_all.py scheduler
"""

from __future__ import annotations

import gc
import http.client
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uvicorn  # noqa: E402

from agent.curves import PowerCurve  # noqa: E402
from scheduler.extender.app import create_app  # noqa: E402
from scheduler.extender.core import Extender  # noqa: E402
from scheduler.extender.decisions import MemoryRecorder  # noqa: E402
from scheduler.model import NodeTelemetry  # noqa: E402
from scheduler.scorer import HeuristicScorer  # noqa: E402
from scheduler.telemetry.samples import FetchResult, NodeSample  # noqa: E402
from scheduler.telemetry.store import TelemetryStore  # noqa: E402

SIZES = (100, 1000, 5000)
REQUESTS = {100: 400, 1000: 300, 5000: 150}
ITEMS_SIZES = (100, 1000)
ITEMS_REQUESTS = {100: 100, 1000: 30}
WARMUP = 20
TARGET_P99_MS = {1000: 10.0, 5000: 50.0}

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "bench", "namespace": "default", "uid": "bench-uid"},
    "spec": {
        "containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
    },
}


class _Fixed:
    name = "bench"

    def __init__(self, samples: dict[str, NodeSample]) -> None:
        self.samples = samples

    def fetch(self) -> FetchResult:
        return FetchResult(samples=self.samples)


def _node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _extender(names: list[str], now: float) -> Extender:
    rng = random.Random(1)
    curves = [
        PowerCurve.linear(90, 300).as_points(),
        PowerCurve.fan(60, 250, 1.4).as_points(),
        PowerCurve.fan(120, 400, 1.2).as_points(),
    ]
    samples = {
        name: NodeSample(
            NodeTelemetry(name, now - rng.uniform(0, 10), rng.uniform(80, 300), "rapl",
                          rng.random(), 32.0, rng.choice(curves)),
            pod_count=rng.randint(0, 30),
        )
        for name in names
    }
    store = TelemetryStore([_Fixed(samples)], clock=lambda: now)
    store.refresh_once()
    return Extender(
        HeuristicScorer(delta_p_ref_watts=20.0, consolidation=True),
        store, mode="active", recorder=MemoryRecorder(1000), clock=lambda: now,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serve(extender: Extender) -> Iterator[int]:
    port = _free_port()
    config = uvicorn.Config(
        create_app(extender, manage_store=False), host="127.0.0.1", port=port,
        log_level="warning", access_log=False, lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def _measure(port: int, body: bytes, count: int) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    timings = []
    for i in range(WARMUP + count):
        started = time.perf_counter()
        connection.request("POST", "/prioritize", body, headers)
        response = connection.getresponse()
        payload = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {payload[:200]!r}")
        if i >= WARMUP:
            timings.append(elapsed * 1000.0)
    connection.close()
    return timings


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100.0 * (len(ordered) - 1))))
    return ordered[index]


def _cpu_per_request_ms(extender: Extender, body: bytes, count: int = 50) -> float:
    """Thread CPU time of parse + score + encode, in process: the code's own cost, which the
    loopback wall-clock figures add HTTP and any CPU contention on the machine to."""
    from scheduler.extender.wire import json_response, parse_args

    for _ in range(5):
        json_response(extender.prioritize(parse_args(body)))
    started = time.thread_time()
    for _ in range(count):
        json_response(extender.prioritize(parse_args(body)))
    return (time.thread_time() - started) / count * 1000.0


def run(size: int, form: str) -> dict[str, float]:
    now = time.time()
    names = [f"node-{i:05d}" for i in range(size)]
    extender = _extender(names, now)
    if form == "NodeNames":
        body = json.dumps({"Pod": POD, "NodeNames": names}).encode()
        count = REQUESTS[size]
    else:
        body = json.dumps({"Pod": POD, "Nodes": {"items": [_node(n) for n in names]}}).encode()
        count = ITEMS_REQUESTS[size]
    gc.freeze()  # as `kubejoule-scheduler extender` does before serving
    with _serve(extender) as port:
        timings = _measure(port, body, count)
    gc.unfreeze()
    cpu_ms = _cpu_per_request_ms(extender, body, 50 if form == "NodeNames" else 10)
    print(f"  {form} {size} nodes: {count} requests", file=sys.stderr, flush=True)
    return {
        "p50": _percentile(timings, 50),
        "p99": _percentile(timings, 99),
        "mean": statistics.fmean(timings),
        "body_kib": len(body) / 1024.0,
        "requests": float(count),
        "cpu": cpu_ms,
    }


def main() -> str:
    rows = [
        "| nodes | form | request body | requests | p50 (ms) | p99 (ms) | target p99 | met | CPU/request (ms) |",
        "|---:|---|---:|---:|---:|---:|---:|:---:|---:|",
    ]
    for form, sizes in (("NodeNames", SIZES), ("Nodes.items", ITEMS_SIZES)):
        for size in sizes:
            r = run(size, form)
            target = TARGET_P99_MS.get(size) if form == "NodeNames" else None
            met = "" if target is None else ("yes" if r["p99"] <= target else "**no**")
            rows.append(
                f"| {size:,} | {form} | {r['body_kib']:,.0f} KiB | {r['requests']:.0f} | "
                f"{r['p50']:.2f} | {r['p99']:.2f} | {'' if target is None else f'≤ {target:.0f} ms'} | {met} | "
                f"{r['cpu']:.2f} |"
            )
    load = _load_average()
    rows.append("")
    rows.append(
        f"Loopback HTTP, one keep-alive client, uvicorn (h11), {os.cpu_count()} CPUs, "
        f"load average {load} during the run. CPU/request: parse + score + encode in process."
    )
    return "\n".join(rows)


def _load_average() -> str:
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    print(main())
