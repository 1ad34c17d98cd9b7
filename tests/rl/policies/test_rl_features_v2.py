"""Feature schema v2: trace owner/priority columns, trace families, the simulator's node
workloads and the v2 encoding (scheduler/learning/features_v2.py)."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import replace
from statistics import median

import pytest

from common.curves import PowerCurve
from rl.policies.catalog import make_policy
from rl.policies.scheduling_profiles import heuristic_energy
from rl.simulation.engine.simulator import PowerOffModel, Simulation
from rl.simulation.traces.scenario import (
    NodeSpec,
    PodSpec,
    ScenarioError,
    format_trace,
    parse_trace,
)
from rl.simulation.traces.tracegen import FAMILIES, TraceConfig, generate_family, generate_trace
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.learning.features import FEATURE_SCHEMA, Features, SchemaMismatch, column_features
from scheduler.learning.features_v2 import (
    FEATURE_SCHEMA_V2,
    NODE_FEATURES_V2,
    POD_FEATURES_V2,
    NodeWorkload,
    candidate_matrix_v2,
    pod_features_v2,
    workload_columns,
)
from tests.helpers.sim_run import run_policy

HEADER = "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage"


def test_trace_optional_columns_in_any_order_and_round_trip():
    pods = parse_trace(f"{HEADER},priority,owner_kind\n5,10,1,1,1,100,Job\n1,10,1,1,1,,\n")
    assert [(p.owner_kind, p.priority) for p in pods] == [(None, 0), ("Job", 100)]
    assert parse_trace(format_trace(pods)) == pods
    assert format_trace(pods).splitlines()[0] == f"{HEADER},owner_kind,priority"
    plain = parse_trace(f"{HEADER}\n1,10,1,1,1\n")
    assert format_trace(plain).splitlines()[0] == HEADER  # old traces stay byte-identical


@pytest.mark.parametrize(
    "text",
    [
        f"{HEADER},colour\n1,10,1,1,1,red\n",
        f"{HEADER},priority,priority\n1,10,1,1,1,1,1\n",
        f"{HEADER},priority\n1,10,1,1,1,high\n",
        f"{HEADER},owner_kind\n1,10,1,1,1\n",
    ],
)
def test_bad_optional_columns_are_refused(text):
    with pytest.raises(ScenarioError):
        parse_trace(text)


def test_families_are_deterministic_and_have_their_documented_shape():
    config = TraceConfig(hours=12, arrivals_per_hour=120)
    # diurnal: the original model, with owners and workloads drawn on their own stream.
    diurnal = generate_family("diurnal", config, 3)
    assert [replace(p, owner_kind=None, workload=None) for p in diurnal] == generate_trace(config, 3)
    kinds = Counter(p.owner_kind for p in diurnal)
    assert set(kinds) == {"ReplicaSet", "StatefulSet", "Job"}
    assert 0.5 < kinds["ReplicaSet"] / len(diurnal) < 0.7
    for family in FAMILIES:
        assert generate_family(family, config, 7) == generate_family(family, config, 7)
    mixed = generate_family("batch-services", config, 7)
    jobs = [p for p in mixed if p.owner_kind == "Job"]
    services = [p for p in mixed if p.owner_kind == "ReplicaSet"]
    assert {p.priority for p in services} == {1000} and {p.priority for p in jobs} == {0}
    # 30 % services by default; jobs are short and services long.
    assert 0.2 < len(services) / len(mixed) < 0.4
    assert (
        median(p.duration_s for p in jobs) < 1800 < 2 * 3600 <= min(p.duration_s for p in services)
    )
    bursts = generate_family("bursts", config, 7)
    assert {p.owner_kind for p in bursts} == {"Job"}
    # Bursts share a submit second: far fewer distinct times than pods.
    assert len({p.submit_s for p in bursts}) < 0.5 * len(bursts)
    # The rate is the configured one on average (12 h × 120/h, wide bounds for a random draw).
    assert 0.6 * 1440 < len(bursts) < 1.4 * 1440
    with pytest.raises(ValueError):
        generate_family("nope", config, 1)


def test_pod_features_v2_one_hot_owner_and_log_priority():
    def pod(owner, priority):
        return PodSpec(0, 0, 10, 1, 1, 1, owner, priority).pod_info()

    f = pod_features_v2(pod("Job", 0))
    assert (f["owner_job"], f["owner_replicaset"], f["owner_other"]) == (1.0, 0.0, 0.0)
    f = pod_features_v2(pod("CronThing", 999))
    assert f["owner_other"] == 1.0 and f["priority_log10"] == pytest.approx(3.0)
    f = pod_features_v2(pod(None, -9))
    assert sum(f[n] for n in POD_FEATURES_V2 if n.startswith("owner_")) == 0.0
    assert f["priority_log10"] == pytest.approx(-1.0)
    assert pod_features_v2(pod(None, 2_000_000_000))["priority_log10"] == pytest.approx(
        math.log10(2e9 + 1)
    )


def workload_features(workload: NodeWorkload | None, now: float) -> Features:
    return column_features(workload_columns([workload], now))


def test_workload_features_known_and_unknown():
    unknown = workload_features(None, 100.0)
    assert unknown["workload_known"] == 0.0 and unknown["seconds_since_boot"] is None
    w = NodeWorkload(pod_start_times=(10.0, 40.0, 90.0), job_pods=1, ready_since=5.0)
    f = workload_features(w, 100.0)
    assert f["youngest_pod_age_seconds"] == 10.0 and f["oldest_pod_age_seconds"] == 90.0
    assert f["job_pod_share"] == pytest.approx(1 / 3) and f["seconds_since_boot"] == 95.0
    empty = workload_features(NodeWorkload(ready_since=0.0, in_scale_down_window=True), 1e9)
    assert empty["job_pod_share"] is None and empty["in_scale_down_window"] == 1.0
    assert empty["seconds_since_boot"] == 86_400.0  # capped


def test_schema_v2_extends_v1_and_refuses_v1_checkpoints():
    assert FEATURE_SCHEMA_V2.node_features[: len(FEATURE_SCHEMA.node_features)] == (
        FEATURE_SCHEMA.node_features
    )
    with pytest.raises(SchemaMismatch, match="v1"):
        FEATURE_SCHEMA_V2.check(FEATURE_SCHEMA.to_dict())
    FEATURE_SCHEMA_V2.check(FEATURE_SCHEMA_V2.to_dict())


def test_simulator_workloads_give_v2_rows():
    curve = PowerCurve.from_mapping({"idle_watts": 50, "max_watts": 150})
    nodes = [NodeSpec(f"n{i}", "g", 4, 8, curve) for i in range(2)]
    pods = [
        PodSpec(0, 0.0, 100.0, 1, 1, 1, "ReplicaSet", 1000),
        PodSpec(1, 30.0, 100.0, 1, 1, 1, "Job", 0),
    ]
    power_off = PowerOffModel(after_seconds=600)
    sim = Simulation(nodes, pods, power_off)
    sim.place(sim.next_decision().feasible[0].info.name)
    decision = sim.next_decision()
    assert decision is not None and decision.now == 30.0
    workloads = sim.view.workloads()
    assert workloads["n0"].pod_start_times == (0.0,) and workloads["n0"].job_pods == 0
    assert workloads["n1"].in_scale_down_window and not workloads["n0"].in_scale_down_window
    rows = candidate_matrix_v2(
        decision.info,
        sim.view.node_states(),
        decision.now,
        heuristic_energy(nodes, power_off),
        workloads,
    )
    assert len(rows[0]) == FEATURE_SCHEMA_V2.width
    column = dict(zip(NODE_FEATURES_V2 + POD_FEATURES_V2, rows[0], strict=True))
    assert column["youngest_pod_age_seconds"] == 30.0 and column["owner_job"] == 1.0
    result = sim
    while (d := result.next_decision()) is not None:
        result.place(d.feasible[0].info.name)
    assert result.result().never_scheduled == 0
    # The policies are unchanged by the new fields: the heuristic still runs.
    run_policy(
        Simulation(nodes, pods, power_off), make_policy("heuristic", nodes, power_off), random.Random(0)
    )


def test_pod_info_reads_owner_kind_and_priority():
    base = {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []}}
    assert pod_info_from_k8s(base).owner_kind is None
    pod = {
        "metadata": {
            "name": "p",
            "uid": "u",
            "ownerReferences": [
                {"kind": "Workflow", "name": "w"},
                {"kind": "Job", "name": "j", "controller": True},
            ],
        },
        "spec": {"containers": [], "priority": 1000},
    }
    info = pod_info_from_k8s(pod)
    assert (info.owner_kind, info.priority) == ("Job", 1000)
    from scheduler.domain.model import ShapeError

    with pytest.raises(ShapeError, match="priority"):
        pod_info_from_k8s({**pod, "spec": {"containers": [], "priority": "high"}})


def test_trace_command_writes_a_family(tmp_path):
    from rl.cmd.cli import main

    out = tmp_path / "jobs.csv"
    assert (
        main(["trace", "--out", str(out), "--family", "bursts", "--hours", "2", "--seed", "4"]) == 0
    )
    pods = parse_trace(out.read_text())
    assert pods == generate_family("bursts", TraceConfig(hours=2), 4)
    with pytest.raises(SystemExit) as exc:
        main(["trace", "--out", str(out), "--family", "nope"])
    assert exc.value.code == 2


@pytest.fixture(scope="module")
def reference():
    import gzip
    import json

    from tests.helpers.features_cases import FIXTURE

    with gzip.open(FIXTURE, "rt") as f:
        return json.load(f)


@pytest.mark.parametrize("seed", range(12))
def test_vectorized_rows_equal_the_per_node_builder(reference, seed):
    """The rows built from the batch's columns equal, bit for bit, what the per-node Python
    builder gave on random clusters (tests/fixtures/features_rows.json.gz, captured from it by
    tests/fixtures/make_features_rows.py before the rows were vectorized): v1 and v2 model rows,
    the decision logs' feature dicts (None where unknown) and the shipped models' scores — where
    telemetry is fresh; elsewhere the learned plugin now scores 0 where it gave 50."""
    import numpy as np

    from scheduler.learning.plugin import UNMEASURED_SCORE
    from tests.helpers.features_cases import SEEDS, compute, model_scores

    assert seed in SEEDS
    want = reference[str(seed)]
    got = compute(seed)
    for key in ("v2_rows", "v1_rows"):
        assert [np.asarray(rows, dtype=float).tolist() for rows in got[key]] == want[key], key
    assert got["v2_features"] == want["v2_features"]
    assert got["v1_features"] == want["v1_features"]
    fresh = NODE_FEATURES_V2.index("telemetry_fresh")
    for model, scores in model_scores(seed).items():
        for pod_scores, rows, old in zip(scores, want["v2_rows"], want["scores"][model], strict=True):
            expected = [s if row[fresh] else UNMEASURED_SCORE for s, row in zip(old, rows, strict=True)]
            assert pod_scores == expected, model
