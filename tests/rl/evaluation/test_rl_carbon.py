"""The benchmark's grams of CO2 (rl/evaluation/carbon.py, `--carbon-intensity-csv`): the run's
power over time times the intensity at those times — so the same kWh at another time emits other
grams — every joule counted (instant boots too), and a run reaching past the series a gap with
its reason, never a partial sum."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from common.carbon import JOULES_PER_KWH, parse_intensity_csv, parse_time
from rl.cmd import cluster_options
from rl.cmd.benchmark_cli import cluster_model, parse_args
from rl.cmd.cli import main
from rl.evaluation.benchmark import plan_benchmark, run_plan
from rl.evaluation.carbon import CarbonWindow, run_grams
from rl.simulation.traces.scenario import load_node_groups, load_trace
from tests.rl.cmd.test_rl_cli import NODES_YAML  # the CLI tests' two-generation cluster

T0 = parse_time("2024-06-01T00:00:00Z")
HOUR = 3600.0


def hourly(values: list[float | str], start: float = T0) -> str:
    rows = [f"{start + i * HOUR:.0f},{v}" for i, v in enumerate(values)]
    return "timestamp,g_per_kwh\n" + "\n".join(rows) + "\n"


@pytest.fixture
def inputs(tmp_path):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES_YAML)
    trace = tmp_path / "trace.csv"
    assert main(["trace", "--out", str(trace), "--hours", "2", "--arrivals-per-hour", "25", "--seed", "3",
                 "--duration-max-s", "3600"]) == 0
    return nodes, trace


def test_run_grams_integrates_power_over_the_intensity_steps():
    window = CarbonWindow(parse_intensity_csv(hourly([100, 400, 200])), T0)
    # 1000 W from 0.5 h to 1.5 h (half at 100, half at 400), nothing until 2.5 h, 500 W from there to 3 h
    timeline = [(0.0, 0.0), (0.5 * HOUR, 1000.0), (1.5 * HOUR, 0.0)]
    grams, gap = run_grams(window, timeline, [], 2.0 * HOUR)
    assert gap is None
    assert grams == pytest.approx(0.5 * 100 + 0.5 * 400)  # 0.5 kWh at each
    lump = 3.6e6  # 1 kWh at once, at 2.5 h: 200 g
    assert run_grams(window, timeline, [(2.5 * HOUR, lump)], 2.0 * HOUR)[0] == pytest.approx(250.0 + 200.0)
    # power past the series' end: no grams, the reason instead
    late = [(0.0, 0.0), (2.5 * HOUR, 100.0)]
    grams, gap = run_grams(window, late, [], 4.0 * HOUR)
    assert grams is None and gap is not None and "stale" in gap
    # where no power is drawn, a gap does not matter
    assert run_grams(window, [(0.0, 50.0), (HOUR, 0.0)], [], 10 * HOUR) == (pytest.approx(5.0), None)


def _plan(inputs, carbon, *options: str):
    nodes_file, trace_file = inputs
    args = parse_args(["--nodes", str(nodes_file), "--trace", str(trace_file), "--out", "-", *options])
    cluster = cluster_model(args, None)
    pods = load_trace(trace_file)
    cluster = replace(cluster, workloads=cluster_options.workload_model(args, None, pods))
    nodes = load_node_groups(nodes_file)
    return plan_benchmark(nodes, pods, ["default"], 1, cluster, [], True, carbon)


def test_the_same_run_at_another_time_emits_other_grams(inputs):
    series = parse_intensity_csv(hourly([100, 150, 200, 250, 300, 350, 400, 450, 500, 550]))
    early = run_plan(_plan(inputs, CarbonWindow(series, T0)))[0].summary
    late = run_plan(_plan(inputs, CarbonWindow(series, T0 + 5 * HOUR)))[0].summary
    assert early.energy_joules == late.energy_joules  # the same run, the same kWh
    assert early.carbon_grams is not None and late.carbon_grams is not None
    assert late.carbon_grams > early.carbon_grams * 1.5  # dirtier hours, more grams
    kwh = early.energy_joules / JOULES_PER_KWH
    assert 100 * kwh <= early.carbon_grams <= 400 * kwh  # within the hours it spans (≤ 3 h)


def test_every_joule_is_counted_instant_boots_included(inputs):
    flat = parse_intensity_csv(hourly([300.0] * 12))
    summary = run_plan(_plan(inputs, CarbonWindow(flat, T0), "--autoscaler", "--boot-seconds", "0"))[0].summary
    assert summary.boots > 0
    assert summary.carbon_grams == pytest.approx(summary.energy_joules / JOULES_PER_KWH * 300.0, rel=1e-9)


def test_benchmark_reports_carbon_in_json_and_table(inputs, tmp_path, capsys):
    nodes, trace = inputs
    series = tmp_path / "ci.csv"
    series.write_text(hourly([120, 240, 360, 480, 600, 720]))
    out = tmp_path / "r.json"
    args = ["benchmark", "--nodes", str(nodes), "--trace", str(trace), "--policies", "default,mostallocated",
            "--seeds", "2", "--jobs", "1", "--no-progress", "--carbon-intensity-csv", str(series)]
    assert main([*args, "--out", str(out), "--carbon-start", "2024-06-01T01:00:00Z"]) == 0
    doc = json.loads(out.read_text())
    assert doc["units"]["carbon"] == "gCO2eq"
    assert doc["scenario"]["carbon"]["start"] == "2024-06-01T01:00:00Z"
    for row in doc["policies"].values():
        grams = [r["carbon_g"] for r in row["runs"]]
        assert all(g is not None and g > 0 for g in grams) and all(r["carbon_gap"] is None for r in row["runs"])
        assert row["carbon_g"] == pytest.approx(sum(grams) / len(grams), abs=1e-3)
    table = capsys.readouterr().out
    assert "| policy | energy kWh | carbon g | g/kWh | unknown because |" in table

    # started 5 h into a 6 h series: the runs reach past its end — no grams, the reason given
    assert main([*args, "--out", str(out), "--carbon-start", "2024-06-01T05:00:00Z"]) == 0
    doc = json.loads(out.read_text())
    for row in doc["policies"].values():
        assert row["carbon_g"] is None
        assert all(r["carbon_g"] is None and "stale" in r["carbon_gap"] for r in row["runs"])
    assert "stale" in capsys.readouterr().out

    # without the option, no carbon anywhere in the results
    assert main([*args[:-2], "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert "carbon" not in doc["scenario"] and "carbon" not in doc["units"]
    assert all("carbon_g" not in row and "carbon_g" not in row["runs"][0] for row in doc["policies"].values())


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("when,value\n1,2\n", [], "no header found"),
        ("timestamp,g_per_kwh\n2024-06-01T00:00:00Z,100\n", ["--carbon-start", "noon"], "--carbon-start"),
    ],
)
def test_bad_carbon_input_is_a_usage_error(inputs, tmp_path, capsys, content, extra, message):
    nodes, trace = inputs
    series = tmp_path / "ci.csv"
    series.write_text(content)
    code = main(["benchmark", "--nodes", str(nodes), "--trace", str(trace), "--policies", "default", "--seeds", "1",
                 "--no-progress", "--out", str(tmp_path / "r.json"), "--carbon-intensity-csv", str(series), *extra])
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_negative_hour_in_the_series_leaves_the_run_without_grams(inputs, tmp_path):
    series = parse_intensity_csv(hourly([200, -40, 200, 200]), "ci.csv")
    summary = run_plan(_plan(inputs, CarbonWindow(series, T0)))[0].summary
    assert summary.carbon_grams is None
    assert summary.carbon_gap is not None and "negative value -40" in summary.carbon_gap


def test_sharded_and_parallel_runs_keep_the_grams(inputs, tmp_path):
    nodes, trace = inputs
    series = tmp_path / "ci.csv"
    series.write_text(hourly([120, 240, 360, 480, 600, 720]))
    args = ["benchmark", "--nodes", str(nodes), "--trace", str(trace), "--policies", "default,mostallocated",
            "--seeds", "2", "--no-progress", "--carbon-intensity-csv", str(series)]
    assert main([*args, "--jobs", "1", "--out", str(tmp_path / "one.json")]) == 0
    assert main([*args, "--jobs", "2", "--out", str(tmp_path / "two.json")]) == 0
    for k in (0, 1):
        assert main([*args, "--shard", f"{k}/2", "--out", str(tmp_path / f"s{k}.json")]) == 0
    assert main(["merge", str(tmp_path / "s0.json"), str(tmp_path / "s1.json"), "--out", str(tmp_path / "m.json")]) == 0
    one = (tmp_path / "one.json").read_text()
    assert '"carbon_g"' in one
    assert (tmp_path / "two.json").read_text() == one
    assert (tmp_path / "m.json").read_text() == one
