"""The kept record of the headline window on the real components
(docs/measurements/headline-window-8-10.json, docs/how-to/real-kubernetes.md) stays readable by
`--fidelity-of`: a change to the results' schema or to the plan's options that made the hour-long
cluster run unusable fails here, not when someone needs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl.cmd.benchmark_cli import command, parse_args

ROOT = Path(__file__).resolve().parents[3]
RECORD = ROOT / "docs" / "measurements" / "headline-window-8-10.json"
POLICIES = ("default@least-waste,profile:kubejoule-efficiency.yaml@kubejoule,mostallocated@kubejoule,"
            "kubejoule@kubejoule,default+extender:5@kubejoule")


def test_the_kept_headline_window_record_is_simulated_again_against_its_cluster_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = json.loads(RECORD.read_text())
    again = tmp_path / "again.json"
    args = ["--scenario", "heterogeneous-autoscaler", "--window", "8:10", "--seeds", "1", "--tie-seeds-only",
            "--policies", POLICIES, "--fidelity-of", str(RECORD), "--no-progress", "--out", str(again)]
    assert command(parse_args(args)) == 0, capsys.readouterr().err
    rows = json.loads(again.read_text())["fidelity"]
    assert set(rows) == set(saved["fidelity"]) == set(POLICIES.split(","))
    for name, row in rows.items():
        assert row["cluster"] == saved["fidelity"][name]["cluster"]  # the cluster's side as recorded
        assert row["simulator"]["pods_placed"] == row["cluster"]["pods_placed"] == 329
        energy = row["simulator"]["energy_kwh"]
        assert row["difference_pct"]["energy_kwh"] == pytest.approx(
            100 * (row["cluster"]["energy_kwh"] / energy - 1), abs=0.01)
