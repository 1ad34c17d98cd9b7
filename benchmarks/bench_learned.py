"""`make bench` for the `learned` Score plugin: what one pod's scoring costs at 1,000 and 5,000
candidate nodes, beside the heuristic's energy plugin on the same batch.

    python benchmarks/bench_learned.py [--model models/dqn.npz] [--repeats 30] [--json]

Measured per call, as the extender or the standalone scheduler would call it for one pod:

* `learned plugin`: `LearnedPlugin.score(pod, batch)` — feature schema v2 rows of every candidate
  built from the batch's columns (the v1 part with the plugin's energy plugin, the node
  workloads), then one batched numpy pass; it includes the energy plugin's evaluation, which a
  profile that also scores with `KubejouleEnergy` shares (same plugin, same batch);
* `forward pass only`: `NumpyModel.scores(rows)` on the rows computed once;
* `energy plugin (heuristic)`: `EnergyPlugin.score(pod, batch)` on the same batch, the scorer the
  extender serves — its figure here is the scoring part of the extender's /prioritize p99.

Each plugin is timed on three kinds of batch:

* `next pod`: the batch the previous pod was scored on, at a new time (`batch.at(now)`): the
  standalone scheduler's steady state, where derived columns are kept and patched;
* `new batch`: a new CandidateBatch of the same NodeStates (per-node values cached per state);
* `after refresh`: every node's telemetry re-sampled (new NodeStates): the first pod after a
  telemetry refresh, where every pod-independent column is recomputed;
* `after refresh, staged`: the same, with the pod-independent columns computed beforehand as
  the standalone scheduler's stager does off the decision path (`scheduler/standalone/staging.py`)
  — what the first pod after a refresh costs in the scheduler.

Wall-clock p50/p99/max and the calling thread's CPU time (p50): on a shared machine the wall
clock includes waiting for a core, the CPU time does not.

The model: `--model` (default `models/dqn.npz` when it exists), else a network of the trained
shape (2 hidden layers of 64) with random weights — the cost does not depend on the weights.
Nodes carry fresh telemetry with a SPECpower-style 11-point curve and a workload of a few pods.
Times are wall-clock on a shared machine: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.machine import cpu_model  # noqa: E402
from scheduler.domain.model import (  # noqa: E402
    NodeInfo,
    NodeState,
    NodeTelemetry,
    NodeWorkload,  # noqa: E402
    PodInfo,
    Resources,
)
from scheduler.framework.batch import CandidateBatch  # noqa: E402
from scheduler.learning.features_v2 import FEATURE_SCHEMA_V2  # noqa: E402
from scheduler.learning.numpy_model import save_numpy_model  # noqa: E402
from scheduler.learning.plugin import LearnedPlugin  # noqa: E402
from scheduler.plugins.energy import EnergyPlugin  # noqa: E402

SIZES = (1000, 5000)
DEFAULT_MODEL = ROOT / "models" / "dqn.npz"
CURVE = (58.0, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222)
NOW = 1_000_000.0


def _random_model(path: Path) -> Path:
    rng = np.random.default_rng(0)
    width, hidden = FEATURE_SCHEMA_V2.width, 64
    layers = [
        (rng.normal(size=(hidden, width)) / width**0.5, rng.normal(size=hidden)),
        (rng.normal(size=(hidden, hidden)) / hidden**0.5, rng.normal(size=hidden)),
        (rng.normal(size=(1, hidden)) / hidden**0.5, rng.normal(size=1)),
    ]
    meta = {
        "kind": "dqn",
        "feature_schema": FEATURE_SCHEMA_V2.to_dict(),
        "score_map": {"center": 0.0, "spread": 1.0, "sign": 1.0},
    }
    save_numpy_model(path, layers, np.zeros(width), np.ones(width), meta)
    return path


def _cluster(size: int) -> tuple[list[NodeState], dict[str, NodeWorkload]]:
    rng = np.random.default_rng(size)
    states, workloads = [], {}
    for i in range(size):
        name = f"node-{i:05d}"
        cores = int(rng.choice([8, 16, 32]))
        used = float(rng.uniform(0.0, 0.8))
        pods = int(rng.integers(0, 20))
        states.append(
            NodeState(
                info=NodeInfo(name, Resources(cores * 1000, cores * 4 * 2**30, 110)),
                requested=Resources(int(used * cores * 900), 2**32, pods),
                telemetry=NodeTelemetry(
                    name,
                    NOW - float(rng.uniform(0, 10)),
                    watts=CURVE[0] + used * (CURVE[-1] - CURVE[0]),
                    source="rapl",
                    utilization=used,
                    cores=cores,
                    curve_points=CURVE,
                ),
                pod_count=pods,
            )
        )
        starts = tuple(NOW - float(s) for s in rng.uniform(10, 86400, size=pods))
        workloads[name] = NodeWorkload(
            pod_start_times=starts,
            job_pods=int(rng.integers(0, pods + 1)),
            ready_since=NOW - 7 * 86400,
            in_scale_down_window=False,
        )
    return states, workloads


def _refreshed(states: list[NodeState], k: int) -> list[NodeState]:
    """Every node's telemetry re-sampled (new NodeStates), made before its timed call."""
    made = []
    for s in states:
        assert s.telemetry is not None
        made.append(replace(s, telemetry=replace(s.telemetry, sample_time=NOW + 0.001 * k)))
    return made


WARM_UP = PodInfo("", "warm-up", "", Resources(100, 128 * 2**20, 1))


def _staged(plugin: object, states: list[NodeState]) -> CandidateBatch:
    """A new batch of refreshed states with the plugin's per-node columns computed, as the
    standalone scheduler's stager computes them off the decision path (by scoring a pod)."""
    batch = CandidateBatch.of(states, NOW)
    plugin.score(WARM_UP, batch)  # type: ignore[attr-defined]
    return batch


def _times(call, repeats: int, prepare=None) -> dict[str, float]:
    """`call(prepare(k))` timed `repeats` times (`prepare`, untimed: its argument, if any)."""
    call(prepare(0) if prepare else None)  # warm: imports, caches, the first batch's columns
    samples, cpu = [], []
    for k in range(repeats):
        arg = prepare(k + 1) if prepare else None
        started, started_cpu = time.perf_counter(), time.thread_time()
        call(arg)
        samples.append((time.perf_counter() - started) * 1000.0)
        cpu.append((time.thread_time() - started_cpu) * 1000.0)
    a = np.asarray(samples)
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a.max()),
        "cpu_p50_ms": float(np.percentile(cpu, 50)),  # this thread's CPU: what waiting for a
        "cpu_p99_ms": float(np.percentile(cpu, 99)),  # core on a shared machine does not inflate
    }


def measure(model: Path, repeats: int) -> dict[str, object]:
    pod = PodInfo("default", "p", "u", Resources(500, 2**29, 1), owner_kind="ReplicaSet")
    results: dict[str, object] = {
        "model": str(model),
        "repeats": repeats,
        "load_average": os.getloadavg()[0],
        "sizes": {},
    }
    for size in SIZES:
        states, workloads = _cluster(size)

        def known(w: dict[str, NodeWorkload] = workloads) -> dict[str, NodeWorkload]:
            return w

        learned = LearnedPlugin(model, EnergyPlugin(), workloads=known)
        energy = EnergyPlugin()
        for state in states:
            assert state.telemetry is not None
            energy.observe(state.telemetry)
        rows = learned.rows(pod, CandidateBatch.of(states, NOW))

        def forward(_: object, rows: np.ndarray = rows, learned: LearnedPlugin = learned) -> None:
            learned.model.scores(rows)

        timed: dict[str, dict[str, float]] = {}
        for what, plugin in (("learned plugin", learned), ("energy plugin (heuristic)", energy)):
            kept = CandidateBatch.of(states, NOW)
            plugin.score(pod, kept)
            timed[f"{what}, next pod"] = _times(
                lambda _, p=plugin, b=kept: p.score(pod, b.at(NOW)), repeats
            )
            timed[f"{what}, new batch"] = _times(
                lambda _, p=plugin, s=states: p.score(pod, CandidateBatch.of(s, NOW)), repeats
            )
            timed[f"{what}, after refresh"] = _times(
                lambda fresh, p=plugin: p.score(pod, CandidateBatch.of(fresh, NOW)),
                repeats,
                lambda k, s=states: _refreshed(s, k),
            )
            timed[f"{what}, after refresh, staged"] = _times(
                lambda staged, p=plugin: p.score(pod, staged),
                repeats,
                lambda k, s=states, p=plugin: _staged(p, _refreshed(s, k)),
            )
        timed["forward pass only"] = _times(forward, repeats)
        results["sizes"][str(size)] = timed  # type: ignore[index]
    results["load_average_after"] = os.getloadavg()[0]
    results["cpu_model"] = cpu_model()
    return results


# Issue 25: the learned plugin after a refresh within the extender's NodeNames p99 targets.
TARGET_P99_MS = {1000: 10.0, 5000: 50.0}


def _verdict(what: str, size: int, t: dict[str, float]) -> str:
    """met / MISSED (wall-clock p99) for the learned plugin's rows after a refresh (the staged
    one is what the standalone scheduler's first pod after a refresh pays), and whether the
    thread's CPU time alone would meet it: a miss on the wall clock only is waiting for a core."""
    target = TARGET_P99_MS.get(size)
    if target is None or not what.startswith("learned plugin, after refresh"):
        return ""
    if t["p99_ms"] <= target:
        return f"≤ {target:.0f} ms: met"
    cpu = "met" if t["cpu_p99_ms"] <= target else "missed"
    return f"≤ {target:.0f} ms: **MISSED** ({t['p99_ms']:.1f} ms; CPU p99 {t['cpu_p99_ms']:.1f} ms: {cpu})"


def table(results: dict[str, object]) -> str:
    lines = [
        f"Model `{results['model']}`, {results['repeats']} calls per row, {os.cpu_count()} CPUs "
        f"({results.get('cpu_model', 'unknown')}), load average (1 min) "
        f"{results['load_average']:.2f} → {results['load_average_after']:.2f}.",
        "",
        "| candidates | what | p50 | p99 | max | CPU p50 / p99 | target p99 (NodeNames) |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for size, rows in results["sizes"].items():  # type: ignore[attr-defined]
        for what, t in rows.items():
            lines.append(
                f"| {int(size):,} | {what} | {t['p50_ms']:.2f} ms | {t['p99_ms']:.2f} ms "
                f"| {t['max_ms']:.2f} ms | {t['cpu_p50_ms']:.2f} / {t['cpu_p99_ms']:.2f} ms | {_verdict(what, int(size), t)} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a .npz model (default models/dqn.npz, else random)")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per row (30)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv if argv is not None else [])
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(args.model) if args.model else DEFAULT_MODEL
        if not args.model and not model.exists():
            model = _random_model(Path(tmp) / "random.npz")
        results = measure(model, max(1, args.repeats))
    return json.dumps(results, indent=2) if args.json else table(results)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
