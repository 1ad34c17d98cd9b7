"""Serving a learned model with numpy (scheduler/learning/numpy_model.py) and as the `learned` Score plugin:
batched scores that depend only on the node and the pod, neutral 50 without fresh telemetry,
schema mismatch refused, and no torch anywhere in the scheduler.
(The plugin in a configured scheduler and its caches: test_sched_learned_serving.py.)"""

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
)
from scheduler.learning.plugin import UNMEASURED_SCORE, LearnedArgs, LearnedPlugin
from scheduler.plugins.energy import EnergyPlugin
from tests.helpers.sched_learned import NODES, POD, node, write_model


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
    assert LearnedPlugin(LearnedArgs.from_config({"model": str(path)}).model).model.kind == "dqn"
    with pytest.raises(ValueError, match="model: PATH"):
        LearnedArgs.from_config({"model": str(path), "extra": 1})
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

    root = Path(__file__).resolve().parents[3]
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
