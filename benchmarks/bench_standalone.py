"""Standalone scheduler throughput: decisions per second at 1,000 and 5,000 nodes.

* scoring only — filter + energy score + default score + choose + assume, against the cache,
  no API: the vectorized path the scheduler runs, and the per-node reference path;
* with the API — the whole loop against kmock's emulated API server on 127.0.0.1 (watch, pick,
  bind through the Binding subresource, Events), from the first decision to the last binding;
  the emulator runs in a process of its own, and — more pessimistic — in the scheduler's own
  process, sharing its GIL. The emulator is Python too: it, not the scheduler, sets the pace.

Reference: kube-scheduler's scalability threshold of 680 pods/s at 5,000 nodes means about
1.5 ms per pod (and kube-scheduler scores a sample of the nodes — `percentageOfNodesToScore`,
about 10 % at 5,000 — where this scheduler scores every feasible node).

Run: `python benchmarks/run_all.py standalone` (about a minute on two cores).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.curves import PowerCurve  # noqa: E402
from scheduler import kube  # noqa: E402
from scheduler.model import NodeTelemetry, PodInfo  # noqa: E402
from scheduler.plugins.energy import EnergyPlugin  # noqa: E402
from scheduler.standalone.binding import KubeClusterApi  # noqa: E402
from scheduler.standalone.loop import StandaloneScheduler  # noqa: E402
from scheduler.standalone.settings import GIL_SWITCH_INTERVAL_SECONDS, MODE_ACTIVE, StandaloneConfig  # noqa: E402
from tests.helpers.standalone_kmock import EmulatedCluster  # noqa: E402
from tests.helpers.standalone_objects import node, pod  # noqa: E402

NODE_COUNTS = (1000, 5000)
KUBE_SCHEDULER_MS_PER_POD = 1000.0 / 680.0


class Telemetry:
    """A fixed telemetry view (every node fresh, with a calibration curve)."""

    def __init__(self, names: list[str], seed: int = 0) -> None:
        rng = random.Random(seed)
        now = time.time() + 3600.0  # stays fresh for the whole run
        self.samples: dict[str, NodeTelemetry] = {}
        for name in names:
            idle = rng.uniform(60.0, 140.0)
            curve = PowerCurve.fan(idle, idle + rng.uniform(80.0, 260.0), 1.4).as_points()
            self.samples[name] = NodeTelemetry(
                name, now, idle * 1.4, "rapl", rng.uniform(0.05, 0.6), 32.0, curve
            )

    def telemetry(self, node_name: str) -> NodeTelemetry | None:
        return self.samples.get(node_name)

    def snapshot(self) -> Mapping[str, NodeTelemetry]:
        return self.samples


def _node_objects(count: int) -> list[dict]:
    return [node(f"node-{i:05d}", cpu="32", memory="128Gi") for i in range(count)]


def _pod_objects(count: int, prefix: str = "bench") -> list[dict]:
    rng = random.Random(1)
    return [
        pod(
            f"{prefix}-{i:05d}",
            requests={"cpu": f"{rng.choice([100, 250, 500, 1000])}m",
                      "memory": f"{rng.choice([128, 256, 512, 1024])}Mi"},
        )
        for i in range(count)
    ]


def scoring_only(node_count: int, pods: int) -> float:
    """Milliseconds per decision (decide + assume), after a warm-up."""
    nodes = _node_objects(node_count)
    telemetry = Telemetry([n["metadata"]["name"] for n in nodes])
    config = StandaloneConfig(mode=MODE_ACTIVE, seed=1)
    scheduler = StandaloneScheduler(None, EnergyPlugin(), config, telemetry=telemetry)  # type: ignore[arg-type]
    for obj in nodes:
        scheduler.cache.upsert_node(obj)
    infos = [PodInfo.from_k8s(p) for p in _pod_objects(pods + 5)]
    for info in infos[:5]:  # warm-up: builds the node table and the scorer's batch
        scheduler.cache.assume(info, scheduler.decide(info).chosen or "", time.time())
    started = time.perf_counter()
    for info in infos[5:]:
        decision = scheduler.decide(info)
        assert decision.chosen is not None
        scheduler.cache.assume(info, decision.chosen, time.time())
    return (time.perf_counter() - started) * 1000.0 / pods


class EmulatorProcess:
    """The emulated API server in a process of its own (so it does not share our GIL)."""

    def __enter__(self) -> EmulatorProcess:
        root = Path(__file__).resolve().parents[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.standalone_kmock"],
            cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
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
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def with_api(node_count: int, pods: int, separate_process: bool) -> float:
    """Milliseconds per pod, from the first decision to the last binding, through the API."""
    emulator: Any = EmulatorProcess() if separate_process else EmulatedCluster()
    with emulator as cluster:
        nodes = _node_objects(node_count)
        if separate_process:
            for obj in nodes:
                cluster.post("/api/v1/nodes", obj)
            for obj in _pod_objects(pods):
                cluster.post("/api/v1/namespaces/default/pods", obj)
        else:
            for obj in nodes:
                cluster.create_node(obj)
            for obj in _pod_objects(pods):
                cluster.create_pod(obj)
        telemetry = Telemetry([n["metadata"]["name"] for n in nodes])
        api_client = kube.make_api_client(cluster.url)
        api = KubeClusterApi(api_client, watch_timeout_seconds=300)
        scheduler = StandaloneScheduler(
            api, EnergyPlugin(), StandaloneConfig(mode=MODE_ACTIVE, seed=1),
            telemetry=telemetry,
        )
        stop = threading.Event()
        thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECONDS)  # as `kubejoule-scheduler run` does
        thread.start()
        try:
            if not scheduler.synced.wait(120):
                raise RuntimeError("the scheduler did not sync")
            started = time.perf_counter()
            deadline = started + 300
            value = "kubejoule_scheduler_schedule_attempts_total"
            while (scheduler.metrics.value(value, {"result": "scheduled"}) or 0) < pods:
                if time.perf_counter() > deadline:
                    raise RuntimeError("pods were not all bound in time")
                time.sleep(0.01)
            elapsed = time.perf_counter() - started
        finally:
            stop.set()
            thread.join(30)
            sys.setswitchinterval(switch_interval)
        listed, _ = kube.list_pods(api_client)
        bound = sum(1 for p in listed if p["spec"].get("nodeName"))
        if bound != pods:
            raise RuntimeError(f"{bound} pods bound of {pods}")
    return elapsed * 1000.0 / pods


def _row(what: str, nodes: int, ms: float) -> str:
    verdict = "faster" if ms <= KUBE_SCHEDULER_MS_PER_POD else "slower"
    ratio = ms / KUBE_SCHEDULER_MS_PER_POD
    return (
        f"| {what} | {nodes:,} | {ms:.2f} | {1000.0 / ms:,.0f} | "
        f"{ratio:.1f}× ({verdict} than 1.5 ms) |"
    )


def main() -> str:
    rows = [
        "| path | nodes | ms per pod | pods/s | vs kube-scheduler (1.5 ms/pod) |",
        "|---|---:|---:|---:|---|",
    ]
    for count in NODE_COUNTS:
        print(f"scoring only, {count} nodes …", file=sys.stderr, flush=True)
        rows.append(_row("scoring only (vectorized)", count, scoring_only(count, 300)))
    for count in NODE_COUNTS:
        print(f"with the API, {count} nodes …", file=sys.stderr, flush=True)
        rows.append(_row("with API round trip (emulator in its own process)", count,
                         with_api(count, 300, separate_process=True)))
        rows.append(_row("with API round trip (emulator in the same process)", count,
                         with_api(count, 300, separate_process=False)))
    return "\n".join(rows)


if __name__ == "__main__":
    print(main())
