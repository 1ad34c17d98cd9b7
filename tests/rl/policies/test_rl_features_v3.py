"""Feature schema v3 (scheduler/learning/features_v3.py): v2 plus lifetimes, the autoscaler's view and
watts per unit of load — each feature by hand, the one implementation shared by the plugin,
the decision logs and training, and the simulator's side (rl/policies/sim_features.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rl.learning.dqn.episodes import (
    Episode,
    EpisodeDraw,
    RewardConfig,
    build_episode,
    training_cluster,
)
from rl.policies.sim_features import sim_lifetimes
from scheduler.cluster.node_workload import taint_time
from scheduler.domain.model import (
    NodeInfo,
    NodeState,
    NodeTelemetry,
    NodeWorkload,
    PodInfo,
    Resources,
)
from scheduler.framework.batch import CandidateBatch
from scheduler.learning.features import encode
from scheduler.learning.features_v2 import NODE_FEATURES_V2, POD_FEATURES_V2, rows_v2
from scheduler.learning.features_v3 import (
    FEATURE_SCHEMA_V3,
    NODE_FEATURES_V3,
    POD_FEATURES_V3,
    V3Features,
    batch_features_v3,
    pod_features_v3,
    rows_v3,
)
from scheduler.learning.numpy_model import load_numpy_model
from scheduler.learning.plugin import LearnedPlugin
from scheduler.lifetimes import LifetimePredictor
from scheduler.plugins.energy import EnergyPlugin
from tests.helpers.sched_learned import CURVE, write_model

NOW = 1000.0
GIB = 2**30


def node(name, requested_cpu=2000, utilization=0.3, telemetry=True):
    return NodeState(
        info=NodeInfo(name, Resources(8000, 32 * GIB, 110)),
        requested=Resources(requested_cpu, GIB, 2),
        telemetry=NodeTelemetry(
            name, NOW - 2, watts=90.0, source="rapl", utilization=utilization, cores=8,
            curve_points=CURVE,
        ) if telemetry else None,
        pod_count=2,
    )


JOB = PodInfo("ns", "job-7-x", "u", Resources(1000, GIB, 1), owner_kind="Job", owner_name="job-7")
WORKLOAD = NodeWorkload(
    pod_start_times=(900.0,),
    job_pods=1,
    ready_since=100.0,
    pods_end_at=NOW + 500.0,
    autoscaler_known=True,
    deletion_candidate=True,
    unneeded_since=NOW - 120.0,
    last_scale_up=NOW - 300.0,
)


def test_each_v3_feature_by_hand():
    energy = EnergyPlugin()
    batch = CandidateBatch.of([node("a"), node("b", requested_cpu=5000), node("c", telemetry=False)], NOW)
    predictor = LifetimePredictor()
    found = batch_features_v3(JOB, batch, energy, [WORKLOAD, NodeWorkload(), None], predictor)
    a, b, c = found
    assert list(a) == list(NODE_FEATURES_V3 + POD_FEATURES_V3)
    assert a["lifetimes_known"] == 1.0 and a["predicted_seconds_until_pods_end"] == 500.0
    assert a["below_scale_down_threshold"] == 1.0  # max(2/8, 1/32) = 0.25 <= 0.5
    assert (a["autoscaler_known"], a["deletion_candidate"], a["unneeded_seconds"]) == (1, 1, 120)
    assert a["seconds_since_scale_up"] == 300.0
    assert a["full_load_watts_per_core"] == CURVE[-1] / 8  # 150 W at full load, 8 cores
    assert a["watts_per_busy_core"] == pytest.approx(90.0 / (0.3 * 8))
    # b: 5/8 requested, a workload that says nothing of lifetimes or the autoscaler
    assert b["below_scale_down_threshold"] == 0.0
    assert (b["lifetimes_known"], b["predicted_seconds_until_pods_end"]) == (0.0, None)
    assert (b["autoscaler_known"], b["deletion_candidate"], b["unneeded_seconds"]) == (0, None, None)
    assert b["seconds_since_scale_up"] is None
    # c: no workload, no telemetry: unknown, never guessed
    assert c["workload_known"] == 0.0 and c["lifetimes_known"] == 0.0
    assert c["watts_per_busy_core"] is None and c["deletion_candidate"] is None
    # the pod: a Job without history → the Job prior (30 min at age 0), from no history
    assert a["predicted_lifetime_seconds"] == 1800.0 and a["lifetime_from_history"] == 0.0
    # a node not marked unneeded: 0 s; a node at 0.5 % utilization: no watts per busy core
    calm = NodeWorkload(autoscaler_known=True, pods_end_at=NOW - 5)
    idle = CandidateBatch.of([node("a", utilization=0.005)], NOW)
    [d] = batch_features_v3(JOB, idle, energy, [calm], None)
    assert (d["deletion_candidate"], d["unneeded_seconds"]) == (0.0, 0.0)
    assert d["predicted_seconds_until_pods_end"] == 0.0  # predicted to have ended: 0, not < 0
    assert d["watts_per_busy_core"] is None and d["predicted_lifetime_seconds"] is None


def test_the_pods_lifetime_comes_from_its_workloads_history():
    predictor = LifetimePredictor()
    for lifetime in (600.0, 700.0, 800.0, 900.0, 1000.0, 1100.0):
        assert predictor.observe_end(JOB, lifetime)
    f = pod_features_v3(JOB, predictor)
    assert f["lifetime_from_history"] == 1.0
    assert f["predicted_lifetime_seconds"] == predictor.predict_remaining(JOB, 0.0) < 1800.0
    assert pod_features_v3(JOB, None)["predicted_lifetime_seconds"] is None


def test_one_implementation_rows_and_decision_log_agree_and_extend_v2():
    energy = EnergyPlugin()
    nodes = [node("a"), node("b", requested_cpu=5000), node("c", telemetry=False)]
    workloads = [WORKLOAD, NodeWorkload(), None]
    predictor = LifetimePredictor()
    batch = CandidateBatch.of(nodes, NOW)
    rows = rows_v3(JOB, batch, energy, workloads, predictor)
    assert rows.shape == (3, FEATURE_SCHEMA_V3.width)
    names = NODE_FEATURES_V3 + POD_FEATURES_V3
    logged = batch_features_v3(JOB, batch, energy, workloads, predictor)
    log_features = V3Features(energy, dict(zip("abc", workloads, strict=True)).get, lambda: predictor)
    for k, state in enumerate(nodes):
        assert encode(logged[k], names) == rows[k].tolist()
        assert encode(log_features(JOB, state, NOW), names) == rows[k].tolist()
    # v3 is v2 with columns appended: the v2 part of every row is v2's row, bit for bit
    v2 = rows_v2(JOB, batch, energy, workloads)
    width = len(NODE_FEATURES_V2)
    np.testing.assert_array_equal(rows[:, :width], v2[:, :width])
    pod_start = len(NODE_FEATURES_V3)
    np.testing.assert_array_equal(rows[:, pod_start : pod_start + len(POD_FEATURES_V2)], v2[:, width:])


def test_a_v3_model_scores_each_node_on_its_own_row(tmp_path):
    path = write_model(tmp_path / "v3.npz", schema=FEATURE_SCHEMA_V3, width=FEATURE_SCHEMA_V3.width)
    assert load_numpy_model(path).schema == FEATURE_SCHEMA_V3
    workloads = {"a": WORKLOAD, "b": NodeWorkload()}
    predictor = LifetimePredictor()
    plugin = LearnedPlugin(path, workloads=lambda: workloads, lifetimes=lambda: predictor)
    nodes = [node("a"), node("b", requested_cpu=5000), node("c")]
    together = plugin.score(JOB, CandidateBatch.of(nodes, NOW))
    alone = [plugin.score(JOB, CandidateBatch.of([n], NOW))[0] for n in nodes]
    assert together.tolist() == alone
    expected = LearnedPlugin(path).model.scores(
        rows_v3(JOB, CandidateBatch.of(nodes, NOW), EnergyPlugin(), workloads, predictor)
    )
    assert together.tolist() == expected.tolist()


def test_the_autoscalertaint_time():
    assert taint_time("1700000000", 1700000100.0) == 1700000000.0
    assert taint_time(" 1700000000 ", 1700000100.0) == 1700000000.0
    assert taint_time("", 50.0) == 50.0 and taint_time("soon", 50.0) == 50.0
    assert taint_time("1700009999", 1700000100.0) == 1700000100.0  # a clock ahead: now


def test_the_simulator_supplies_marks_and_learns_lifetimes_from_finished_pods():
    draw = EpisodeDraw(size=6, family="bursts", load=0.4, hours=1.0, seed=11)
    nodes, pods = build_episode(draw)
    episode = Episode(nodes, pods, RewardConfig(), training_cluster(), seed=0)
    sim = episode.sim
    own = sim_lifetimes(sim)
    seen_candidate = seen_history = False
    while not episode.done:
        workloads = own.workloads()
        scaler = sim.autoscaler
        assert scaler is not None
        unneeded = scaler.scale_down.unneeded_since
        for n in sim.nodes:
            w = workloads[n.spec.name]
            assert w.autoscaler_known and w.deletion_candidate == (n.spec.name in unneeded)
            assert w.unneeded_since == unneeded.get(n.spec.name)
            assert w.pods_end_at is not None and w.pods_end_at >= sim.now
            if not (n.running or n.pending):
                assert w.pods_end_at == sim.now
        last_up = scaler.scale_down.last_scale_up_s
        assert workloads[nodes[0].name].last_scale_up == (last_up if math.isfinite(last_up) else None)
        seen_candidate |= any(w.deletion_candidate for w in workloads.values())
        assert own.predictor.observed == sum(
            1 for o in sim.completed if sim.pod_info(o.index).owner_kind is not None
        )
        rows = episode.rows()
        history = POD_FEATURES_V3.index("lifetime_from_history") + len(NODE_FEATURES_V3)
        seen_history |= bool(rows[0, history] == 1.0)
        episode.step(0)
    assert seen_candidate and seen_history and own.predictor.observed > 0
