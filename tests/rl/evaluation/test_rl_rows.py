"""The benchmark's results as typed records (rl/evaluation/rows.py): the JSON is only their
serialization, so a document read back and written again is the same bytes, and a row's mean
fields are the means of its runs' fields of the same name."""

from __future__ import annotations

import json
from dataclasses import fields

from rl.cmd.cli import main
from rl.evaluation.report import HEADLINE_SCENARIO
from rl.evaluation.rows import BenchmarkDocument, PolicyRow, RunRow
from tests.rl.cmd.test_rl_cli import inputs  # noqa: F401  (the fixture)


def test_a_document_read_back_is_written_as_the_same_bytes(inputs, tmp_path, capsys):  # noqa: F811
    nodes, trace = inputs
    out = tmp_path / "r.json"
    code = main(
        ["benchmark", "--scenario", HEADLINE_SCENARIO, "--nodes", str(nodes), "--trace", str(trace),
         "--policies", "default@least-waste,mostallocated@kubejoule,kubejoule@kubejoule",
         "--seeds", "2", "--out", str(out), "--no-progress"]
    )
    assert code == 0, capsys.readouterr().err
    text = out.read_text()
    document = BenchmarkDocument.from_json(json.loads(text))
    assert json.dumps(document.as_json(), indent=2) + "\n" == text
    row = document.policies["kubejoule@kubejoule"]
    assert [r.seed for r in row.runs] == [0, 1]
    assert row.paired.energy_vs_baseline_pct is not None and row.paired.vs_packing is not None
    assert not document.carbon and "carbon_g" not in text


def test_a_rows_means_are_of_its_runs_fields():
    runs = {f.name for f in fields(RunRow)}
    assert set(PolicyRow.mean_fields()) <= runs
    assert {"slowdown_mean", "evictions", "lost_cpu_hours", "node_hours"} <= set(PolicyRow.mean_fields())


def test_a_document_with_carbon_writes_its_grams():
    run = {"seed": 0, "energy_kwh": 1.0, "carbon_g": 12.5, "carbon_gap": None}
    document = BenchmarkDocument.from_json(
        {"units": {"carbon": "gCO2eq"}, "policies": {"p": {"energy_kwh": 1.0, "carbon_g": 12.5, "runs": [run]}},
         "oracle": {"energy_kwh": 0.5}}
    )
    written = document.as_json()
    assert document.carbon and written["units"]["carbon"] == "gCO2eq"
    row = written["policies"]["p"]
    assert row["carbon_g"] == 12.5 and row["runs"][0]["carbon_g"] == 12.5
    assert list(row)[-3:] == ["runs", "carbon_g", "paired"]
