"""The benchmark on a real control plane, the parts that need no cluster (the run itself:
tests/e2e/test_e2e_fidelity.py): refusing what it cannot run (the blocked autoscaler, a pod that
fits no node, a policy without a real scheduler), the replay's pod objects, the record's lives,
and a failed run kept apart, marked partial, out of the table."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rl.cluster.schedulers import profile_section
from rl.cmd import on_cluster_cli
from rl.cmd.benchmark_cli import command, parse_args
from rl.cmd.on_cluster_cli import OnClusterRun, document
from rl.evaluation.benchmark import RunOutcome, RunSummary, RunTask, plan_benchmark, run_plan
from rl.evaluation.fidelity import (
    as_run_on_cluster,
    difference_pct,
    format_fidelity,
    without_agents,
)
from rl.evaluation.on_cluster import AUTOSCALER_BLOCKED, PartialRun, check_fits, check_static
from rl.evaluation.replay import Recording, pod_manifest
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.cluster import ClusterModel
from rl.simulation.traces.scenario import DaemonSetSpec, PodSpec, parse_node_groups
from scheduler.config.parse import config_from_dict

NODES = parse_node_groups([{"name": "n", "count": 2, "cpu_cores": 4, "memory_gib": 8,
                            "power": {"idle_watts": 50, "max_watts": 120}}])
PODS = [PodSpec(i, 10.0 * i, 100.0, 1.0, 1.0, 0.8) for i in range(4)]


def test_the_autoscaler_is_refused_naming_the_403() -> None:
    with pytest.raises(ValueError, match="403"):
        check_static(ClusterModel(), ["least-waste"], ["default"])
    with pytest.raises(ValueError, match="no real scheduler"):
        check_static(ClusterModel(), [], ["peaks"])
    check_static(ClusterModel(), [], ["default", "mostallocated", "kubejoule", "default+extender:5"])


def test_the_cli_refuses_autoscaler_and_expanders_on_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBEJOULE_CA_BIN", raising=False)  # without a binary (as in CI), whatever this shell has
    for extra in (["--autoscaler"], ["--policies", "default@least-waste"]):
        args = parse_args(["--scenario", "homogeneous", "--on-cluster", "--out", str(tmp_path / "o.json"), *extra])
        assert command(args) == 2
        assert "This module version is not available" in capsys.readouterr().err
    assert AUTOSCALER_BLOCKED.startswith("--on-cluster")


def test_a_pod_no_node_can_hold_is_named_before_anything_starts() -> None:
    too_big = PodSpec(3, 0.0, 10.0, 3.95, 1.0, 1.0)
    with pytest.raises(ValueError, match="trace row 3: .*never be scheduled"):
        check_fits(NODES, [*PODS[:3], too_big], [DaemonSetSpec("d", 0.1, 0.01)])
    check_fits(NODES, [too_big], [])


def test_a_replayed_pod_without_its_owners_object_is_bare_scaled_and_named_by_its_row() -> None:
    pod = pod_manifest(PodSpec(7, 60.0, 90.0, 0.5, 0.25, 0.3, owner_kind="Job", workload="j"), "kj-x", 30.0, "ns")
    assert pod["metadata"]["name"] == "p-7"
    assert "ownerReferences" not in pod["metadata"]  # no owner object given: the collector would delete it
    assert pod["metadata"]["annotations"]["kubejoule.io/duration"] == "3000ms"
    assert pod["spec"]["schedulerName"] == "kj-x"
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"


def test_a_recording_gives_lives_in_trace_seconds_started_when_running() -> None:
    record = Recording(speedup=10.0, t0=100.0)
    assert record.trace_s(101.5) == pytest.approx(15.0)
    record.bound = {(0, 0): (1.0, "n-0"), (1, 0): (2.0, "n-1")}
    record.running = {(0, 0): 1.5}
    record.ended = {(0, 0): 9.0}
    lives = record.lives()
    assert [(x.index, x.node, x.start_s, x.end_s) for x in lives] == [(0, "n-0", 1.5, 9.0), (1, "n-1", 2.0, None)]


def _summary(key: str, seed: int, kwh: float) -> RunSummary:
    return RunSummary(key, seed, kwh * 3.6e6, 0.0, 0.0, 0, 0, 0, 100.0, 1.0, 2.0, busy_node_seconds=3600.0)


def test_a_failed_run_is_kept_apart_marked_partial_and_out_of_the_table() -> None:
    plan = plan_benchmark(NODES, PODS, ["default", "mostallocated"], 1, ClusterModel(), (), False)
    complete = [RunOutcome(_summary("default", 0, 1.0), None)]
    failed = PartialRun(RunTask("mostallocated", None, "mostallocated", 0), "kube-scheduler exited during the run")
    doc = document(plan, OnClusterRun(complete, failed, None), {}, 30.0)
    assert doc["complete"] is False
    assert list(doc["policies"]) == ["default"]
    assert doc["partial"] == {"policy": "mostallocated", "seed": 0, "partial": True,
                              "reason": "kube-scheduler exited during the run", "pods_ended": 0}
    whole = document(plan, OnClusterRun(complete + [RunOutcome(_summary("mostallocated", 0, 0.9), None)], None,
                                        [RunOutcome(_summary("default", 0, 1.1), None),
                                         RunOutcome(_summary("mostallocated", 0, 0.9), None)]), {}, 30.0)
    assert whole["complete"] is True and "partial" not in whole
    assert whole["fidelity"]["default"]["difference_pct"]["energy_kwh"] == pytest.approx(-9.09, abs=0.01)
    assert "| default |" in format_fidelity(whole["fidelity"])


def test_differences_are_relative_to_the_simulator() -> None:
    assert difference_pct(105.0, 100.0) == pytest.approx(5.0)
    assert difference_pct(0.0, 0.0) == 0.0
    assert difference_pct(1.0, 0.0) is None


MIXED = parse_node_groups([
    {"name": "old", "count": 2, "cpu_cores": 4, "memory_gib": 8, "power": {"idle_watts": 90, "max_watts": 250}},
    {"name": "new", "count": 2, "cpu_cores": 4, "memory_gib": 8, "power": {"idle_watts": 40, "max_watts": 110}},
])
MIXED_PODS = [PodSpec(i, 30.0 * i, 400.0, 1.0, 0.9, 0.5) for i in range(10)]


def _placements(plan_policies: list[str], dropout_free: bool, curves: bool = True) -> dict[str, tuple[float, float]]:
    plan = plan_benchmark(MIXED, MIXED_PODS, plan_policies, 1, ClusterModel(), (), False)
    if not dropout_free:
        plan = without_agents(plan)
        plan = replace(plan, models={k: replace(m, configured_curves=curves) for k, m in plan.models.items()})
    runs = run_plan(plan, None, 1, False)
    return {o.summary.policy: (o.summary.energy_joules, o.summary.busy_node_seconds) for o in runs}


def test_the_fidelity_simulation_prices_nodes_from_their_configured_curves_as_on_kwok_nodes() -> None:
    """KWOK nodes run no agent, and the on-cluster benchmark names every node's curve in the
    configuration of the extender and the standalone scheduler (rl/cluster/schedulers.py): their
    energy plugin prices each node at its curve's worst state, so they still prefer the
    efficient nodes. Simulated as the cluster runs, they do the same; kube-scheduler's own
    profiles read no curves. Without the curves the simulated plugin scored every node 0 and the
    standalone scheduler's profile ranked as MostAllocated alone (the old, wrong model)."""
    policies = ["default", "mostallocated", "default+extender:5", "kubejoule"]
    as_on_cluster = _placements(policies, dropout_free=False)
    assert without_agents(plan_benchmark(MIXED, MIXED_PODS, ["kubejoule"], 1, ClusterModel(), (), False)).models[
        None].configured_curves
    assert as_on_cluster["default+extender:5"][0] < as_on_cluster["default"][0]
    assert as_on_cluster["kubejoule"][0] < as_on_cluster["mostallocated"][0]
    with_agents = _placements(policies, dropout_free=True)
    assert with_agents["default"] == as_on_cluster["default"]
    assert with_agents["mostallocated"] == as_on_cluster["mostallocated"]
    blind = _placements(policies, dropout_free=False, curves=False)
    assert blind["kubejoule"] == blind["mostallocated"]
    assert blind["default+extender:5"] == blind["default"]


class _DroppingApi:
    """Our own seam (rl.cluster.api.Api) faked: pods are created, the watch breaks."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def request(self, method: str, path: str, body: object = None) -> object:
        if method == "POST":
            assert isinstance(body, dict)
            self.created.append(body["metadata"]["name"])
            return body
        return {"items": [], "metadata": {"resourceVersion": "7"}}

    def watch(self, path: str, timeout_seconds: int = 3600) -> object:
        raise ConnectionResetError("connection reset by peer")


def test_a_watch_that_drops_stops_the_replay_naming_it() -> None:
    from rl.evaluation.replay import replay

    api = _DroppingApi()
    recording = replay(api, "ns", PODS[:2], "kj-x", 1000.0, lambda: [])  # type: ignore[arg-type]
    assert recording.failure is not None
    assert "the watch of /api/v1/namespaces/ns/pods dropped: connection reset by peer" in recording.failure


def test_a_component_that_exits_stops_the_replay_naming_it() -> None:
    from rl.evaluation.replay import replay

    class Quiet(_DroppingApi):
        def watch(self, path: str, timeout_seconds: int = 3600) -> object:
            return iter(())

    recording = replay(Quiet(), "ns", PODS[:2], "kj-x", 1000.0, lambda: ["kj-default-kube-scheduler"])  # type: ignore[arg-type]
    assert recording.failure == "kj-default-kube-scheduler exited during the run"


def test_the_fidelity_simulation_waits_for_new_pods_two_seconds_of_wall_clock() -> None:
    """cluster-autoscaler's wait for new pods is 2 s of wall clock (static_autoscaler.go
    unschedulablePodTimeBuffer): at 30× the simulator of a fidelity run waits 60 s of the trace;
    a plan without an autoscaler is only `without_agents`."""
    autoscaled = plan_benchmark(MIXED, MIXED_PODS, ["default"], 1, ClusterModel(autoscaler=AutoscalerModel()), (),
                                False)
    model = as_run_on_cluster(autoscaled, 30.0).models[None]
    assert model.autoscaler is not None and model.autoscaler.new_pod_wait_s == 60.0
    assert model.telemetry_dropout == 1.0 and model.configured_curves
    assert autoscaled.models[None].autoscaler == AutoscalerModel()  # the plan itself unchanged
    static = plan_benchmark(MIXED, MIXED_PODS, ["default"], 1, ClusterModel(), (), False)
    assert as_run_on_cluster(static, 30.0) == without_agents(static)


def test_a_profile_file_runs_as_the_standalone_scheduler_configured_with_its_section(tmp_path: Path) -> None:
    """`profile:FILE` on the cluster is our scheduler with the file's keys in its configuration,
    which the scheduler's own parser takes; a file through the extender is refused."""
    section = profile_section("profile:kubejoule-efficiency.yaml")  # bundled: the recommended setup
    assert section["profile"] == [{"name": "KubejouleEnergy", "weight": 1, "args": {
        "lifetimes": False, "protectRemoval": False, "efficiency": True, "scale": "pod"}}]
    assert config_from_dict(section).profile is not None
    check_static(ClusterModel(), [], ["profile:kubejoule-efficiency.yaml"])
    mapping = tmp_path / "m.yaml"
    mapping.write_text("profile: [{name: NodeResourcesFit, weight: 1}]\npercentage_of_nodes_to_score: 50\n")
    assert profile_section(f"profile:{mapping}") == {
        "profile": [{"name": "NodeResourcesFit", "weight": 1}], "percentage_of_nodes_to_score": 50}
    through = tmp_path / "x.yaml"
    through.write_text("- {name: KubejouleEnergy, weight: 5, extender: true}\n")
    with pytest.raises(ValueError, match="default\\+extender:W"):
        check_static(ClusterModel(), [], [f"profile:{through}"])
    with pytest.raises(ValueError, match="list of score plugins"):
        through.write_text("scorer: {}\n")
        profile_section(f"profile:{through}")
    with pytest.raises(ValueError, match="missing.yaml"):
        profile_section(f"profile:{tmp_path / 'missing.yaml'}")


def test_fidelity_of_a_saved_run_simulates_again_against_its_recorded_cluster_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--fidelity-of FILE` takes the cluster's side from a saved `--on-cluster --fidelity`
    document and measures the simulator's again: here the "cluster" ran the simulated plan with
    every energy 10 % higher, so the re-simulated rows say +10 %; options that change the plan
    are refused, naming what differs."""
    def cluster_runs(plan, *_args, **_kwargs):  # the same plan, "measured" 10 % higher
        runs = run_plan(without_agents(plan), None, 1, False)
        return [replace(o, summary=replace(o.summary, energy_joules=1.1 * o.summary.energy_joules)) for o in runs], None

    monkeypatch.setattr(on_cluster_cli, "run_on_cluster", cluster_runs)
    nodes, trace = tmp_path / "nodes.yaml", tmp_path / "trace.csv"
    nodes.write_text("- {name: n, count: 2, cpu_cores: 4, memory_gib: 8, power: {idle_watts: 50, max_watts: 120}}\n")
    trace.write_text("submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n"
                     + "".join(f"{30 * i},400,1,1,0.8\n" for i in range(6)))
    common = ["--nodes", str(nodes), "--trace", str(trace), "--seeds", "1", "--policies", "default,mostallocated",
              "--no-progress"]
    saved = tmp_path / "saved.json"
    assert command(parse_args([*common, "--on-cluster", "--fidelity", "--bin-dir", str(tmp_path),
                               "--speedup", "30", "--out", str(saved)])) == 0
    again = tmp_path / "again.json"
    capsys.readouterr()
    assert command(parse_args([*common, "--fidelity-of", str(saved), "--out", str(again)])) == 0
    assert "simulated again" in capsys.readouterr().out
    rows = json.loads(again.read_text())["fidelity"]
    assert set(rows) == {"default", "mostallocated"}
    for row in rows.values():
        assert row["difference_pct"]["energy_kwh"] == pytest.approx(10.0, abs=0.05)
        assert row["difference_pct"]["busy_node_hours"] == pytest.approx(0.0, abs=0.05)  # saved to 1e-4
    assert command(parse_args([*common, "--window", "0.05", "--fidelity-of", str(saved), "--out", str(again)])) == 2
    assert "window_hours differ" in capsys.readouterr().err
    assert command(parse_args([*common, "--on-cluster", "--fidelity-of", str(saved), "--out", str(again)])) == 2
    # Read from another checkout: its files compared by name; a setting it does not record is named.
    document = json.loads(saved.read_text())
    document["scenario"]["trace_file"] = "/elsewhere/trace.csv"
    del document["scenario"]["daemonsets"]
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(document))
    assert command(parse_args([*common, "--fidelity-of", str(moved), "--out", str(again)])) == 0
    assert "does not record daemonsets" in capsys.readouterr().err
    document["scenario"]["trace_file"] = "/elsewhere/other.csv"
    moved.write_text(json.dumps(document))
    assert command(parse_args([*common, "--fidelity-of", str(moved), "--out", str(again)])) == 2
    assert "trace_file differ" in capsys.readouterr().err
    not_fidelity = tmp_path / "plain.json"
    not_fidelity.write_text('{"scenario": {}}')
    assert command(parse_args([*common, "--fidelity-of", str(not_fidelity), "--out", str(again)])) == 2
    assert "not a results document of --on-cluster --fidelity" in capsys.readouterr().err
