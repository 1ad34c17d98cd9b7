"""The simulator's decision log (kubejoule-rl benchmark --decision-log) and the MLP energy model
trained on it (kubejoule-rl train --algo mlp)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rl.cmd.cli import main
from rl.learning.mlp import blank_curves, held_out, load_samples
from rl.simulation.traces.scenario import format_trace
from rl.simulation.traces.tracegen import TraceConfig, generate_family
from scheduler.decisionlog.logfile import read_records
from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3
from scheduler.learning.numpy_model import load_numpy_model

NODES = """- name: small
  count: 5
  cpu_cores: 4
  memory_gib: 16
  power: {idle_watts: 50, max_watts: 150}
- name: big
  count: 5
  cpu_cores: 16
  memory_gib: 64
  power: {idle_watts: 80, max_watts: 300, curve: fan, r: 1.4}
"""


def test_the_decision_log_records_a_hand_computed_outcome(tmp_path):
    # One 4-core node, 50 → 150 W linear, always on, no DaemonSets: pod 0 (1 core used) at
    # t = 0; pod 1 at t = 100 is the first decision after the 60 s window, when the node draws
    # 50 + 100 × 0.25 = 75 W.
    (tmp_path / "n.yaml").write_text(
        "- {name: n, count: 1, cpu_cores: 4, memory_gib: 8, power: {idle_watts: 50, max_watts: 150}}\n"
    )
    (tmp_path / "t.csv").write_text(
        "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n0,1000,1,1,1\n100,10,1,1,1\n"
    )
    log = tmp_path / "d.jsonl"
    code = (
        main(
            [
                "benchmark",
                "--nodes",
                str(tmp_path / "n.yaml"),
                "--trace",
                str(tmp_path / "t.csv"),
                "--policies",
                "heuristic",
                "--seeds",
                "1",
                "--out",
                str(tmp_path / "r.json"),
                "--daemonsets",
                str(tmp_path / "none.yaml"),
                "--decision-log",
                str(log),
                "--no-progress",
                "--tie-seeds-only",  # the trace as written: its decisions' times are asserted
            ]
        )
        if (tmp_path / "none.yaml").write_text("[]\n")
        else None
    )
    assert code == 0
    records, bad = read_records(log)
    assert bad == 0
    decisions = [r for r in records if r["type"] == "decision"]
    outcomes = {r["id"]: r for r in records if r["type"] == "outcome"}
    assert [d["time"] for d in decisions] == [0.0, 100.0]
    assert all(d["feature_schema"] == FEATURE_SCHEMA_V3.version for d in decisions)
    first = outcomes[decisions[0]["id"]]
    assert (first["watts_before"], first["watts_after"]) == pytest.approx((50.0, 75.0))
    assert first["sample_time_after"] == 100.0 and first["measured"] is False
    last = outcomes[decisions[1]["id"]]  # the run ends before its window: no "after"
    assert last["watts_after"] is None
    features = decisions[0]["candidates"][0]["features"]
    assert list(features) == list(FEATURE_SCHEMA_V3.node_features + FEATURE_SCHEMA_V3.pod_features)


@pytest.fixture(scope="module")
def decision_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlp")
    (root / "nodes.yaml").write_text(NODES)
    pods = generate_family(
        "diurnal", TraceConfig(hours=3, arrivals_per_hour=60, duration_max_s=3600), 9
    )
    (root / "trace.csv").write_text(format_trace(pods))
    log = root / "decisions.jsonl"
    code = main(
        [
            "benchmark",
            "--nodes",
            str(root / "nodes.yaml"),
            "--trace",
            str(root / "trace.csv"),
            "--policies",
            "heuristic,roundrobin",
            "--seeds",
            "1",
            "--power-off-after",
            "600",
            "--out",
            str(root / "r.json"),
            "--decision-log",
            str(log),
            "--no-progress",
        ]
    )
    assert code == 0
    return root, log


def test_samples_join_decisions_and_outcomes(decision_log):
    _, log = decision_log
    samples = load_samples([log])
    assert len(samples.rows) > 100 and len(samples.rows) == len(samples.joules)
    assert all(len(r) == FEATURE_SCHEMA_V3.width for r in samples.rows)
    assert any(v is not None for v in samples.line_joules)
    assert samples.skipped["no outcome with power before and after"] >= 1  # runs' last decisions
    rows = np.asarray(samples.rows)
    blanked = blank_curves(rows)
    known = FEATURE_SCHEMA_V3.node_features.index("curve_known")
    assert rows[:, known].max() == 1.0 and blanked[:, known].max() == 0.0
    assert {held_out(n) for n in samples.nodes} == {True, False}


def test_v1_records_are_skipped_and_counted(tmp_path):
    log = tmp_path / "v1.jsonl"
    log.write_text(
        json.dumps(
            {
                "type": "decision",
                "id": "a",
                "time": 1.0,
                "chosen": "n",
                "candidates": [{"node": "n", "features": {"watts": 1.0}}],
            }
        )
        + "\n"
    )
    samples = load_samples([log])
    assert samples.rows == [] and samples.skipped["feature schema kubejoule.features/v1"] == 1


def test_a_log_of_older_schemas_or_bad_feature_rows_fails_clearly(tmp_path, capsys):
    """A v2 log (every decision before issue 24) or v1 (the extender's before it) is read, its
    decisions skipped and counted, and training refuses it saying which schema it reads; a
    v3 row with a missing feature or a value that is not a number is skipped, never a crash."""
    log = tmp_path / "old.jsonl"
    lines = []
    for i in range(30):
        for schema in ("kubejoule.features/v2", None):
            decision = {
                "type": "decision", "id": f"{schema}{i}", "time": float(i), "chosen": "n",
                "candidates": [{"node": "n", "features": {"watts": 1.0}}],
            }
            if schema:
                decision["feature_schema"] = schema
            lines.append(decision)
            lines.append({"type": "outcome", "id": f"{schema}{i}", "window_seconds": 60.0,
                          "watts_before": 1.0, "watts_after": 2.0})
    names = FEATURE_SCHEMA_V3.node_features + FEATURE_SCHEMA_V3.pod_features
    full = dict.fromkeys(names, 1.0)
    for i, bad in enumerate([{**full, "watts": "x"}, {k: v for k, v in full.items() if k != "watts"},
                             {**full, "watts": float("inf")}]):
        lines.append({"type": "decision", "id": f"bad{i}", "time": 100.0 + i, "chosen": "n",
                      "feature_schema": FEATURE_SCHEMA_V3.version,
                      "candidates": [{"node": "n", "features": bad}]})
        lines.append({"type": "outcome", "id": f"bad{i}", "window_seconds": 60.0,
                      "watts_before": 1.0, "watts_after": 2.0})
    log.write_text("".join(json.dumps(x).replace("Infinity", "1e999") + "\n" for x in lines))
    samples = load_samples([log])
    assert samples.rows == []
    assert samples.skipped["feature schema kubejoule.features/v2"] == 30
    assert samples.skipped["feature schema kubejoule.features/v1"] == 30
    assert samples.skipped["features missing or not numbers"] == 3
    out = tmp_path / "m.pt"
    assert main(["train", "--algo", "mlp", "--decisions", str(log), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "kubejoule.features/v2" in err and "this trainer reads kubejoule.features/v3" in err
    assert not out.exists()


def test_train_mlp_command_writes_a_servable_energy_model(decision_log, tmp_path):
    root, log = decision_log
    out = tmp_path / "mlp.pt"
    assert (
        main(
            [
                "train",
                "--algo",
                "mlp",
                "--decisions",
                str(log),
                "--seed",
                "2",
                "--epochs",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    model = load_numpy_model(out.with_suffix(".npz"))
    assert model.kind == "mlp" and model.score_map.sign == -1.0
    evaluation = model.meta["evaluation"]
    for key in ("mlp_mae_joules", "mlp_without_curve_mae_joules", "heuristic_curve_mae_joules"):
        assert evaluation[key] > 0  # measured on the held-out nodes' samples
    assert evaluation["samples"] > 0 and "line_fit_mae_joules" in evaluation
    assert out.with_suffix(".png").stat().st_size > 1000
    # The model serves as a simulator policy.
    assert (
        main(
            [
                "benchmark",
                "--nodes",
                str(root / "nodes.yaml"),
                "--trace",
                str(root / "trace.csv"),
                "--policies",
                f"learned:{out.with_suffix('.npz')}",
                "--seeds",
                "1",
                "--power-off-after",
                "600",
                "--out",
                str(tmp_path / "r.json"),
                "--no-progress",
            ]
        )
        == 0
    )
    missing = tmp_path / "missing.jsonl"
    assert main(["train", "--algo", "mlp", "--decisions", str(missing), "--out", str(out)]) == 2


def test_the_training_log_draws_training_clusters_and_never_opens_the_heldout_set(tmp_path):
    import sys
    from pathlib import Path

    from rl.cmd.decision_log_cli import main as log_main
    from rl.learning.sim_decision_log import write_training_log
    from rl.simulation.traces.pool import TRAINING_SIZES

    heldout = str(Path(__file__).resolve().parents[3] / "rl" / "heldout")
    opened: list[str] = []
    watching = [True]

    def hook(event, args):
        if watching[0] and event == "open" and args and isinstance(args[0], str | Path):
            opened.append(str(args[0]))

    sys.addaudithook(hook)
    path = tmp_path / "train.jsonl"
    try:
        draws = write_training_log(str(path), 2, 5, ("heuristic", "roundrobin"), hours=0.1)
    finally:
        watching[0] = False
    assert any("scenarios" in p for p in opened)  # the hook does see the reads
    assert not [p for p in opened if p.startswith(heldout) or "heldout" in p]
    assert all(TRAINING_SIZES[0] <= d["size"] <= TRAINING_SIZES[1] for d in draws)
    again = tmp_path / "again.jsonl"
    assert write_training_log(str(again), 2, 5, ("heuristic", "roundrobin"), hours=0.1) == draws
    records, bad = read_records(path)
    assert bad == 0
    decisions = [r for r in records if r["type"] == "decision"]
    assert {r["run"].split("#")[0] for r in decisions} == {
        f"c{i:02d}:{p}" for i in range(2) for p in ("heuristic", "roundrobin")
    }
    assert all(r["chosen"].startswith(r["run"][:3] + "-") for r in decisions)  # c00-…, c01-…
    samples = load_samples([path])
    assert len(samples.rows) > 10 and len(samples.rows) == len(samples.joules)
    assert log_main(["--out", str(tmp_path / "x.jsonl"), "--clusters", "0"]) == 2
    assert log_main(["--out", str(path), "--clusters", "1"]) == 2  # never appends to a log
    assert read_records(path) == (records, 0)
