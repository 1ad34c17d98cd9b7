"""`kubejoule-rl ablation` (rl/evaluation/ablation.py, rl/cmd/ablation_cli.py) on a tiny case: every row runs
and is in the table and the JSON, the sums and ratios are the cases' own numbers, shards merge
into exactly the unsharded document, and bad input exits 2."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from rl.cmd.cli import main
from rl.evaluation.ablation import BASELINE, PACKING, ROWS

CASE = Path(__file__).resolve().parents[3] / "rl" / "heldout" / "00-diurnal-6n"
PODS = 30


def tiny_heldout(root: Path, cases: int = 2) -> Path:
    """`cases` copies of the first held-out case's cluster with the first PODS pods of its
    trace (no PDBs: they name workloads the cut trace may not have)."""
    for k in range(cases):
        folder = root / f"case-{k}"
        folder.mkdir(parents=True)
        shutil.copy(CASE / "nodes.yaml", folder / "nodes.yaml")
        lines = (CASE / "trace.csv").read_text().splitlines()
        (folder / "trace.csv").write_text("\n".join(lines[: PODS + 1 - 5 * k]) + "\n")
    return root


def run(tmp_path: Path, *extra: str) -> tuple[int, dict, str]:
    out, report = tmp_path / "ablation.json", tmp_path / "ablation.md"
    code = main(["ablation", *extra, "--seeds", "1", "--out", str(out), "--report", str(report),
                 "--jobs", "1", "--no-progress"])
    if code != 0:
        return code, {}, ""
    return code, json.loads(out.read_text()), report.read_text()


def test_every_row_runs_on_held_out_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    heldout = tiny_heldout(tmp_path / "heldout")
    code, document, table = run(tmp_path, "--heldout", str(heldout))
    assert code == 0
    assert [r["label"] for r in document["rows"]] == [r.label for r in ROWS]
    assert not any("," in r.label for r in ROWS)  # --rows takes them comma-separated
    assert document["cases"] == 2 and set(document["results"]) == {"case-0", "case-1"}
    for row in ROWS:
        assert f"| {row.label} | `{row.entry.replace('{profiles}/', '')}` |" in table
    assert "| oracle bound |" in table and table in capsys.readouterr().out
    rows = {r["label"]: r for r in document["rows"]}
    for row in document["rows"]:
        assert math.isfinite(row["energy_kwh"]) and row["energy_kwh"] > 0
        assert row["never_scheduled"] == 0
        # a row's energy is the sum of its cases' energies (each the mean over seeds)
        cases = document["results"].values()
        assert row["energy_kwh"] == pytest.approx(
            sum(c["policies"][row["key"]]["energy_kwh"] for c in cases), abs=1e-3)
    base, packing = rows["baseline"], rows["bin packing"]
    assert base["entry"] == BASELINE and packing["entry"] == PACKING
    assert base["vs_baseline_pct"] == 0.0 and base["gap_closed_pct"] == 0.0
    assert packing["vs_packing_pct"] == 0.0
    for row in document["rows"]:
        expected = 100 * (row["energy_kwh"] - base["energy_kwh"]) / base["energy_kwh"]
        assert row["vs_baseline_pct"] == pytest.approx(expected, abs=0.02)
        gap = (base["energy_kwh"] - row["energy_kwh"]) / (base["energy_kwh"] - document["oracle_kwh"])
        assert row["gap_closed_pct"] == pytest.approx(100 * gap, abs=0.02)
    assert document["oracle_kwh"] < min(r["energy_kwh"] for r in document["rows"])


def test_shards_merge_into_the_unsharded_document(tmp_path: Path) -> None:
    heldout = tiny_heldout(tmp_path / "heldout")
    rows = "baseline,bin packing,three levers"
    code, whole, _ = run(tmp_path, "--heldout", str(heldout), "--rows", rows)
    assert code == 0
    files = []
    for k in range(3):
        path = tmp_path / f"shard-{k}.json"
        assert main(["ablation", "--heldout", str(heldout), "--rows", rows, "--seeds", "1",
                     "--out", str(path), "--shard", f"{k}/3", "--jobs", "1", "--no-progress"]) == 0
        files.append(str(path))
    merged = tmp_path / "merged.json"
    assert main(["merge", *files, "--out", str(merged)]) == 0
    assert json.loads(merged.read_text()) == whole


def test_a_scenario_with_its_files_replaced(tmp_path: Path) -> None:
    (tmp_path / "pdbs.yaml").write_text("[]\n")
    lines = (CASE / "trace.csv").read_text().splitlines()
    (tmp_path / "trace.csv").write_text("\n".join(lines[: PODS + 1]) + "\n")
    code, document, table = run(
        tmp_path, "--scenario", "heterogeneous-autoscaler", "--nodes", str(CASE / "nodes.yaml"),
        "--trace", str(tmp_path / "trace.csv"), "--pdbs", str(tmp_path / "pdbs.yaml"),
        "--rows", "baseline,kubejoule with least-waste,three levers",
    )
    assert code == 0
    assert document["source"]["scenario"] == "heterogeneous-autoscaler"
    assert [r["label"] for r in document["rows"]] == ["baseline", "kubejoule with least-waste", "three levers"]
    assert document["rows"][0]["vs_packing_pct"] is None  # bin packing was not run
    assert "| kubejoule with least-waste | `kubejoule@least-waste` |" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--heldout", "HELDOUT", "--rows", "baseline,nosuch"], "unknown row(s) nosuch"),
        (["--heldout", "HELDOUT", "--trace", "x.csv"], "go with --scenario"),
        (["--scenario", "nosuch"], "unknown scenario 'nosuch'"),
        (["--heldout", "MISSING"], "not a directory"),
    ],
)
def test_bad_input_exits_2_saying_why(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      args: list[str], message: str) -> None:
    heldout = tiny_heldout(tmp_path / "heldout", cases=1)
    args = [str(heldout) if a == "HELDOUT" else str(tmp_path / "missing") if a == "MISSING" else a
            for a in args]
    code, _, _ = run(tmp_path, *args)
    assert code == 2
    assert message in capsys.readouterr().err


def test_issue_23_targets_are_judged_for_the_recommended_setups() -> None:
    from rl.evaluation.ablation_report import ablation_targets

    def row(entry: str, kwh: float, slowdown: float = 1.0, evictions: float = 10,
            never: float = 0) -> dict:
        return {"entry": entry, "energy_kwh": kwh, "vs_baseline_pct": 100 * (kwh - 20.0) / 20.0,
                "slowdown_mean": slowdown, "evictions": evictions, "never_scheduled": never}

    document = {"rows": [
        row(BASELINE, 20.0), row(PACKING, 16.0), row("mostallocated+highnodeutilization@least-waste", 15.9),
        row("kubejoule@kubejoule", 15.0, slowdown=3.0),  # 25 % less, 6.25 % / 5.66 % below packing
        row("kubejoule+rebalancer@kubejoule", 15.1, evictions=11, never=1),  # 24.5 % less
    ]}
    targets = ablation_targets(document)
    assert [ok for _, _, ok in targets] == [True, True, True, True, True, True,
                                            False, True, True, True, False, False]
    assert targets[0][1] == "25.0 % less (15.00 vs 20.00 kWh)"
    assert targets[6] == ("kubejoule+rebalancer@kubejoule ≥ 25 % less energy than default@least-waste",
                          "24.5 % less (15.10 vs 20.00 kWh)", False)
    assert ablation_targets({"rows": [row(PACKING, 16.0)]}) == []
    worse = ablation_targets({"rows": [row(BASELINE, 20.0), row(PACKING, 16.0),
                                       row("kubejoule@kubejoule", 16.4)]})
    assert worse[1][1] == "2.5 % more (16.40 vs 16.00 kWh)" and not worse[1][2]
