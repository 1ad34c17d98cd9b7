"""Serving a learned model with numpy (scheduler/learning/numpy_model.py) and as the `learned` Score plugin:
batched scores that depend only on the node and the pod, neutral 50 without fresh telemetry,
schema mismatch refused, and no torch anywhere in the scheduler."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources
from scheduler.framework.batch import CandidateBatch
from scheduler.learning.features import FEATURE_SCHEMA
from scheduler.learning.features_v2 import FEATURE_SCHEMA_V2
from scheduler.learning.numpy_model import (
    ModelError,
    ScoreMap,
    load_numpy_model,
    mlp_forward,
    save_numpy_model,
)
from scheduler.learning.plugin import UNMEASURED_SCORE, LearnedPlugin, from_args
from scheduler.plugins.energy import EnergyPlugin

WIDTH = FEATURE_SCHEMA_V2.width
CURVE = (50.0, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150)


def write_model(path, schema=FEATURE_SCHEMA_V2, kind="dqn", width=WIDTH, seed=0):
    rng = np.random.default_rng(seed)
    layers = [
        (rng.normal(size=(8, width)), rng.normal(size=8)),
        (rng.normal(size=(1, 8)), rng.normal(size=1)),
    ]
    meta = {
        "kind": kind,
        "feature_schema": schema.to_dict(),
        "score_map": {"center": 0.0, "spread": 2.0, "sign": 1.0},
    }
    save_numpy_model(path, layers, np.zeros(width), np.full(width, 10.0), meta)
    return path


def node(name, cores=8, utilization=0.3, requested_cpu=2000, sample_time=100.0, pods=2):
    return NodeState(
        info=NodeInfo(name, Resources(cores * 1000, 32 * 2**30, 110)),
        requested=Resources(requested_cpu, 2**30, pods),
        telemetry=NodeTelemetry(
            name,
            sample_time,
            watts=90.0,
            source="rapl",
            utilization=utilization,
            cores=cores,
            curve_points=CURVE,
        ),
        pod_count=pods,
    )


POD = PodInfo("ns", "p", "u", Resources(500, 2**29, 1), owner_kind="Job")
NODES = [
    node("a"),
    node("b", cores=16, utilization=0.7),
    node("c", utilization=0.0, pods=0),
    node("d", cores=4, requested_cpu=3000),
]


def test_mlp_forward_is_affine_relu_affine():
    layers = [
        (np.array([[1.0, -1.0], [2.0, 0.0]]), np.array([0.0, -1.0])),
        (np.array([[1.0, 1.0]]), np.array([0.5])),
    ]
    # x = (3, 1): hidden = relu((2, 5)) = (2, 5); out = 7.5.  x = (0, 2): relu((-2, -1)) = 0 → 0.5
    assert mlp_forward(layers, np.array([[3.0, 1.0], [0.0, 2.0]])).tolist() == [7.5, 0.5]


def test_score_map_is_fixed_and_monotone():
    assert ScoreMap(1.0, 2.0, 1.0)(np.array([1.0]))[0] == 50.0
    up = ScoreMap(0.0, 1.0, 1.0)(np.array([-3.0, 0.0, 3.0]))
    down = ScoreMap(0.0, 1.0, -1.0)(np.array([-3.0, 0.0, 3.0]))
    assert up[0] < up[1] < up[2] and down[0] > down[1] > down[2]
    extreme = ScoreMap(0, 1e-9, 1)(np.array([-1e9, 1e9]))
    assert extreme.tolist() == pytest.approx([0.0, 100.0])


def by_name(plugin: LearnedPlugin, nodes: list[NodeState], now: float = 105.0) -> dict[str, float]:
    batch = CandidateBatch.of(nodes, now)
    return dict(zip(batch.names, plugin.score(POD, batch).tolist(), strict=True))


def test_a_node_scores_the_same_whatever_the_other_candidates(tmp_path):
    plugin = LearnedPlugin(load_numpy_model(write_model(tmp_path / "m.npz")), EnergyPlugin())
    together = by_name(plugin, NODES)
    assert len(set(together.values())) == 4  # the model tells the nodes apart
    for i, state in enumerate(NODES):
        assert by_name(plugin, [state])[state.info.name] == together[state.info.name]
        reordered = NODES[i:] + NODES[:i]
        assert by_name(plugin, reordered[::-1]) == together


def test_stale_or_missing_telemetry_scores_zero(tmp_path):
    plugin = LearnedPlugin(load_numpy_model(write_model(tmp_path / "m.npz")), EnergyPlugin())
    stale = node("stale", sample_time=0.0)
    missing = NodeState(info=NodeInfo("missing", Resources(8000, 2**34, 110)))
    batch = CandidateBatch.of([NODES[0], stale, missing], 105.0)
    scores, fresh = plugin.score_rows(plugin.rows(POD, batch))
    assert scores[1:].tolist() == [UNMEASURED_SCORE] * 2 and fresh.tolist() == [True, False, False]
    assert UNMEASURED_SCORE == 0.0
    assert scores[0] > 0 and plugin.score(POD, batch).tolist() == scores.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_a_measured_twin_is_never_below_its_unmeasured_twin(tmp_path, seed):
    """Missing data never wins (issue 17 item 5): whatever the model and the pod, a node
    without fresh telemetry (none, stale, or no utilization) scores at most what its measured
    twin scores, alone or among other candidates."""
    rng = np.random.default_rng(seed)
    path = write_model(tmp_path / "m.npz", seed=seed, kind="mlp" if seed % 2 else "dqn")
    plugin = LearnedPlugin(path)
    for _ in range(5):
        cores = int(rng.choice([2, 8, 32]))
        u = float(rng.uniform(0, 1))
        measured = node("twin", cores=cores, utilization=u, sample_time=104.0)
        assert measured.telemetry is not None
        unmeasured = [
            NodeState(info=measured.info, requested=measured.requested, pod_count=2),
            node("twin", cores=cores, utilization=u, sample_time=104.0 - 3600),
            NodeState(
                info=measured.info,
                requested=measured.requested,
                telemetry=NodeTelemetry("twin", 104.0, watts=90.0, source="rapl", cores=cores),
                pod_count=2,
            ),
        ]
        pod = PodInfo("ns", "p", "u", Resources(int(rng.integers(0, 8000)), 2**29, 1))
        (best,) = plugin.score(pod, CandidateBatch.of([measured], 105.0)).tolist()
        for other in unmeasured:
            (score,) = plugin.score(pod, CandidateBatch.of([other], 105.0)).tolist()
            assert score == UNMEASURED_SCORE <= best
            together = plugin.score(pod, CandidateBatch.of([other, *NODES, measured], 105.0))
            assert together[0] == score and together[-1] == best


def test_the_plugin_scores_a_batch_as_one_node_at_a_time(tmp_path):
    path = write_model(tmp_path / "m.npz")
    plugin = LearnedPlugin(path)
    scores = plugin.score(POD, CandidateBatch.of(NODES, 105.0))
    expected = [plugin.score(POD, CandidateBatch.of([n], 105.0))[0] for n in NODES]
    assert scores.tolist() == expected and all(0 <= s <= 100 for s in expected)
    assert plugin.score(POD, CandidateBatch.of([], 105.0)).shape == (0,)
    assert from_args({"model": str(path)}).model.kind == "dqn"
    with pytest.raises(ValueError, match="model: PATH"):
        from_args({"model": str(path), "extra": 1})
    # A .pt path serves the .npz exported beside it.
    assert LearnedPlugin(tmp_path / "m.pt").model.kind == "dqn"


def test_a_model_for_another_schema_is_refused_with_a_clear_message(tmp_path):
    v1 = write_model(tmp_path / "v1.npz", schema=FEATURE_SCHEMA, width=FEATURE_SCHEMA.width)
    with pytest.raises(
        ModelError, match=r"kubejoule.features/v1.*expected one of .*kubejoule.features/v3.*kubejoule.features/v2.*retrain"
    ):
        load_numpy_model(v1)
    with pytest.raises(ModelError, match="'gbm' model"):
        load_numpy_model(write_model(tmp_path / "k.npz", kind="gbm"))
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelError, match="cannot read"):
        load_numpy_model(tmp_path / "junk.npz")
    with pytest.raises(ModelError, match="cannot read"):
        load_numpy_model(tmp_path / "absent.npz")


def test_metadata_round_trips(tmp_path):
    model = load_numpy_model(write_model(tmp_path / "m.npz"))
    assert model.meta["feature_schema"] == FEATURE_SCHEMA_V2.to_dict()
    json.dumps(dict(model.meta))


def test_the_scheduler_serves_models_without_torch():
    code = (
        "import sys, scheduler.learning.numpy_model, scheduler.learning.plugin, scheduler.learning.features_v2; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_cluster_cache_gives_v2_workloads():
    from scheduler.cluster.cache import ClusterCache
    from scheduler.cluster.node_workload import SCALE_DOWN_CANDIDATE_TAINT

    cache = ClusterCache("kubejoule-scheduler", lambda: 1000.0)
    cache.replace_nodes(
        [
            {
                "metadata": {"name": "n1"},
                "status": {
                    "allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"},
                    "conditions": [
                        {
                            "type": "MemoryPressure",
                            "status": "False",
                            "lastTransitionTime": "2023-12-31T00:00:00Z",
                        },
                        {
                            "type": "Ready",
                            "status": "True",
                            "lastTransitionTime": "2024-01-01T00:00:05Z",
                        },
                    ],
                },
            },
            {
                "metadata": {"name": "n2"},
                "spec": {
                    "taints": [{"key": SCALE_DOWN_CANDIDATE_TAINT, "effect": "PreferNoSchedule"}]
                },
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}},
            },
        ]
    )

    def pod(name, node, kind, created):
        return {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": name,
                "creationTimestamp": created,
                "ownerReferences": [{"kind": kind, "name": "o", "controller": True}],
            },
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        }

    cache.replace_pods(
        [
            pod("job", "n1", "Job", "2024-01-01T00:00:10Z"),
            pod("web", "n1", "ReplicaSet", "2024-01-01T00:00:40Z"),
            pod("agent", "n1", "DaemonSet", "2024-01-01T00:00:00Z"),
            pod("agent2", "n2", "DaemonSet", "2024-01-01T00:00:00Z"),
        ]
    )
    busy, idle = cache.workload("n1"), cache.workload("n2")
    assert sorted(busy.pod_start_times) == [1704067210.0, 1704067240.0]  # DaemonSet pod left out
    assert busy.job_pods == 1 and not busy.in_scale_down_window
    assert idle.pod_start_times == () and idle.in_scale_down_window
    # Ready since its Ready condition's last transition; n2 has no conditions: unknown.
    assert busy.ready_since == 1704067205.0 and idle.ready_since is None
    from scheduler.learning.features_v2 import V2Features

    features = V2Features(EnergyPlugin(), cache.workload)(POD, NODES[0], 1704067250.0)
    assert features["owner_job"] == 1.0 and features["workload_known"] == 1.0
    on_n1 = V2Features(EnergyPlugin(), cache.workload)(POD, node("n1"), 1704067250.0)
    assert on_n1["seconds_since_boot"] == 45.0 and features["seconds_since_boot"] is None


def test_the_default_scorer_is_learned_only_if_the_gate_promoted_the_model():
    """What ships — the scheduler's defaults, the deployed ConfigMap, the example configuration —
    scores with the heuristic (the energy plugin), unless models/<x>-gate.json says `promote` for
    the model it names."""
    import re
    from pathlib import Path

    import yaml

    from rl.evaluation.gate_run import DEFAULT_BASELINES
    from scheduler.config.build import build_energy_plugin, build_profile
    from scheduler.config.parse import Config, config_from_dict
    from scheduler.plugins.energy import EnergyPlugin

    root = Path(__file__).resolve().parents[2]
    gates = {
        p.name.removesuffix("-gate.json"): json.loads(p.read_text())
        for p in (root / "models").glob("*-gate.json")
    }
    assert {"dqn", "mlp"} <= set(gates)  # the shipped models were gated
    for name, gate in gates.items():
        assert gate["verdict"] in ("promote", "refuse")
        assert gate["candidate"].endswith(f"models/{name}.npz"), gate["candidate"]  # this model
        # against the shipped default profile and bin packing, and promoted only past both
        assert set(DEFAULT_BASELINES) <= set(gate["baselines"]), gate["baselines"]
        assert (gate["verdict"] == "promote") == (not gate["reasons"]), gate["reasons"]
        assert (gate["verdict"] == "promote") == all(
            c["verdict"] == "promote" for c in gate["comparisons"]
        )
    promoted = {name for name, gate in gates.items() if gate["verdict"] == "promote"}

    configmap = yaml.safe_load((root / "daemonset/base/scheduler-configmap.yaml").read_text())
    shipped = {
        "defaults": None,
        "daemonset/base/scheduler-configmap.yaml": yaml.safe_load(
            configmap["data"]["scheduler.yaml"]
        ),
        "scheduler/examples/extender-config.yaml": yaml.safe_load(
            (root / "scheduler/examples/extender-config.yaml").read_text()
        ),
    }
    for where, data in shipped.items():
        config = Config() if data is None else config_from_dict(data)
        named = set(re.findall(r"models/([\w.-]+?)\.(?:npz|pt)", json.dumps(data)))
        assert named <= promoted, (where, named, promoted)
        if named:
            continue
        # No promoted model named: the heuristic scores, in the extender and the standalone.
        assert config.scorer.name == "heuristic", where
        assert isinstance(build_energy_plugin(config), EnergyPlugin), where
        plugins = [
            plugin for plugin, _ in build_profile(config, build_energy_plugin(config)).scores
        ]
        assert not [p for p in plugins if isinstance(p, LearnedPlugin)], where
        assert any(isinstance(p, EnergyPlugin) for p in plugins), where


def test_a_configured_profile_serves_the_learned_plugin(tmp_path):
    from scheduler.config.build import build_energy_plugin, build_profile
    from scheduler.config.parse import ConfigError, config_from_dict

    path = write_model(tmp_path / "m.npz")
    config = config_from_dict(
        {"profile": [{"name": "learned", "args": {"model": str(path)}, "weight": 2}]}
    )
    profile = build_profile(config, build_energy_plugin(config))
    ((plugin, weight),) = profile.scores
    assert isinstance(plugin, LearnedPlugin) and weight == 2
    batch = CandidateBatch.of(NODES, 105.0)
    expected = LearnedPlugin(path).score(POD, batch).tolist()
    assert plugin.score(POD, batch).tolist() == expected
    with pytest.raises((ConfigError, ValueError), match="model"):
        bad = config_from_dict({"profile": [{"name": "learned", "args": {"path": str(path)}}]})
        build_profile(bad, build_energy_plugin(bad))
    v1 = write_model(tmp_path / "v1.npz", schema=FEATURE_SCHEMA, width=FEATURE_SCHEMA.width)
    with pytest.raises((ConfigError, ModelError), match="feature schema"):
        other = config_from_dict({"profile": [{"name": "learned", "args": {"model": str(v1)}}]})
        build_profile(other, build_energy_plugin(other))


def test_the_configured_plugin_computes_features_as_training_did(tmp_path):
    """The registry's `learned` entry scores with the scheduler's configured energy plugin (the
    profile's KubejouleEnergy: consolidation, ΔP_ref) and the cluster cache's node workloads,
    not a default scorer with every workload unknown."""
    from scheduler.config.build import build_energy_plugin, build_profile
    from scheduler.config.parse import config_from_dict
    from scheduler.domain.model import NodeWorkload
    from scheduler.learning.features_v2 import NODE_FEATURES_V2, rows_v2

    path = write_model(tmp_path / "m.npz")
    config = config_from_dict(
        {
            "scorer": {"delta_p_ref_watts": 222.0, "consolidation": True},
            "profile": [
                {"name": "KubejouleEnergy"},
                {"name": "learned", "args": {"model": str(path)}},
            ],
        }
    )
    energy = build_energy_plugin(config)
    known = {"a": NodeWorkload(pod_start_times=(50.0, 90.0), job_pods=1, ready_since=0.0)}
    profile = build_profile(config, energy, known.get)
    (first, _), (plugin, _) = profile.scores
    assert first is energy and isinstance(plugin, LearnedPlugin)
    assert plugin.energy is energy
    batch = CandidateBatch.of(NODES, 105.0)
    rows = plugin.rows(POD, batch)
    column = {name: rows[:, k] for k, name in enumerate(NODE_FEATURES_V2)}
    assert column["workload_known"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert column["youngest_pod_age_seconds"][0] == 15.0
    # ΔP is the configured plugin's (consolidation on), which differs from a default plugin's.
    assert column["delta_watts"].tolist() == energy.evaluate(POD, batch).delta_watts.tolist()
    default = rows_v2(POD, batch, EnergyPlugin(), known)
    assert default[:, NODE_FEATURES_V2.index("delta_watts")].tolist() != column["delta_watts"].tolist()
    scores = plugin.score(POD, batch)
    expected = LearnedPlugin(load_numpy_model(path), energy, workloads=lambda: known)
    assert scores.tolist() == expected.score(POD, CandidateBatch.of(NODES, 105.0)).tolist()


def test_the_plugin_on_a_kept_batch_scores_as_on_a_new_one(tmp_path):
    """The standalone scheduler keeps one batch and patches the rows a placement changes: the
    cached per-node columns follow (the rows equal a new batch's)."""
    from dataclasses import replace

    plugin = LearnedPlugin(write_model(tmp_path / "m.npz"))
    kept = CandidateBatch.of(NODES, 105.0)
    plugin.score(POD, kept)
    placed = replace(
        NODES[2], requested=Resources(2500, 2**30, 1), pod_count=1, cpu_since_sample_cores=0.5
    )
    kept.update([2], [placed])
    now = [*NODES[:2], placed, NODES[3]]
    later = kept.at(110.0)
    assert plugin.score(POD, later).tolist() == plugin.score(POD, CandidateBatch.of(now, 110.0)).tolist()
    assert (plugin.rows(POD, later) == plugin.rows(POD, CandidateBatch.of(now, 110.0))).all()
    sub = later.take([3, 2])
    assert plugin.score(POD, sub).tolist() == plugin.score(POD, later).tolist()[::-1][:2]


def test_the_cluster_cache_workloads_are_read_again_only_for_changed_nodes(tmp_path):
    from dataclasses import replace

    from scheduler.domain.model import NodeWorkload

    known = {n.info.name: NodeWorkload(pod_start_times=(float(i),)) for i, n in enumerate(NODES)}
    reads: list[str] = []

    def workload(name):
        reads.append(name)
        return known[name]

    path = write_model(tmp_path / "m.npz")
    plugin = LearnedPlugin(path, workload=workload)
    by_mapping = LearnedPlugin(path, workloads=lambda: known)
    batch = CandidateBatch.of(NODES, 105.0)
    assert plugin.score(POD, batch).tolist() == by_mapping.score(POD, batch).tolist()
    assert (
        plugin.score(POD, batch.at(106.0)).tolist()
        == by_mapping.score(POD, batch.at(106.0)).tolist()
    )
    assert sorted(reads) == ["a", "b", "c", "d"]  # once each while the states stay the same
    known["c"] = NodeWorkload(pod_start_times=(100.0, 104.0), job_pods=2)
    placed = replace(NODES[2], pod_count=2)
    batch.update([2], [placed])
    assert plugin.score(POD, batch).tolist() == by_mapping.score(POD, batch).tolist()
    assert reads[4:] == ["c"]


def test_the_feature_cache_does_not_keep_energy_plugins_alive():
    """The per-node value cache is kept per energy plugin, weakly: the simulator and training
    make a plugin per run, and none may outlive its run through the cache."""
    import gc
    import weakref

    from scheduler.learning.features import node_features
    from scheduler.plugins.energy import EnergyPlugin

    energy = EnergyPlugin()
    assert node_features(POD, NODES[0], 105.0, energy)["curve_known"] == 1.0
    gone = weakref.ref(energy)
    del energy
    gc.collect()
    assert gone() is None
