"""cluster-autoscaler gRPC expander: BestOptions latency over TLS on loopback, and the server's memory.

The server is the real command (`kubejoule-scheduler autoscaler-expander`) in its own process;
the client dials it as cluster-autoscaler does (TLS, the server certificate as the trust root)
and sends pre-encoded requests in the bytes form (nodeBytesMap/podBytes, cluster-autoscaler
≥ 1.35), timed from send to the decoded answer. Each pod carries about 1 KiB of annotations, the
size of a real pod's protobuf encoding. Cases:

* typical: 10 node groups, 50 Pending pods (the same pods in every option, as cluster-autoscaler
  sends them), also in the "both" form (cluster-autoscaler 1.34.2–1.34.5 sends every object twice);
* shared: 50 groups × 400 Pending pods, the same in every option (≈ 20 MiB);
* distinct: 1,000 groups × 20 pods each, no pod in two options (≈ 20 MiB, the worst case for
  the decoder's caches).

Target (issue 16): answered well within cluster-autoscaler's 5 s deadline; here ≤ 2.5 s.

    python benchmarks/run_all.py expander
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from benchmarks.harness.expander_grpc import (  # noqa: E402
    METHOD_PATH,
    best_options_request,
    pending_pod,
    self_signed,
    template_node,
)
from benchmarks.harness.processes import free_port  # noqa: E402
from scheduler.autoscaler.protos import expander_pb2  # noqa: E402

TARGET_SECONDS = 2.5
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CONFIG = """
node_groups:
  x3250-m3: {points: [41.6, 46.7, 52.3, 57.9, 65.4, 73, 80.7, 89.5, 99.6, 105, 113]}
  x3550-m3: {points: [58.4, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222]}
"""


def _request(groups: int, pods_per_option: int, shared: bool, form: str = "bytes") -> bytes:
    common = [pending_pod(f"p-{i}", "250m", "256Mi", annotation_bytes=900) for i in range(pods_per_option)]
    options = []
    templates = {}
    for g in range(groups):
        group = f"ng-{g}"
        pods = common if shared else [
            pending_pod(f"p-{g}-{i}", "250m", "256Mi", annotation_bytes=900) for i in range(pods_per_option)
        ]
        options.append((group, 1 + g % 3, pods))
        kind = "x3550-m3" if g % 7 == 3 else "x3250-m3"
        templates[group] = template_node(group, "24" if kind == "x3550-m3" else "8", "16Gi", {INSTANCE_TYPE: kind})
    return best_options_request(options, templates, form).SerializeToString()


def _vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _time_calls(call: grpc.UnaryUnaryMultiCallable, body: bytes, count: int) -> list[float]:
    seconds = []
    for _ in range(count):
        start = time.perf_counter()
        answer = call(body, timeout=30)
        seconds.append(time.perf_counter() - start)
        assert len(answer.options) == 1, answer
    return seconds


def main() -> str:
    cases = [
        ("typical", 10, 50, True, "bytes", 200),
        ("typical", 10, 50, True, "both", 100),
        ("shared", 50, 400, True, "bytes", 5),
        ("distinct", 1000, 20, False, "bytes", 3),
    ]
    bodies = {(name, form): _request(g, p, shared, form) for name, g, p, shared, form, _ in cases}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tls = self_signed(Path(tmp))
        config = Path(tmp) / "scheduler.yaml"
        config.write_text(CONFIG)
        port, http_port = free_port(), free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cmd.cli", "autoscaler-expander", "--listen", f"127.0.0.1:{port}",
             "--tls-cert", str(tls.cert_path), "--tls-key", str(tls.key_path), "--config", str(config),
             "--metrics-listen", f"127.0.0.1:{http_port}", "--log-level", "warning"],
            cwd=ROOT, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            idle_rss = _vm_hwm_mib(process.pid)
            credentials = grpc.ssl_channel_credentials(root_certificates=tls.cert_pem)
            with grpc.secure_channel(f"localhost:{port}", credentials) as channel:
                call = channel.unary_unary(
                    METHOD_PATH, response_deserializer=expander_pb2.BestOptionsResponse.FromString
                )
                for name, groups, pods, _, form, count in cases:
                    body = bodies[(name, form)]
                    first = _time_calls(call, body, 1)[0]
                    seconds = sorted(_time_calls(call, body, count))
                    p50 = statistics.median(seconds)
                    worst = max([first, *seconds])
                    met = "met" if worst <= TARGET_SECONDS else "MISSED"
                    rows.append(
                        f"| {name} | {form} | {groups:,} × {pods:,} | {len(body) / 2**20:.1f} MiB | "
                        f"{first * 1000:.1f} ms | {p50 * 1000:.1f} ms | {worst * 1000:.1f} ms ({met}) |"
                    )
            peak_rss = _vm_hwm_mib(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join(
        [
            f"gRPC expander BestOptions over TLS (load average {load}; target ≤ {TARGET_SECONDS} s)",
            "",
            "| case | form | options × pods | request | first call | p50 | worst |",
            "|---|---|---|---:|---:|---:|---:|",
            *rows,
            "",
            f"Server peak RSS: {idle_rss:.0f} MiB idle, {peak_rss:.0f} MiB after the cases.",
        ]
    )


if __name__ == "__main__":
    print(main())
