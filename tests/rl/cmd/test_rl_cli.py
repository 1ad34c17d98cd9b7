"""`kubejoule-rl` end to end: trace generation, benchmark JSON, table, plot, errors."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rl.cmd.cli import main
from rl.evaluation.plots import binned_mean_watts
from rl.simulation.traces.scenario import SCENARIOS, load_node_groups, load_trace, scenario_path
from rl.simulation.traces.trace import format_trace

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


def benchmark(nodes, trace, *options: str) -> int:
    return main(["benchmark", "--nodes", str(nodes), "--trace", str(trace), *options])


# The results contract: these keys, spelled so, in every policy row and in the oracle.
POLICY_KEYS = {
    "energy_kwh",
    "energy_vs_default_pct",
    "slowdown_mean",
    "slowdown_p99",
    "unschedulable",
    "gap_closed_pct",
}


def test_trace_command_is_deterministic(tmp_path, capsys):
    assert main(["trace", "--out", "-", "--hours", "1", "--seed", "9"]) == 0
    first = capsys.readouterr().out
    assert main(["trace", "--out", "-", "--hours", "1", "--seed", "9"]) == 0
    assert capsys.readouterr().out == first
    header = "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage,owner_kind,priority,workload"
    assert first.splitlines()[0] == header
    assert main(["trace", "--out", "-", "--hours", "1", "--seed", "10"]) == 0
    assert capsys.readouterr().out != first


def test_benchmark_writes_results_table_and_plot(inputs, tmp_path, capsys):
    nodes, trace = inputs
    out = tmp_path / "results.json"
    plot = tmp_path / "results.png"
    code = benchmark(
        nodes,
        trace,
        *("--policies", "default,heuristic,peaks", "--seeds", "2"),
        *("--power-off-after", "300", "--boot-seconds", "60", "--boot-joules", "6000"),
        *("--out", str(out), "--plot", str(plot)),
    )
    captured = capsys.readouterr()
    assert code == 0
    doc = json.loads(out.read_text())
    assert list(doc["policies"]) == ["default", "heuristic", "peaks"]  # in the order asked
    oracle_kwh = doc["oracle"]["energy_kwh"]
    assert isinstance(oracle_kwh, float) and oracle_kwh > 0
    default = doc["policies"]["default"]
    # Energies are rounded to 1e-4 kWh in the document: the percentages computed back from them
    # carry that error.
    pct_tolerance = 100 * 1e-4 / (default["energy_kwh"] - oracle_kwh) + 0.01
    for row in doc["policies"].values():
        assert set(row) >= POLICY_KEYS
        assert all(isinstance(row[k], int | float) for k in POLICY_KEYS)
        assert len(row["runs"]) == 2
        assert row["energy_kwh"] == pytest.approx(
            sum(r["energy_kwh"] for r in row["runs"]) / 2, abs=1e-4
        )
        assert row["energy_kwh"] >= oracle_kwh and not row["below_oracle"]
        assert row["energy_vs_default_pct"] == pytest.approx(
            100 * (row["energy_kwh"] - default["energy_kwh"]) / default["energy_kwh"],
            abs=pct_tolerance,
        )
        assert row["gap_closed_pct"] == pytest.approx(
            100
            * (default["energy_kwh"] - row["energy_kwh"])
            / (default["energy_kwh"] - oracle_kwh),
            abs=pct_tolerance,
        )
    assert default["energy_vs_default_pct"] == 0 and default["gap_closed_pct"] == 0
    assert doc["scenario"]["power_off_visible_after_s"] == 300 and doc["scenario"]["boot_joules"] == 6000
    assert "| heuristic |" in captured.out and "oracle bound" in captured.out
    # The progress bar on stderr (a log, not a terminal: a line every 10 %), up to 100 %.
    bar = [line for line in captured.err.splitlines() if line.startswith("benchmark [")]
    assert len(bar) >= 2 and " 100% " in bar[-1]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_autoscaler_runs_every_policy_with_every_expander(inputs, tmp_path, capsys):
    nodes, trace = inputs
    out = tmp_path / "results.json"
    code = benchmark(
        nodes,
        trace,
        *("--policies", "default,heuristic", "--seeds", "1", "--autoscaler"),
        *("--expanders", "random,least-waste", "--out", str(out), "--no-progress"),
    )
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert list(doc["policies"]) == [
        "default@random", "default@least-waste", "heuristic@random", "heuristic@least-waste"
    ]
    # cluster-autoscaler's default expander is the baseline's (since PR #7631).
    assert doc["baseline"] == "default@least-waste"
    assert doc["policies"]["default@least-waste"]["energy_vs_default_pct"] == 0
    for row in doc["policies"].values():
        assert set(row) >= {
            "pending_seconds_mean", "pending_seconds_p99", "scale_ups", "scale_downs", "boots",
            "restarted_pods", "evictions", "lost_cpu_hours", "disrupted_workloads", "deleted_pods",
        }
        assert row["never_scheduled"] == 0 and not row["below_oracle"]
    assert doc["scenario"]["autoscaler"]["expanders"] == ["random", "least-waste"]
    assert doc["scenario"]["daemonsets"] == ["kubejoule-agent", "kube-proxy", "cni"]
    # One expander: plain policy keys.
    assert benchmark(nodes, trace, "--policies", "default", "--seeds", "1", "--autoscaler",
                     "--expanders", "most-pods", "--out", str(out), "--no-progress") == 0
    assert list(json.loads(out.read_text())["policies"]) == ["default"]


@pytest.mark.parametrize(
    "options",
    [
        ("--expanders", "random"),  # without --autoscaler
        ("--autoscaler", "--expanders", "cheapest"),
        ("--autoscaler", "--power-off-visible"),
        ("--autoscaler", "--scan-interval", "0"),
        ("--autoscaler", "--scale-down-utilization-threshold", "1.5"),
        ("--sample-seconds", "0"),
        ("--telemetry-dropout", "2"),
    ],
)
def test_bad_autoscaler_options_are_usage_errors(inputs, tmp_path, capsys, options):
    nodes, trace = inputs
    code = benchmark(nodes, trace, "--policies", "default", "--seeds", "1", *options,
                     "--out", str(tmp_path / "r.json"), "--no-progress")
    assert code == 2
    assert capsys.readouterr().err.startswith("kubejoule-rl: ")


def test_benchmark_errors_are_reported(inputs, tmp_path, capsys):
    nodes, trace = inputs
    out = str(tmp_path / "r.json")
    assert benchmark(nodes, trace, "--policies", "nope", "--out", out) == 2
    assert "unknown policy" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert benchmark(nodes, bad, "--out", out) == 2
    assert "header" in capsys.readouterr().err
    assert main(["benchmark", "--out", out]) == 2


def test_bundled_scenarios_load_and_are_listed_with_their_sizes(capsys):
    assert main(["scenarios"]) == 0
    listed = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert set(listed) == set(SCENARIOS)
    for scenario in SCENARIOS.values():
        nodes = load_node_groups(scenario_path(scenario.nodes_file))
        pods = load_trace(scenario_path(scenario.trace_file))
        assert nodes and len(pods) > 1000
        assert all(len(n.curve.as_points()) == 11 for n in nodes)
        size = f"{len(nodes)} nodes, {sum(n.cpu_cores for n in nodes):g} CPUs, {len(pods)} pods"
        assert size in listed[scenario.name]


def test_power_plot_bins_are_exact_means_of_the_step_function():
    # 100 W until 10 s, then 150 W until the end at 110 s, in 50-s bins:
    # [0, 50): (10 × 100 + 40 × 150) / 50 = 140 W; [50, 100): 150 W; [100, 110]: 150 W.
    starts, means = binned_mean_watts([(0.0, 100.0), (10.0, 150.0), (110.0, 100.0)], 110.0, 50.0)
    assert starts.tolist() == [0.0, 50.0, 100.0]
    assert means.tolist() == pytest.approx([140.0, 150.0, 150.0])


@pytest.mark.parametrize(
    ("seed", "bundled"), [(1, "trace-heterogeneous.csv"), (2, "trace-homogeneous.csv")]
)
def test_bundled_traces_regenerate_byte_for_byte(seed, bundled, capsys):
    """docs/rl.md: the bundled traces are `kubejoule-rl trace --seed 1` / `--seed 2` with every
    other option at its default."""
    assert main(["trace", "--out", "-", "--seed", str(seed)]) == 0
    assert capsys.readouterr().out == scenario_path(bundled).read_text()


def test_policy_expander_pairs_run_only_themselves(inputs, tmp_path, capsys):
    nodes, trace = inputs
    out = tmp_path / "results.json"
    code = benchmark(
        nodes, trace, "--autoscaler", "--seeds", "1", "--no-progress", "--out", str(out),
        "--policies", "default@random,heuristic@kubejoule,mostallocated@least-waste,heuristic",
        "--expanders", "priority",
    )
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert list(doc["policies"]) == [
        "default@random", "heuristic@kubejoule", "mostallocated@least-waste", "heuristic@priority"
    ]
    assert doc["baseline"] == "default@random"
    assert doc["scenario"]["autoscaler"]["expanders"] == [
        "priority", "random", "kubejoule", "least-waste"]
    assert benchmark(nodes, trace, "--policies", "default@random", "--seeds", "1",
                     "--out", str(out), "--no-progress") == 2  # pairs need the autoscaler


def test_benchmark_window_runs_the_pods_arriving_in_it(inputs, tmp_path, capsys):
    """`--window 0.5:1.5` runs exactly what a trace file holding those pods, moved to 0, runs."""
    nodes, trace = inputs
    pods = load_trace(trace)
    cut = tmp_path / "cut.csv"
    kept = [p for p in pods if 1800 <= p.submit_s < 5400]
    assert 0 < len(kept) < len(pods)
    cut.write_text(format_trace(replace(p, submit_s=p.submit_s - 1800) for p in kept))
    common = ("--policies", "default,mostallocated", "--seeds", "2", "--no-progress")
    windowed, whole = tmp_path / "w.json", tmp_path / "c.json"
    assert benchmark(nodes, trace, *common, "--window", "0.5:1.5", "--out", str(windowed)) == 0
    assert benchmark(nodes, cut, *common, "--out", str(whole)) == 0
    first, second = json.loads(windowed.read_text()), json.loads(whole.read_text())
    assert first["scenario"]["window_hours"] == [0.5, 1.5]
    assert first["scenario"]["pods"] == len(kept)
    assert first["policies"] == second["policies"]
    assert "window_hours" not in second["scenario"]


@pytest.mark.parametrize(
    ("window", "message"),
    [("2:1", "end must be after"), ("x", "not a number"), ("0", "must be >"), ("30:40", "no pod")],
)
def test_benchmark_bad_window_is_a_usage_error(inputs, tmp_path, capsys, window, message):
    nodes, trace = inputs
    out = tmp_path / "r.json"
    assert benchmark(nodes, trace, "--policies", "default", "--window", window, "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("kubejoule-rl: ") and message in err
    assert not out.exists()
