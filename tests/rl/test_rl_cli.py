"""`kubejoule-rl` end to end: trace generation, benchmark JSON, table, plot, errors."""

from __future__ import annotations

import json

import pytest

from rl.cli import main
from rl.scenario import SCENARIOS, load_node_groups, load_trace, scenario_path

NODES_YAML = """\
- name: old
  count: 2
  cpu_cores: 2
  memory_gib: 4
  power: {points: [86, 89.4, 92.6, 96, 99.5, 102, 106, 108, 112, 114, 117]}
- name: new
  count: 1
  cpu_cores: 12
  memory_gib: 16
  power: {idle_watts: 60, max_watts: 200, curve: fan, r: 1.4}
"""


@pytest.fixture
def inputs(tmp_path):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES_YAML)
    trace = tmp_path / "trace.csv"
    assert (
        main(
            [
                "trace",
                "--out",
                str(trace),
                "--hours",
                "2",
                "--arrivals-per-hour",
                "25",
                "--seed",
                "3",
                "--duration-max-s",
                "3600",
            ]
        )
        == 0
    )
    return nodes, trace


def test_trace_command_is_deterministic(tmp_path, capsys):
    assert main(["trace", "--out", "-", "--hours", "1", "--seed", "9"]) == 0
    first = capsys.readouterr().out
    assert main(["trace", "--out", "-", "--hours", "1", "--seed", "9"]) == 0
    assert capsys.readouterr().out == first
    assert first.splitlines()[0] == "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage"
    assert main(["trace", "--out", "-", "--hours", "1", "--seed", "10"]) == 0
    assert capsys.readouterr().out != first


def test_benchmark_writes_results_table_and_plot(inputs, tmp_path, capsys):
    nodes, trace = inputs
    out = tmp_path / "results.json"
    plot = tmp_path / "results.png"
    code = main(
        [
            "benchmark",
            "--nodes",
            str(nodes),
            "--trace",
            str(trace),
            "--policies",
            "default,heuristic,peaks",
            "--seeds",
            "2",
            "--power-off-after",
            "300",
            "--boot-seconds",
            "60",
            "--boot-joules",
            "6000",
            "--out",
            str(out),
            "--plot",
            str(plot),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    doc = json.loads(out.read_text())
    assert set(doc["policies"]) == {"default", "heuristic", "peaks"}
    for row in doc["policies"].values():
        for key in (
            "energy_kwh",
            "energy_vs_default_pct",
            "slowdown_mean",
            "slowdown_p99",
            "unschedulable",
            "gap_closed_pct",
        ):
            assert key in row
        assert len(row["runs"]) == 2
        assert row["energy_kwh"] >= doc["oracle"]["energy_kwh"]
        assert not row["below_oracle"]
    default = doc["policies"]["default"]
    assert default["energy_vs_default_pct"] == 0 and default["gap_closed_pct"] == 0
    heuristic = doc["policies"]["heuristic"]
    expected_gap = (
        100
        * (default["energy_kwh"] - heuristic["energy_kwh"])
        / (default["energy_kwh"] - doc["oracle"]["energy_kwh"])
    )
    assert heuristic["gap_closed_pct"] == pytest.approx(expected_gap, abs=0.05)
    assert doc["scenario"]["power_off_after_s"] == 300 and doc["scenario"]["boot_joules"] == 6000
    assert "| heuristic |" in captured.out and "oracle bound" in captured.out
    assert "benchmark [" in captured.err  # the progress bar
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_benchmark_errors_are_reported(inputs, tmp_path, capsys):
    nodes, trace = inputs
    out = str(tmp_path / "r.json")
    assert (
        main(
            [
                "benchmark",
                "--nodes",
                str(nodes),
                "--trace",
                str(trace),
                "--policies",
                "nope",
                "--out",
                out,
            ]
        )
        == 2
    )
    assert "unknown policy" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["benchmark", "--nodes", str(nodes), "--trace", str(bad), "--out", out]) == 2
    assert "header" in capsys.readouterr().err
    assert main(["benchmark", "--out", out]) == 2


def test_bundled_scenarios_load(capsys):
    for scenario in SCENARIOS.values():
        nodes = load_node_groups(scenario_path(scenario.nodes_file))
        pods = load_trace(scenario_path(scenario.trace_file))
        assert nodes and len(pods) > 1000
        assert all(len(n.curve.as_points()) == 11 for n in nodes)
    assert main(["scenarios"]) == 0
    assert "heterogeneous-poweroff" in capsys.readouterr().out
