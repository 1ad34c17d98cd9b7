"""The `learned` Score plugin in a configured scheduler: the features it computes as training
did, the cluster cache's workloads, kept batches, no energy plugin kept alive."""

from __future__ import annotations

import pytest

from scheduler.domain.model import Resources
from scheduler.framework.batch import CandidateBatch
from scheduler.learning.features import FEATURE_SCHEMA
from scheduler.learning.numpy_model import (
    ModelError,
    load_numpy_model,
)
from scheduler.learning.plugin import LearnedPlugin
from scheduler.plugins.energy import EnergyPlugin
from tests.helpers.sched_learned import NODES, POD, node, write_model


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


def test_learned_features_use_the_energy_plugin_the_profile_builds_wherever_it_is_listed(tmp_path):
    """A `KubejouleEnergy` entry with levers builds a new energy plugin; `learned` computes its
    features with that one, listed before or after it, and the entries keep their order."""
    from scheduler.config.registry import PluginContext, score_entries

    path = write_model(tmp_path / "m.npz")
    given = EnergyPlugin()
    learned = {"name": "learned", "args": {"model": str(path)}}
    energy = {"name": "KubejouleEnergy", "args": {"scale": "pod"}}
    fit = {"name": "NodeResourcesFit"}
    for entries in ([learned, fit, energy], [energy, fit, learned]):
        scores = score_entries(entries, PluginContext(given))
        assert [p.name for p, _ in scores] == [e["name"] for e in entries]
        (built,) = [p for p, _ in scores if isinstance(p, EnergyPlugin)]
        (plugin,) = [p for p, _ in scores if isinstance(p, LearnedPlugin)]
        assert built is not given and plugin.energy is built
