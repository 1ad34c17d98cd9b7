"""The extender's memory under many unique node names (issue 40).

A real `kubejoule-scheduler extender` process (shadow mode, no telemetry) on 127.0.0.1 gets
/prioritize bodies in the Nodes.items form (what kube-scheduler sends without
`nodeCacheCapable`), each with 1,000 realistic Node objects of names never sent before: 100,000
unique names in all. Its RSS (the server and its telemetry refresher, summed: the container's
memory is both) is read at start, once 10,000 names were sent (its memory of Node objects is
full: scheduler/extender/bounded.py) and at the end.

Target: RSS at the end within 10 % of RSS after 10,000 names (flat), under the Deployment's
memory limit.

Run: `python benchmarks/bench_extender_names.py`, or `python benchmarks/run_all.py extender_names`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.extender_process import post, running_extender, small_pod  # noqa: E402
from benchmarks.harness.realistic_nodes import realistic_node  # noqa: E402

UNIQUE_NAMES = 100_000
PER_REQUEST = 1_000
FULL_AFTER = 10_000  # names sent when the extender's memory of Node objects is full
FLAT_RATIO = 1.10


def body(start: int) -> bytes:
    nodes = [realistic_node(f"fake-{i}", i) for i in range(start, start + PER_REQUEST)]
    return json.dumps({"Pod": small_pod(f"p{start}"), "Nodes": {"items": nodes}}, separators=(",", ":")).encode()


def measure() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as work, running_extender(Path(work)) as server:
        rss = {"start": server.memory_kib()["VmRSS"] / 1024}
        statuses = set()
        for start in range(0, UNIQUE_NAMES, PER_REQUEST):
            statuses.add(post(server.port, "/prioritize", body(start)).status)
            if start + PER_REQUEST == FULL_AFTER:
                rss["full"] = server.memory_kib()["VmRSS"] / 1024
        rss["end"] = server.memory_kib()["VmRSS"] / 1024
        rss["peak"] = server.memory_kib()["VmHWM"] / 1024
    if statuses != {200}:
        raise RuntimeError(f"answers: {sorted(statuses)}")
    return rss


def main() -> str:
    rss = measure()
    ratio = rss["end"] / rss["full"]
    verdict = "flat" if ratio <= FLAT_RATIO else "GROWS"
    return "\n".join([
        "| RSS (server + refresher) | MiB |",
        "|---|---|",
        f"| at start | {rss['start']:.0f} |",
        f"| after {FULL_AFTER:,} unique names | {rss['full']:.0f} |",
        f"| after {UNIQUE_NAMES:,} unique names | {rss['end']:.0f} ({ratio:.2f}× — {verdict}) |",
        f"| peak (VmHWM, summed) | {rss['peak']:.0f} |",
    ])


if __name__ == "__main__":
    print(main())
