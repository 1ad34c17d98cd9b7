"""Workloads in traces and PDB files (rl/simulation/traces/trace.py), the PDB and eviction rules (rl/simulation/engine/workloads.py),
and bad input exiting 2 with the file, the line and the field."""

from __future__ import annotations

import json

import pytest

from rl.cmd.cli import main
from rl.simulation.engine.workloads import (
    DELETED,
    REPLACED,
    RESTARTED,
    disruptions_allowed,
    eviction_fate,
)
from rl.simulation.traces.scenario import (
    PdbSpec,
    ScenarioError,
    format_pdbs,
    format_trace,
    parse_pdbs,
    parse_trace,
)
from rl.simulation.traces.tracegen import FAMILIES, TraceConfig, family_pdbs, generate_family

HEADER = "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage"


def test_old_traces_load_without_workloads():
    (pod,) = parse_trace(f"{HEADER}\n0,10,1,1,1\n")
    assert (pod.owner_kind, pod.workload, pod.safe_to_evict, pod.priority) == (None, None, None, 0)


def test_workload_columns_in_any_order_and_round_trip():
    text = (f"{HEADER},safe_to_evict,workload,owner_kind\n"
            "0,10,1,1,1,false,web,ReplicaSet\n1,10,1,1,1,true,,\n2,10,1,1,1,,job-1,Job\n")
    pods = parse_trace(text)
    assert [(p.owner_kind, p.workload, p.safe_to_evict) for p in pods] == [
        ("ReplicaSet", "web", False), (None, None, True), ("Job", "job-1", None)]
    assert parse_trace(format_trace(pods)) == pods


@pytest.mark.parametrize("value", ["yes", "False ish", "0", "TRUE1"])
def test_an_unknown_safe_to_evict_value_names_file_line_and_field(value):
    with pytest.raises(ScenarioError, match=r"^t\.csv line 3: safe_to_evict: must be true, false or empty"):
        parse_trace(f"{HEADER},safe_to_evict\n0,10,1,1,1,true\n1,10,1,1,1,{value}\n", "t.csv")


WORKLOADS = ["web", "db", "job-1"]


def test_pdbs_parse_with_their_lines():
    text = "# budgets\n- workload: web\n  max_unavailable: 1\n- workload: db\n  min_available: \"50%\"\n"
    pdbs = parse_pdbs(text, "p.yaml", WORKLOADS)
    assert pdbs == (PdbSpec("web", max_unavailable=1), PdbSpec("db", min_available="50%"))
    assert [p.line for p in pdbs] == [2, 4]
    assert parse_pdbs(format_pdbs(pdbs), "p.yaml", WORKLOADS) == pdbs
    assert parse_pdbs("[]", "p.yaml", WORKLOADS) == () == parse_pdbs("", "p.yaml", WORKLOADS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- workload: web\n  max_unavailable: 1\n- workload: nope\n  max_unavailable: 1\n",
         r"^p\.yaml line 3: workload: names no workload of the trace: 'nope'"),
        ("- workload: web\n  max_unavailable: -1\n",
         r"^p\.yaml line 2: max_unavailable: must be >= 0, got -1"),
        ("- workload: web\n  min_available: 150%\n",
         r"^p\.yaml line 2: min_available: must be a percentage in 0%–100%, got '150%'"),
        ("- workload: web\n  min_available: -5%\n", r"^p\.yaml line 2: min_available: must be an integer"),
        ("- workload: web\n  max_unavailable: 1.5\n", r"^p\.yaml line 2: max_unavailable: must be an integer"),
        ("- workload: web\n  max_unavailable: true\n", r"^p\.yaml line 2: max_unavailable: must be an integer"),
        ("- workload: web\n  max_unavailable: 1\n  min_available: 1\n",
         r"^p\.yaml line 3: min_available: give exactly one"),
        ("- workload: web\n", r"^p\.yaml line 1: workload: give exactly one"),
        ("- workload: web\n  max_unavailable: 1\n  maxUnavailable: 1\n",
         r"^p\.yaml line 3: maxUnavailable: unknown field"),
        ("- max_unavailable: 1\n", r"^p\.yaml line 1: workload: missing"),
        ("- workload: web\n  max_unavailable: 1\n- workload: web\n  min_available: 1\n",
         r"^p\.yaml line 3: workload: a second PDB for 'web' \(first on line 1"),
        ("workload: web\n", r"^p\.yaml line 1: expected a YAML list"),
        ("- [web]\n", r"^p\.yaml line 1: expected a mapping"),
        ("- {workload: web\n", r"^p\.yaml: not YAML"),
    ],
)
def test_bad_pdbs_name_file_line_and_field(text, message):
    with pytest.raises(ScenarioError, match=message):
        parse_pdbs(text, "p.yaml", WORKLOADS)


@pytest.mark.parametrize(
    ("pdb", "expected", "healthy", "allowed"),
    [
        # pkg/controller/disruption/disruption.go (kubernetes): desired healthy, then
        # allowed = healthy − desired, never below 0, 0 when no pod is expected.
        (PdbSpec("w", max_unavailable=1), 3, 3, 1),
        (PdbSpec("w", max_unavailable=1), 3, 2, 0),  # one replacement not Ready yet
        (PdbSpec("w", max_unavailable="50%"), 3, 3, 2),  # ⌈1.5⌉ = 2 may go
        (PdbSpec("w", max_unavailable="0%"), 3, 3, 0),
        (PdbSpec("w", max_unavailable=5), 3, 3, 3),  # desired healthy floors at 0
        (PdbSpec("w", min_available=2), 3, 3, 1),
        (PdbSpec("w", min_available="50%"), 3, 3, 1),  # ⌈1.5⌉ = 2 must stay
        (PdbSpec("w", min_available="50%"), 4, 2, 0),
        (PdbSpec("w", max_unavailable=1), 0, 0, 0),
    ],
)
def test_pdb_room_as_the_disruption_controller_counts_it(pdb, expected, healthy, allowed):
    assert disruptions_allowed(pdb, expected, healthy) == allowed


@pytest.mark.parametrize(
    ("owner", "fate"),
    [("ReplicaSet", REPLACED), ("StatefulSet", REPLACED), ("ReplicationController", REPLACED),
     ("Job", RESTARTED), ("SomeOperator", RESTARTED), (None, DELETED), ("DaemonSet", DELETED)],
)
def test_an_evicted_pods_fate_follows_its_owner(owner, fate):
    assert eviction_fate(owner) == fate


def test_pdb_spec_needs_exactly_one_budget():
    with pytest.raises(ValueError):
        PdbSpec("w")
    with pytest.raises(ValueError):
        PdbSpec("w", max_unavailable=1, min_available=1)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_trace_command_writes_workloads_and_the_services_pdbs(family, tmp_path):
    trace, pdbs_file = tmp_path / "t.csv", tmp_path / "p.yaml"
    assert main(["trace", "--out", str(trace), "--pdbs", str(pdbs_file), "--family", family,
                 "--hours", "2", "--seed", "4"]) == 0
    pods = parse_trace(trace.read_text())
    assert pods == generate_family(family, TraceConfig(hours=2), 4)
    assert all(p.workload and p.owner_kind and p.safe_to_evict is None for p in pods)
    pdbs = parse_pdbs(pdbs_file.read_text(), str(pdbs_file), (p.workload for p in pods))
    services = {p.workload for p in pods if p.owner_kind in ("ReplicaSet", "StatefulSet")}
    assert {p.workload for p in pdbs} == services and bool(services) is (family != "bursts")
    assert all(p.max_unavailable == 1 for p in pdbs)
    assert pdbs == family_pdbs(pods)
    # A Job's pods share one workload; a Deployment's pods share their size.
    for workload in services:
        assert len({p.cpu_request for p in pods if p.workload == workload}) == 1


@pytest.fixture
def small_case(tmp_path):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "- {name: a, count: 1, min_count: 1, cpu_cores: 4, memory_gib: 8,"
        " power: {idle_watts: 100, max_watts: 200, curve: linear}}\n"
        "- {name: b, count: 2, cpu_cores: 4, memory_gib: 8,"
        " power: {idle_watts: 100, max_watts: 200, curve: linear}}\n"
    )
    trace = tmp_path / "trace.csv"
    trace.write_text(f"{HEADER},owner_kind,workload\n0,900,1,1,1,ReplicaSet,web\n"
                     "5,900,3,1,1,ReplicaSet,web\n10,900,1,1,1,Job,job-1\n")
    return nodes, trace


def bench(nodes, trace, tmp_path, *options: str) -> int:
    return main(["benchmark", "--nodes", str(nodes), "--trace", str(trace), "--autoscaler",
                 "--policies", "default", "--seeds", "1", "--no-progress",
                 "--out", str(tmp_path / "r.json"), *options])


@pytest.mark.parametrize(
    ("pdbs", "where"),
    [
        ("- workload: nope\n  max_unavailable: 1\n", "line 1: workload"),
        ("- workload: web\n  max_unavailable: -2\n", "line 2: max_unavailable"),
        ("- workload: web\n  min_available: 101%\n", "line 2: min_available"),
    ],
)
def test_bad_pdb_files_exit_2_with_file_line_and_field(small_case, tmp_path, capsys, pdbs, where):
    nodes, trace = small_case
    path = tmp_path / "pdbs.yaml"
    path.write_text(pdbs)
    assert bench(nodes, trace, tmp_path, "--pdbs", str(path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kubejoule-rl: {path} {where}") and "Traceback" not in err


def test_a_bad_safe_to_evict_exits_2_with_file_line_and_field(small_case, tmp_path, capsys):
    nodes, _ = small_case
    trace = tmp_path / "bad.csv"
    trace.write_text(f"{HEADER},safe_to_evict\n0,10,1,1,1,\n1,10,1,1,1,maybe\n")
    assert bench(nodes, trace, tmp_path) == 2
    assert capsys.readouterr().err.startswith(f"kubejoule-rl: {trace} line 3: safe_to_evict: ")


@pytest.mark.parametrize(
    "options",
    [("--pod-startup-seconds", "-1"), ("--scale-down-delay-after-add", "-5"),
     ("--max-drain-parallelism", "0"), ("--scale-down-utilization-threshold", "much")],
)
def test_bad_scale_down_options_exit_2(small_case, tmp_path, capsys, options):
    nodes, trace = small_case
    assert bench(nodes, trace, tmp_path, *options) == 2
    assert capsys.readouterr().err.startswith("kubejoule-rl: ")


def test_the_benchmark_reports_the_disruption_and_its_settings(small_case, tmp_path, capsys):
    nodes, trace = small_case
    path = tmp_path / "pdbs.yaml"
    path.write_text("- workload: web\n  max_unavailable: 1\n")
    assert bench(nodes, trace, tmp_path, "--pdbs", str(path), "--pod-startup-seconds", "20",
                 "--scale-down-delay-after-add", "0", "--max-drain-parallelism", "2") == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    settings = doc["scenario"]["autoscaler"]
    assert settings["scale_down_utilization_threshold"] == 0.5
    assert (settings["delay_after_add_s"], settings["max_drain_parallelism"]) == (0.0, 2)
    assert doc["scenario"]["workloads"] == {"pdbs_file": str(path), "pdbs": 1, "pod_startup_s": 20.0}
    row = doc["policies"]["default"]
    assert {"evictions", "restarted_pods", "lost_cpu_hours", "disrupted_workloads"} <= set(row)
    # The ablation: the old expander and no utilization scale-down.
    assert bench(nodes, trace, tmp_path, "--old-autoscaler-defaults") == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["scenario"]["autoscaler"]["scale_down_utilization_threshold"] is None
    assert doc["scenario"]["autoscaler"]["expanders"] == ["random"]
    assert doc["scenario"]["autoscaler"]["frequent_loops_enabled"] is False
    assert doc["policies"]["default"]["evictions"] == 0
    # --frequent-loops-enabled as cluster-autoscaler takes it: on by default, "false" turns it off
    assert settings["frequent_loops_enabled"] is True
    assert bench(nodes, trace, tmp_path, "--frequent-loops-enabled", "false") == 0
    assert json.loads((tmp_path / "r.json").read_text())["scenario"]["autoscaler"]["frequent_loops_enabled"] is False
    assert bench(nodes, trace, tmp_path, "--old-autoscaler-defaults", "--frequent-loops-enabled", "true") == 0
    assert json.loads((tmp_path / "r.json").read_text())["scenario"]["autoscaler"]["frequent_loops_enabled"] is True
