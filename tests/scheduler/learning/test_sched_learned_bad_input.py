"""Bad input to the learned scorer (issue 24): a model file of another schema or kind, truncated,
corrupt or holding NaN weights is refused at load with ModelError (exit 2 from the CLIs that
take one); a candidate row the model cannot judge scores the documented 0 — never NaN, never
an exception on the scheduling path."""

from __future__ import annotations

import json
import math
import zipfile

import numpy as np
import pytest

from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, Resources
from scheduler.framework.batch import CandidateBatch
from scheduler.learning.features import FEATURE_SCHEMA
from scheduler.learning.features_v2 import FEATURE_SCHEMA_V2
from scheduler.learning.numpy_model import MAX_STANDARDIZED, ModelError, load_numpy_model
from scheduler.learning.plugin import UNMEASURED_SCORE, LearnedPlugin
from tests.helpers.sched_learned import NODES, POD, WIDTH, node, write_model


def rewrite(path, **changes):
    """The model file at `path` with some arrays replaced (None: removed)."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    for name, value in changes.items():
        if value is None:
            arrays.pop(name)
        else:
            arrays[name] = value
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def test_a_truncated_model_file_is_refused_at_load(tmp_path):
    good = write_model(tmp_path / "m.npz")
    data = good.read_bytes()
    for cut in (10, len(data) // 3, len(data) // 2, len(data) - 30):
        short = tmp_path / f"cut{cut}.npz"
        short.write_bytes(data[:cut])
        with pytest.raises(ModelError, match="cannot read the model"):
            load_numpy_model(short)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(ModelError, match="cannot read the model"):
        load_numpy_model(empty)


def test_a_corrupt_member_is_refused_at_load(tmp_path):
    """A byte flipped inside a stored array: the zip's CRC check (BadZipFile) or numpy's
    header parser says so, as a ModelError."""
    good = write_model(tmp_path / "m.npz")
    with zipfile.ZipFile(good) as z:
        info = z.getinfo("layer0_weight.npy")
    data = bytearray(good.read_bytes())
    data[info.header_offset + 30 + len(info.filename) + 200] ^= 0xFF
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="cannot read the model"):
        load_numpy_model(bad)


@pytest.mark.parametrize(
    "name", ["layer0_weight", "layer0_bias", "layer1_weight", "layer1_bias", "mean", "scale"]
)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_or_infinite_numbers_anywhere_are_refused(tmp_path, name, value):
    path = write_model(tmp_path / "m.npz")
    with np.load(path) as data:
        array = data[name].copy()
    array.flat[len(array.flat) // 2] = value
    rewrite(path, **{name: array})
    with pytest.raises(ModelError, match=f"{name} holds values that are not finite"):
        load_numpy_model(path)


def test_layers_that_do_not_chain_or_a_zero_scale_are_refused(tmp_path):
    path = write_model(tmp_path / "m.npz")
    rewrite(path, layer1_weight=np.ones((1, 7)))
    with pytest.raises(ModelError, match=r"layer1 has weight \(1, 7\)"):
        load_numpy_model(path)
    path = write_model(tmp_path / "two.npz")
    rewrite(path, layer1_weight=np.ones((2, 8)), layer1_bias=np.ones(2))
    with pytest.raises(ModelError, match="last layer has 2 outputs"):
        load_numpy_model(path)
    path = write_model(tmp_path / "s.npz")
    rewrite(path, scale=np.zeros(WIDTH))
    with pytest.raises(ModelError, match="scale must be above 0"):
        load_numpy_model(path)
    path = write_model(tmp_path / "gone.npz")
    rewrite(path, layer1_bias=None)
    with pytest.raises(ModelError, match="not a kubejoule model file"):
        load_numpy_model(path)


def test_metadata_of_another_kind_or_schema_or_none_at_all_is_refused(tmp_path):
    v1 = write_model(tmp_path / "v1.npz", schema=FEATURE_SCHEMA, width=FEATURE_SCHEMA.width)
    with pytest.raises(ModelError, match="another feature schema.*kubejoule.features/v1"):
        load_numpy_model(v1)
    for meta, message in [
        ("[1, 2]", "not a kubejoule model file"),
        ("not json", "not a kubejoule model file"),
        (json.dumps({"kind": ["dqn"], "feature_schema": FEATURE_SCHEMA_V2.to_dict(),
                     "score_map": {"center": 0, "spread": 1, "sign": 1}}), "model, expected"),
        (json.dumps({"kind": "dqn", "feature_schema": "v2",
                     "score_map": {"center": 0, "spread": 1, "sign": 1}}), "feature schema"),
        (json.dumps({"kind": "dqn", "feature_schema": FEATURE_SCHEMA_V2.to_dict(),
                     "score_map": {"center": "nan", "spread": 1, "sign": 1}}), "bad score map"),
    ]:
        path = rewrite(write_model(tmp_path / "meta.npz"), meta=np.array(meta))
        with pytest.raises(ModelError, match=message):
            load_numpy_model(path)
    # A torch checkpoint given where the export is expected, with no .npz beside it.
    (tmp_path / "only.pt").write_bytes(b"PK\x03\x04 a torch zip, no npz beside it")
    with pytest.raises(ModelError, match="cannot read the model"):
        load_numpy_model(tmp_path / "only.pt")


def garbage_node(name, watts):
    return NodeState(
        info=NodeInfo(name, Resources(8000, 32 * 2**30, 110)),
        requested=Resources(2000, 2**30, 2),
        telemetry=NodeTelemetry(name, 100.0, watts=watts, source="rapl", utilization=0.3,
                                cores=8),
        pod_count=2,
    )


@pytest.mark.parametrize("watts", [math.inf, -math.inf, 1e300, math.nan])
def test_a_row_the_model_cannot_judge_scores_zero_and_leaves_the_others_alone(tmp_path, watts):
    plugin = LearnedPlugin(write_model(tmp_path / "m.npz"))
    alone = plugin.score(POD, CandidateBatch.of(NODES, 105.0))
    bad = garbage_node("bad", watts)
    scores = plugin.score(POD, CandidateBatch.of([*NODES, bad], 105.0))
    assert scores[:-1].tolist() == alone.tolist()
    assert np.isfinite(scores).all()
    if math.isnan(watts):  # unknown watts: encoded 0 with its flag, judged like any row
        assert 0.0 <= scores[-1] <= 100.0
    else:
        assert scores[-1] == UNMEASURED_SCORE


def test_rows_far_outside_training_or_not_finite_are_not_judged(tmp_path):
    plugin = LearnedPlugin(write_model(tmp_path / "m.npz"))
    rows = plugin.rows(POD, CandidateBatch.of(NODES, 105.0))
    fresh = plugin.model.schema.node_features.index("telemetry_fresh")
    weird = rows.copy()
    weird[0, 0] = math.nan
    weird[1, 3] = math.inf
    weird[2, 2] = 10.0 * MAX_STANDARDIZED * 10.0  # the test model's scale is 10
    weird[:, fresh] = 1.0
    scores, _ = plugin.score_rows(weird)
    assert scores[:3].tolist() == [UNMEASURED_SCORE] * 3
    assert scores[3] == plugin.score_rows(rows)[0][3]
    assert np.isnan(plugin.model.scores(weird)[:3]).all()
    # Just inside the bound still is judged.
    near = rows.copy()
    near[2, 2] = 0.5 * MAX_STANDARDIZED * 10.0
    assert math.isfinite(plugin.model.scores(near)[2])


def test_an_overflowing_output_scores_zero(tmp_path):
    """Finite inputs whose output overflows to inf − inf = NaN inside the network."""
    path = write_model(tmp_path / "m.npz")
    rewrite(
        path,
        layer0_weight=np.full((8, WIDTH), 1e300),
        layer1_weight=np.concatenate([np.full((1, 4), 1e300), np.full((1, 4), -1e300)], axis=1),
    )
    plugin = LearnedPlugin(path)
    with np.errstate(over="ignore", invalid="ignore"):
        scores = plugin.score(POD, CandidateBatch.of([node("a")], 105.0))
    assert scores.tolist() == [UNMEASURED_SCORE]


def test_the_clis_exit_2_naming_the_file_for_a_model_they_cannot_serve(tmp_path, capsys):
    """The gate and the benchmark (a `learned:PATH` policy) and the standalone scheduler (a
    `learned` profile entry) refuse a truncated or NaN model before any work, exit 2."""
    from rl.cmd.cli import main as rl_main
    from scheduler.cmd.cli import main as scheduler_main

    good = write_model(tmp_path / "m.npz")
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    nan = write_model(tmp_path / "nan.npz")
    with np.load(nan) as data:
        weight = data["layer0_weight"].copy()
    weight[0, 0] = math.nan
    rewrite(nan, layer0_weight=weight)
    for path, reason in ((cut, "cannot read the model"), (nan, "not finite")):
        code = rl_main(["gate", "--candidate", str(path), "--heldout", "rl/heldout",
                        "--out", str(tmp_path / "g.json"), "--no-progress", "--jobs", "1"])
        assert code == 2
        err = capsys.readouterr().err
        assert str(path) in err and reason in err
        assert not (tmp_path / "g.json").exists()
        code = rl_main(["benchmark", "--scenario", "heterogeneous-autoscaler", "--policies",
                        f"learned:{path}", "--seeds", "1", "--no-progress",
                        "--out", str(tmp_path / "b.json")])
        assert code == 2
        err = capsys.readouterr().err
        assert str(path) in err and reason in err
        config = tmp_path / "scheduler.yaml"
        config.write_text(
            f"profile:\n  - {{name: learned, args: {{model: '{path}'}}}}\n"
            "kubernetes: {host: 'http://127.0.0.1:1'}\n"
        )
        assert scheduler_main(["run", "--config", str(config), "--no-leader-elect"]) == 2
        err = capsys.readouterr().err
        assert "configuration error" in err and str(path) in err and reason in err
