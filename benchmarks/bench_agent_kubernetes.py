"""What pod names, Metrics Server and network counters cost the agent.

- Network: one NetworkReader.read() over N fake pods, each a real network namespace with a veth
  pair and a process in it (root only), in ms per read — the agent does this every interval.
- Metrics Server: one MetricsServerReader.read_once() against kmock's emulator with N pods on the
  node (one GET for the node and one per pod), in ms of wall time (in a background thread).
- Pod metadata: a full relist of N pods into the cache, and naming the pods of a Snapshot.
- Memory: what importing the Kubernetes adapter (the `kubernetes` package) adds to the agent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

INTERVAL_SECONDS = 5.0


def _best_ms(work, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best * 1000.0


def _network_rows() -> list[str]:
    if os.geteuid() != 0:
        return ["| network read | — | skipped: needs root (network namespaces) | |"]
    from agent.device.network import NetworkReader
    from benchmarks.harness.agent_netns import NetnsLab

    rows = []
    lab = NetnsLab()
    try:
        reader = NetworkReader()
        for count in (0, 10, 50):
            while len(lab.pods) < count:
                lab.add_pod()
            pods = {f"uid-{i}": [p.pid] for i, p in enumerate(lab.pods)}
            ms = _best_ms(lambda pods=pods: reader.read(pods))
            per_pod = f"{ms / count:.2f} ms/pod" if count else "node only"
            rows.append(
                f"| network read, {count} pods | {ms:.1f} ms | {per_pod} | {ms / (INTERVAL_SECONDS * 10):.2f} % |"
            )
    finally:
        lab.remove()
    return rows


def _metrics_server_rows() -> list[str]:
    from agent.kube.metrics_server import MetricsServerReader
    from agent.kube.podmeta import PodMeta
    from benchmarks.harness.agent_kube_emulator import EmulatedCluster

    rows = []
    with EmulatedCluster() as cluster, tempfile.TemporaryDirectory() as tmp, cluster.client(Path(tmp)) as client:
        cluster.set_node_metrics("n1", "1", "1Gi", "2025-01-01T00:00:00Z")
        for count in (10, 110):
            pods = [PodMeta(str(uuid.uuid4()), "bench", f"p{i}") for i in range(count)]
            for pod in pods:
                cluster.set_pod_metrics("bench", pod.name, {"c": ("10m", "10Mi")}, "2025-01-01T00:00:00Z")
            reader = MetricsServerReader(client, "n1", lambda pods=pods: pods)
            # The agent's own CPU: this thread's (the emulator serves from another thread).
            started = time.thread_time()
            ms = _best_ms(reader.read_once, repeat=3)
            cpu_ms = (time.thread_time() - started) * 1000.0 / 3
            rows.append(
                f"| Metrics Server read, {count} pods | {cpu_ms:.0f} ms agent CPU | {count + 1} GETs; "
                f"{ms:.0f} ms wall against kmock's emulator, in a background thread | "
                f"{cpu_ms / (15.0 * 10):.2f} % at the 15 s default period |"
            )
    return rows


def _podmeta_rows() -> list[str]:
    from agent.kube.podmeta import PodMetadataCache, with_pod_names
    from agent.monitor.snapshot import PodPower, Snapshot

    count = 110
    pods = [
        {"metadata": {"uid": str(uuid.uuid4()), "name": f"p{i}", "namespace": "bench"}, "spec": {"nodeName": "n1"}}
        for i in range(count)
    ]
    cache = PodMetadataCache()
    relist_ms = _best_ms(lambda: cache.replace(pods), repeat=20)
    snapshot = Snapshot(
        node="n1", interval_seconds=5.0, timestamp=0.0, source="none", node_watts=None, idle_watts=None,
        active_watts=None, idle_source="utilization", cpu_utilization=None, busy_cpu_seconds=None,
        pods=tuple(PodPower(p["metadata"]["uid"], "burstable", 1.0, 1.0) for p in pods),  # type: ignore[index]
    )
    name_ms = _best_ms(lambda: with_pod_names(snapshot, cache), repeat=20)
    return [
        f"| pod cache relist, {count} pods | {relist_ms:.2f} ms | once per resync (5 min) or reconnect | |",
        f"| naming a snapshot's {count} pods | {name_ms:.2f} ms | every interval | {name_ms / (INTERVAL_SECONDS * 10):.3f} % |",
    ]


def _import_rows() -> list[str]:
    # VmRSS, not ru_maxrss: the peak survives exec, so a child of this (large) process would
    # start with the parent's peak.
    code = (
        "def rss():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmRSS:'):\n"
        "            return int(line.split()[1])\n"
        "base = rss()\n"
        "import agent.kube.client\n"
        "print((rss() - base) / 1024)"
    )
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    seconds = time.perf_counter() - started
    return [f"| importing agent.kube.client (`kubernetes`) | {float(out.stdout):.0f} MB RSS | {seconds:.1f} s with interpreter start; not imported with --no-kube | |"]


def main() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    rows = ["| what | cost | notes | % of one core at a 5 s interval |", "|---|---|---|---|"]
    rows += _network_rows()
    rows += _metrics_server_rows()
    rows += _podmeta_rows()
    rows += _import_rows()
    return "\n".join(rows)


if __name__ == "__main__":
    print(main())
