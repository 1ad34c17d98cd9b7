"""A fake Prometheus HTTP API (`/api/v1/query`) serving the kubejoule agents' series for a
cluster of N nodes, with new values and sample times every second (each node's agent on its own
phase), for benchmarks/bench_scheduler.py. Runs as its own process, as a real Prometheus would:

    python benchmarks/fake_prometheus.py NODES PORT_FILE NOTIFY_PORT

It writes its port to PORT_FILE and, after answering the last of the queries the scheduler's
PrometheusSource makes every refresh (the curves, read every minute, may follow), sends a
datagram to 127.0.0.1:NOTIFY_PORT. The nodes have no GPUs and no BMC: the GPU and platform
queries are answered with no series, as a real Prometheus answers them for such a cluster. A
query it does not know is a 400, and said on stderr.
"""

from __future__ import annotations

import random
import socket
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.curves import PowerCurve  # noqa: E402
from scheduler.telemetry.exposition import (  # noqa: E402
    M_CURVE,
    M_PLATFORM_OTHER,
    M_POD_POWER,
    M_POWER,
    M_TIMESTAMP,
    M_UTILIZATION,
)
from scheduler.telemetry.sources import (  # noqa: E402
    GPU_COUNT_QUERY,
    GPU_WATTS_QUERY,
    POD_COUNT_QUERY,
    PrometheusSource,
)

CORES = (16, 32, 64)
VARIANTS = 4  # value sets each node's agent cycles through, one per second
EVAL = b"@EVAL@"  # placeholder for the query's evaluation time in prebuilt series


def node_names(size: int) -> list[str]:
    return [f"node-{i:05d}" for i in range(size)]


def node_cores(index: int) -> int:
    return CORES[index % len(CORES)]


class _Series:
    """Every node's series, prebuilt as JSON fragments; the query answers are joined from them."""

    def __init__(self, size: int) -> None:
        rng = random.Random(7)
        curves = [PowerCurve.linear(90, 300), PowerCurve.fan(60, 250, 1.4), PowerCurve.fan(120, 400, 1.2)]
        self.names = node_names(size)
        self.phase = [rng.random() for _ in self.names]  # each agent samples on its own phase
        self.by_variant: dict[str, list[list[bytes]]] = {M_POWER: [], M_UTILIZATION: []}
        curve_parts: list[bytes] = []
        pod_parts: list[bytes] = []
        count_parts: list[bytes] = []
        for i, name in enumerate(self.names):
            labels = f'"node":"{name}","instance":"10.0.{i // 250}.{i % 250}:9102","job":"kubejoule-agent"'
            curve = curves[i % len(curves)]
            utils = [rng.uniform(0.05, 0.9) for _ in range(VARIANTS)]
            self.by_variant[M_UTILIZATION].append([
                _fragment(M_UTILIZATION, labels, f"{u:.4f}") for u in utils
            ])
            self.by_variant[M_POWER].append([
                _fragment(M_POWER, labels + ',"source":"rapl"', f"{curve.watts(u) + rng.uniform(-3, 3):.2f}")
                for u in utils
            ])
            points = curve.as_points()
            curve_parts.extend(
                _fragment(M_CURVE, labels + f',"utilization":"{k / 10:.1f}"', f"{points[k]:.3f}")
                for k in range(len(points))
            )
            pods = rng.randint(0, 30)
            if pods:  # count by (node, owner_kind) (...): one series per node with pods
                count_parts.append(f'{{"metric":{{"node":"{name}"}},"value":[@EVAL@,"{pods}"]}}'.encode())
            for p in range(pods):
                pod_labels = (f'{labels},"namespace":"team-{p % 7}","pod":"app-{i}-{p}-7d9f8b6c5d-x2v{p:02d}",'
                              f'"pod_uid":"{rng.getrandbits(128):032x}"')
                pod_parts.append(_fragment(M_POD_POWER, pod_labels, f"{rng.uniform(0.5, 20):.2f}"))
        self.static = {M_CURVE: b",".join(curve_parts), M_POD_POWER: b",".join(pod_parts),
                       POD_COUNT_QUERY: b",".join(count_parts),
                       # No GPUs, no BMC: no series (CPU-only nodes read through RAPL).
                       GPU_WATTS_QUERY: b"", GPU_COUNT_QUERY: b"", M_PLATFORM_OTHER: b""}
        self.labels = [
            f'"node":"{name}","instance":"10.0.{i // 250}.{i % 250}:9102","job":"kubejoule-agent"'
            for i, name in enumerate(self.names)
        ]

    def answer(self, metric: str, now: float) -> bytes | None:
        """The query's answer; None for a query this fake does not know."""
        if metric in self.static:
            result = self.static[metric]
        elif metric in self.by_variant:
            result = b",".join(
                parts[int(now - phase) % VARIANTS]
                for parts, phase in zip(self.by_variant[metric], self.phase, strict=True)
            )
        elif metric == M_TIMESTAMP:
            result = b",".join(  # the agent's last sample: at most a second old
                _fragment(M_TIMESTAMP, labels, f"{int(now - phase) + phase:.3f}")
                for labels, phase in zip(self.labels, self.phase, strict=True)
            )
        else:
            return None
        body = b'{"status":"success","data":{"resultType":"vector","result":[' + result + b"]}}"
        return body.replace(EVAL, f"{now:.3f}".encode())


def _fragment(metric: str, labels: str, value: str) -> bytes:
    return f'{{"metric":{{"__name__":"{metric}",{labels}}},"value":[@EVAL@,"{value}"]}}'.encode()


def serve_prometheus(size: int, port_file: str, notify_port: int) -> None:
    """A Prometheus `/api/v1/query` for the agents' series; after answering the last of the
    extender's queries of a refresh it sends a datagram to `notify_port`."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlsplit

    series = _Series(size)
    notify = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    last_query = PrometheusSource.QUERIES[-1]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            url = urlsplit(self.path)
            query = (parse_qs(url.query).get("query") or [""])[0]
            body = series.answer(query, time.time())
            status = 200
            if body is None:  # loudly: a benchmark on silently missing series measures nothing
                print(f"fake Prometheus: unknown query {query!r}", file=sys.stderr, flush=True)
                body, status = b'{"status":"error","errorType":"bad_data","error":"unknown query"}', 400
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            if query == last_query:
                notify.sendto(b"r", ("127.0.0.1", notify_port))

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Path(port_file).write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    serve_prometheus(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
