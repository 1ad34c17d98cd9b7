"""Random clusters for the feature-row equality test (tests/rl/policies/test_rl_features_v2.py) and for
the fixture it compares against (tests/fixtures/make_features_rows.py, which captured the rows
of the per-node Python row builder before the rows were vectorized).

`compute(seed)` builds one case and runs every public row builder on it in a fixed order (the
energy plugin learns node histories as it prices them, so the order is part of the case)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from common.curves import PowerCurve
from scheduler.domain.model import (
    NodeInfo,
    NodeState,
    NodeTelemetry,
    NodeWorkload,
    PodInfo,
    Resources,
)
from scheduler.learning.features import candidate_matrix, node_features
from scheduler.learning.features_v2 import V2Features, candidate_matrix_v2
from scheduler.plugins.energy import EnergyPlugin

SEEDS = tuple(range(12))
ROOT = Path(__file__).resolve().parents[2]
# The models shipped before feature schema v3 (6f1a7fc, schema v2), kept as fixtures: the
# scores the fixture captured are theirs, and a v2 model must keep serving bit for bit.
MODELS = tuple(ROOT / "tests" / "fixtures" / "models-v2" / n for n in ("dqn.npz", "mlp.npz"))
FIXTURE = ROOT / "tests" / "fixtures" / "features_rows.json.gz"


def _points(rng: random.Random) -> tuple[float, ...]:
    idle = rng.uniform(20, 150)
    steps = [rng.uniform(0, 30) for _ in range(10)]
    out = [idle]
    for s in steps:
        out.append(out[-1] + s)
    return tuple(round(p, 3) for p in out)


def _curve(rng: random.Random) -> PowerCurve:
    kind = rng.choice(["linear", "fan", "points"])
    if kind == "points":
        return PowerCurve.from_points(_points(rng))
    idle = rng.uniform(20, 150)
    return PowerCurve.from_mapping(
        {"model": kind, "idle_watts": idle, "max_watts": idle + rng.uniform(0, 300)}
    )


def _telemetry(rng: random.Random, name: str, now: float, cores: float) -> NodeTelemetry | None:
    if rng.random() < 0.15:
        return None
    age = rng.choice([0.0, rng.uniform(0, 25), rng.uniform(25, 80), rng.uniform(3000, 9000), -5.0])
    return NodeTelemetry(
        name,
        now - age,
        watts=None if rng.random() < 0.1 else rng.uniform(10, 400),
        source=rng.choice(["rapl", "rapl", "estimated", "none"]),
        utilization=None if rng.random() < 0.1 else rng.choice([0.0, 1.0, rng.random()]),
        cores=rng.choice([cores, cores, cores, None, 0.0, cores / 2]),
        curve_points=_points(rng) if rng.random() < 0.5 else None,
    )


def _workload(rng: random.Random, now: float) -> NodeWorkload | None:
    if rng.random() < 0.3:
        return None
    starts = tuple(now - rng.choice([rng.uniform(0, 500), rng.uniform(0, 2e5), -3.0])
                   for _ in range(rng.choice([0, 0, 1, 2, 5])))
    return NodeWorkload(
        pod_start_times=starts,
        job_pods=rng.randint(0, len(starts)),
        ready_since=None if rng.random() < 0.3 else now - rng.uniform(-10, 2e5),
        in_scale_down_window=rng.random() < 0.3,
    )


def make_case(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    now = 1_700_000_000.0 + rng.uniform(0, 1e5)
    count = rng.randint(1, 40)
    names = [f"n{seed}-{i}" for i in range(count)]
    curves = {n: _curve(rng) for n in names if rng.random() < 0.3}
    scorer = EnergyPlugin(
        delta_p_ref_watts=rng.choice([20.0, 150.0, 400.0]),
        consolidation=rng.random() < 0.5,
        max_staleness_seconds=rng.choice([30.0, 60.0]),
        curves=curves,
        consolidation_utilization=rng.choice([0.5, 0.3]),
    )
    nodes = []
    for name in names:
        cores = float(rng.choice([0, 1, 2, 4, 8, 16, 64]))
        pods = rng.choice([0, 0, 1, 3, 20])
        if rng.random() < 0.3:  # an online history: the energy plugin fits a line to it
            for k in range(rng.randint(1, 6)):
                scorer.observe(
                    NodeTelemetry(name, now - 500 + 30 * k, watts=rng.uniform(40, 300),
                                  source="rapl", utilization=rng.random(), cores=cores)
                )
        nodes.append(
            NodeState(
                info=NodeInfo(
                    name,
                    Resources(int(cores * 1000), rng.choice([0, 2**30, 64 * 2**30]), 110),
                ),
                requested=Resources(
                    rng.randint(0, int(cores * 1200) + 1), rng.randint(0, 2**33), pods
                ),
                telemetry=_telemetry(rng, name, now, cores),
                cpu_since_sample_cores=rng.choice([0.0, 0.0, rng.uniform(0, 4)]),
                pod_count=pods,
                daemon_pod_count=rng.randint(0, pods),
            )
        )
    workloads = {n: w for n in names if (w := _workload(rng, now)) is not None}
    pods_ = [
        PodInfo(
            "ns",
            f"p{k}",
            f"u{k}",
            Resources(rng.choice([0, 100, 500, 2000, 7000]), rng.randint(0, 2**32), 1),
            owner_kind=rng.choice([None, "Job", "ReplicaSet", "StatefulSet", "DaemonSet", "X"]),
            priority=rng.choice([0, 1000, -5, 2_000_000_000]),
        )
        for k in range(3)
    ]
    return {"scorer": scorer, "nodes": nodes, "pods": pods_, "workloads": workloads, "now": now}


def compute(seed: int) -> dict[str, Any]:
    """Every row builder's output on case `seed` (JSON-ready: None stays None)."""
    case = make_case(seed)
    scorer, nodes, now, workloads = case["scorer"], case["nodes"], case["now"], case["workloads"]
    v2 = V2Features(scorer, workloads.get)
    names = list(v2.schema.node_features + v2.schema.pod_features)
    out: dict[str, Any] = {"v2_rows": [], "v1_rows": [], "v2_features": [], "v1_features": []}
    for pod in case["pods"]:
        out["v2_rows"].append(candidate_matrix_v2(pod, nodes, now, scorer, workloads))
        out["v1_rows"].append(candidate_matrix(pod, nodes, now, scorer))
        out["v2_features"].append([[v2(pod, n, now)[k] for k in names] for n in nodes])
        v1 = [node_features(pod, n, now, scorer) for n in nodes]
        out["v1_features"].append([list(f.values()) for f in v1])
    return out


def model_scores(seed: int) -> dict[str, list[list[float]]]:
    """The shipped models' scores of every candidate of case `seed` (LearnedPlugin.score)."""
    from scheduler.framework.batch import CandidateBatch
    from scheduler.learning.plugin import LearnedPlugin

    out: dict[str, list[list[float]]] = {}
    for path in MODELS:
        case = make_case(seed)
        plugin = LearnedPlugin(path, case["scorer"], workloads=lambda c=case: c["workloads"])
        out[path.name] = [
            plugin.score(pod, CandidateBatch.of(case["nodes"], case["now"])).tolist()
            for pod in case["pods"]
        ]
    return out
