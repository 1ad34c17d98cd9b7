"""The extender under abuse: 32 clients sending maximal bodies at once while small requests go on.

A real `kubejoule-scheduler extender` process (shadow mode, its defaults: 16 MiB body limit,
64 MiB of bodies in flight) on 127.0.0.1. Each round, 32 clients (threads of a process of
their own) post a maximal `Nodes.items` body at once (realistic Node objects up to the 16 MiB
limit); meanwhile two clients in the benchmark's process post small
`NodeNames` requests (20 nodes, what kube-scheduler sends with `nodeCacheCapable: true`) every
20 ms each, and each one's latency (connect to last byte) is recorded. Also measured: the same
small requests with no flood; the server's peak RSS (VmHWM, the server process and its
telemetry refresher, summed) against the
Deployment's memory limit; how the maximal bodies were answered (200, or 503 + Retry-After).

Targets (issue 17): peak RSS ≤ the manifest's limit; small-request p99 ≤ 100 ms meanwhile;
0 5xx.

Run: `python benchmarks/bench_extender_abuse.py [--json] [--rounds N]`, or
`python benchmarks/run_all.py extender_abuse` (under a minute on two cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.extender_process import (  # noqa: E402
    Answer,
    collect_flood,
    flood_process,
    maximal_body,
    percentile,
    post,
    running_extender,
    small_body,
)
from common.quantity import quantity_units  # noqa: E402
from scheduler.extender.body import MIN_MAX_BODY_BYTES  # noqa: E402

MANIFEST = ROOT / "daemonset/components/extender/extender-deployment.yaml"
ROUNDS = 3
CLIENTS = 32
TARGET_P99_SECONDS = 0.100


def manifest_limit_bytes() -> int:
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        if doc and doc.get("kind") == "Deployment":
            [container] = doc["spec"]["template"]["spec"]["containers"]
            return quantity_units(container["resources"]["limits"]["memory"])
    raise RuntimeError("no Deployment in the extender manifest")


def _small_stream(port: int, stop: threading.Event, out: list[Answer], tag: str) -> None:
    i = 0
    while not stop.is_set():
        try:
            out.append(post(port, "/prioritize", small_body(f"{tag}-{i}"), timeout=30))
        except OSError:
            out.append(Answer(-1))
        i += 1
        stop.wait(0.02)


def _latencies(answers: list[Answer]) -> dict[str, Any]:
    seconds = [a.seconds for a in answers if a.status == 200]
    return {
        "count": len(answers),
        "statuses": dict(Counter(str(a.status) for a in answers)),
        "p50_ms": percentile(seconds, 0.5) * 1000,
        "p99_ms": percentile(seconds, 0.99) * 1000,
        "max_ms": max(seconds) * 1000 if seconds else float("nan"),
    }


def _handler_buckets(port: int) -> dict[str, float]:
    """The server's own /prioritize latency histogram (time in the handler), cumulative."""
    text = post(port, "/metrics", b"", method="GET").body.decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("kubejoule_extender_request_duration_seconds_bucket") and 'verb="prioritize"' in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            found[le] = float(line.rsplit(" ", 1)[1])
    return found


@contextlib.contextmanager
def _small_streams(port: int, answers: list[Answer], prefix: str) -> Iterator[None]:
    """Two streams of small requests (`_small_stream`) for as long as the block runs."""
    stop = threading.Event()
    streams = [threading.Thread(target=_small_stream, args=(port, stop, answers, f"{prefix}{k}"))
               for k in range(2)]
    for t in streams:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in streams:
            t.join(30)


def run(rounds: int = ROUNDS) -> dict[str, Any]:
    load = os.getloadavg()
    big = maximal_body(MIN_MAX_BODY_BYTES)
    workdir = Path(tempfile.mkdtemp(prefix="bench-extender-abuse-"))
    try:
        with running_extender(workdir) as server:
            started_kib = server.memory_kib()["VmRSS"]
            # Small requests alone first (the reference), then under the flood.
            quiet: list[Answer] = []
            with _small_streams(server.port, quiet, "q"):
                time.sleep(3.0)
            handler_before = _handler_buckets(server.port)

            flooded: list[Answer] = []
            with _small_streams(server.port, flooded, "f"):
                flood_started = time.perf_counter()
                bigs = collect_flood(flood_process(server.port, CLIENTS, rounds, MIN_MAX_BODY_BYTES))
                flood_seconds = time.perf_counter() - flood_started
            memory = server.memory_kib()
            handler = _handler_buckets(server.port)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    limit = manifest_limit_bytes()
    return {
        "load_average": list(load),
        "body_bytes": len(big),
        "clients": CLIENTS,
        "rounds": rounds,
        "flood_seconds": flood_seconds,
        "large": {
            "statuses": dict(Counter(str(a.status) for a in bigs)),
            "retry_after": sorted({a.headers.get("retry-after", "") for a in bigs if a.status == 503}),
            "p50_s": percentile([a.seconds for a in bigs if a.status == 200], 0.5),
        },
        "small_quiet": _latencies(quiet),
        "small_flooded": _latencies(flooded),
        # Requests under the flood whose handler (parse, answer, encode) took at most 25 ms /
        # 100 ms, from the server's histogram; the maximal bodies take longer than 0.25 s.
        "handler_within": {
            le: handler.get(le, 0.0) - handler_before.get(le, 0.0) for le in ("0.025", "0.1", "0.25")
        },
        "rss_start_mib": started_kib / 1024,
        "rss_peak_mib": memory["VmHWM"] / 1024,
        "rss_end_mib": memory["VmRSS"] / 1024,
        "limit_mib": limit / 2**20,
        "load_average_after": list(os.getloadavg()),
    }


def table(f: dict[str, Any]) -> str:
    quiet, flooded, large = f["small_quiet"], f["small_flooded"], f["large"]
    within = f["handler_within"]
    p99_met = "met" if flooded["p99_ms"] <= TARGET_P99_SECONDS * 1000 else "**missed**"
    rss_met = "met" if f["rss_peak_mib"] <= f["limit_mib"] else "**missed**"
    statuses = ", ".join(f"{n}× {s}" for s, n in sorted(large["statuses"].items()))
    rows = [
        f"| {f['clients']} clients × {f['rounds']} rounds of {f['body_bytes'] / 2**20:.1f} MiB bodies | figure | target |",
        "|---|---|---|",
        f"| peak RSS (VmHWM, server + refresher; {f['rss_start_mib']:.0f} MiB at start, "
        f"{f['rss_end_mib']:.0f} MiB after) | {f['rss_peak_mib']:.0f} MiB | ≤ {f['limit_mib']:.0f} MiB: {rss_met} |",
        f"| small requests meanwhile, p50 / p99 / max ({flooded['count']}) | "
        f"{flooded['p50_ms']:.0f} / {flooded['p99_ms']:.0f} / {flooded['max_ms']:.0f} ms | p99 ≤ 100 ms: {p99_met} |",
        f"| of them, time in the server's handler ≤ 25 ms / ≤ 100 ms (its histogram) | "
        f"{within['0.025']:.0f} / {within['0.1']:.0f} of {flooded['count']} | |",
        f"| small requests alone, p50 / p99 ({quiet['count']}) | {quiet['p50_ms']:.0f} / {quiet['p99_ms']:.0f} ms | |",
        f"| small requests' statuses under the flood | {flooded['statuses']} | all 200 |",
        f"| maximal bodies: answers (Retry-After {', '.join(large['retry_after']) or '—'}) | {statuses} | no 5xx |",
        f"| maximal body answered, p50 | {large['p50_s']:.2f} s | |",
    ]
    before, after = f["load_average"], f["load_average_after"]
    rows += ["", f"Load average {before[0]:.2f} before, {after[0]:.2f} after."]
    return "\n".join(rows)


def main() -> str:
    return table(run())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds of 32 maximal bodies")
    args = parser.parse_args()
    figures = run(args.rounds)
    print(json.dumps(figures) if args.json else table(figures))
