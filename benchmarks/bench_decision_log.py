"""Decision log durability: what a decision line costs, and what `kill -9` loses.

* cost per decision — `DecisionLog.write()` of a real decision line (the standalone
  scheduler's: 100 candidates with their 29 features each, ~90 KB), as the caller waits for it (the
  line's `write(2)` to the O_APPEND file) and in CPU of the whole process (the group-fsync
  thread included), with the default group fsync (at most 0.1 s or 64 records after a line),
  with an fsync after every line, and with no fsync at all (kill -9 safe, not power-loss safe);
  on the repository's file system (ext4 here);
* kill -9 — the standalone scheduler against kmock's emulator and the extender in shadow mode,
  each SIGKILLed again and again while it works (benchmarks/harness/crash_runs.py): acknowledged
  decisions (bindings the emulator accepted, answers the client received) without a line.

Target (issue 17): 0 acknowledged decisions lost over 10 kills; the cost measured.

Run: `python benchmarks/bench_decision_log.py [--json] [--kills N] [--records N]`, or
`python benchmarks/run_all.py decision_log` (about a minute on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.crash_runs import extender_kill_run, standalone_kill_run  # noqa: E402
from scheduler.cluster.kubeobjects import pod_info_from_k8s  # noqa: E402
from scheduler.decisionlog.logfile import DecisionLog, DecisionLogConfig  # noqa: E402
from scheduler.decisionlog.schema import CandidateRecord  # noqa: E402
from scheduler.learning.features_v2 import NODE_FEATURES_V2, POD_FEATURES_V2  # noqa: E402

KILLS = 10
RECORDS = 2000
FEATURES = NODE_FEATURES_V2 + POD_FEATURES_V2  # what the standalone scheduler records
MODES = {
    "group fsync (default: ≤ 0.1 s or 64 lines)": {},
    "fsync every line": {"flush_interval_seconds": 0},
    "no fsync (write only)": {"flush_interval_seconds": 3600.0, "batch_records": 10**9},
}


def _candidates(rng: random.Random) -> list[CandidateRecord]:
    return [
        CandidateRecord(
            node=f"node-{i:04d}",
            score=rng.uniform(0, 100),
            delta_watts=rng.uniform(0, 60),
            default_score=rng.randint(0, 200),
            telemetry_age_seconds=rng.uniform(0, 30),
            features={name: rng.random() for name in FEATURES},
        )
        for i in range(100)
    ]


def cost(records: int, workdir: Path) -> list[dict[str, Any]]:
    rng = random.Random(7)
    pod = pod_info_from_k8s({"metadata": {"name": "web", "namespace": "default", "uid": "u"},
                            "spec": {"containers": [{"resources": {"requests": {"cpu": "500m"}}}]}})
    candidates = _candidates(rng)
    results: list[dict[str, Any]] = []
    for name, overrides in MODES.items():
        path = workdir / f"cost-{len(results)}.jsonl"
        decision_log = DecisionLog(DecisionLogConfig(str(path), max_bytes=2**40, **overrides))  # type: ignore[arg-type]
        waits = []
        cpu_started, wall_started = time.process_time(), time.perf_counter()
        for i in range(records):
            started = time.perf_counter()
            decision_log.record_decision(source="standalone", mode="shadow", pod=pod, candidates=candidates,
                                      chosen="node-0001", recommended="node-0002", default_choice="node-0001",
                                      scorer="energy", wall_time=1.0e9 + i)
            waits.append(time.perf_counter() - started)
        decision_log.close()
        cpu, wall = time.process_time() - cpu_started, time.perf_counter() - wall_started
        waits.sort()
        results.append({
            "mode": name,
            "records": records,
            "line_bytes": path.stat().st_size // records,
            "fsyncs": decision_log.batches_written,
            "wait_p50_us": waits[len(waits) // 2] * 1e6,
            "wait_p99_us": waits[int(len(waits) * 0.99)] * 1e6,
            "wait_mean_us": statistics.fmean(waits) * 1e6,
            "cpu_per_record_us": cpu / records * 1e6,
            "wall_per_record_us": wall / records * 1e6,
        })
        path.unlink()
    return results


def run(kills: int = KILLS, records: int = RECORDS) -> dict[str, Any]:
    load = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="bench-decision-log-", dir=ROOT))
    try:
        figures: dict[str, Any] = {"load_average": list(load), "cost": cost(records, workdir)}
        (workdir / "standalone").mkdir()
        (workdir / "extender").mkdir()
        print("kill -9: standalone scheduler …", file=sys.stderr)
        figures["kill_standalone"] = standalone_kill_run(workdir / "standalone", kills).as_json()
        print("kill -9: extender (shadow) …", file=sys.stderr)
        figures["kill_extender"] = extender_kill_run(workdir / "extender", kills).as_json()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    figures["load_average_after"] = list(os.getloadavg())
    return figures


def table(figures: dict[str, Any]) -> str:
    rows = [
        f"| decision line ({figures['cost'][0]['line_bytes'] // 1000} KB) | caller waits p50 / p99 | "
        "CPU per line (whole process) | fsyncs per 1,000 lines |",
        "|---|---|---|---|",
    ]
    for c in figures["cost"]:
        rows.append(
            f"| {c['mode']} | {c['wait_p50_us']:.0f} / {c['wait_p99_us']:.0f} µs | "
            f"{c['cpu_per_record_us']:.0f} µs | {c['fsyncs'] * 1000 / c['records']:.0f} |"
        )
    rows += ["", "| kill -9 | kills | acknowledged | lost | torn lines skipped |", "|---|---|---|---|---|"]
    for key, label in (("kill_standalone", "standalone scheduler (bindings)"),
                       ("kill_extender", "extender, shadow mode (answers)")):
        k = figures[key]
        rows.append(f"| {label} | {k['kills']} | {k['acknowledged']} | {k['lost']} | {k['torn_lines']} |")
    before, after = figures["load_average"], figures["load_average_after"]
    rows += ["", f"Load average {before[0]:.2f} before, {after[0]:.2f} after."]
    return "\n".join(rows)


def main() -> str:
    return table(run())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--kills", type=int, default=KILLS, help="SIGKILLs per process kind")
    parser.add_argument("--records", type=int, default=RECORDS, help="lines per cost mode")
    args = parser.parse_args()
    result = run(args.kills, args.records)
    print(json.dumps(result) if args.json else table(result))
