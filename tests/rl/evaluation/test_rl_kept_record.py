"""The kept records of runs on the real components (docs/measurements/: the headline's window and
the held-out case 00-diurnal-6n autoscaled, docs/how-to/real-kubernetes.md) stay readable by
`--fidelity-of`: a change to the results' schema or to the plan's options that made an hour-long
cluster run unusable fails here, not when someone needs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl.cmd.benchmark_cli import command, parse_args

ROOT = Path(__file__).resolve().parents[3]
MEASUREMENTS = ROOT / "docs" / "measurements"
HELDOUT = ROOT / "rl" / "heldout" / "00-diurnal-6n"
RECORDS = {
    "headline-window-8-10.json": (
        ["--scenario", "heterogeneous-autoscaler", "--window", "8:10"],
        "default@least-waste,profile:kubejoule-efficiency.yaml@kubejoule,mostallocated@kubejoule,"
        "kubejoule@kubejoule,default+extender:5@kubejoule", 329),
    "heldout-00-diurnal-6n-autoscaled.json": (
        ["--nodes", str(HELDOUT / "nodes.yaml"), "--trace", str(HELDOUT / "trace.csv"),
         "--pdbs", str(HELDOUT / "pdbs.yaml"), "--daemonsets", str(ROOT / "rl" / "scenarios" / "daemonsets-default.yaml"),
         "--autoscaler"],
        "default@least-waste,profile:kubejoule-efficiency.yaml@kubejoule,mostallocated@kubejoule", 202),
}


@pytest.mark.parametrize("record", sorted(RECORDS))
def test_a_kept_record_is_simulated_again_against_its_cluster_side(
    record: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, policies, pods = RECORDS[record]
    saved = json.loads((MEASUREMENTS / record).read_text())
    again = tmp_path / "again.json"
    args = [*scenario, "--seeds", "1", "--tie-seeds-only", "--policies", policies,
            "--fidelity-of", str(MEASUREMENTS / record), "--no-progress", "--out", str(again)]
    assert command(parse_args(args)) == 0, capsys.readouterr().err
    rows = json.loads(again.read_text())["fidelity"]
    assert set(rows) == set(saved["fidelity"]) == set(policies.split(","))
    for name, row in rows.items():
        assert row["cluster"] == saved["fidelity"][name]["cluster"]  # the cluster's side as recorded
        assert row["simulator"]["pods_placed"] == row["cluster"]["pods_placed"] == pods
        energy = row["simulator"]["energy_kwh"]
        assert row["difference_pct"]["energy_kwh"] == pytest.approx(
            100 * (row["cluster"]["energy_kwh"] / energy - 1), abs=0.01)
