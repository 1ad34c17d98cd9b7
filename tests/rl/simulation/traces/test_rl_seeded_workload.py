"""Seeds that vary the workload (rl/simulation/traces/seeded_workload.py) and the benchmark's use of
them: reproducible, different per seed, bursts kept together, run times drawn from the pod's own
workload (or the stated fallback), every policy given the same workload per seed; bad input
gives a clear error."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from common.curves import PowerCurve
from rl.cmd.cli import main
from rl.evaluation.benchmark import plan_benchmark
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.telemetry import TelemetryModel
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from rl.simulation.traces.seeded_workload import ARRIVAL_JITTER_S, CannotVary, draw_workload


def trace() -> list[PodSpec]:
    pods = []
    for i in range(6):  # a Deployment's pods, one at a time
        pods.append(PodSpec(i, 1000.0 * i, 100.0 + 50 * i, 0.5, 0.5, 0.3, "ReplicaSet", 0, "svc"))
    for i in range(6, 10):  # a Job's burst: four pods at one second
        pods.append(PodSpec(i, 2500.0, 600.0 + i, 0.25, 0.25, 0.2, "Job", 0, "burst"))
    for i in range(10, 13):  # single-pod Jobs: no distribution of their own
        pods.append(PodSpec(i, 3000.0 + i, 30.0 * i, 0.25, 0.25, 0.2, "Job", 0, f"job-{i}"))
    return pods


def test_the_same_seed_draws_the_same_workload_and_another_seed_another():
    pods = trace()
    assert draw_workload(pods, 3) == draw_workload(pods, 3)
    assert draw_workload(pods, 3).pods != draw_workload(pods, 4).pods
    assert draw_workload(pods, 3).telemetry_phase_s != draw_workload(pods, 4).telemetry_phase_s


def test_arrivals_move_within_the_jitter_and_bursts_stay_together():
    pods = trace()
    for seed in range(5):
        drawn = draw_workload(pods, seed).pods
        assert [p.index for p in drawn] == list(range(len(pods)))
        assert [p.submit_s for p in drawn] == sorted(p.submit_s for p in drawn)
        burst = {p.submit_s for p in drawn if p.workload == "burst"}
        assert len(burst) == 1
        assert abs(burst.pop() - 2500.0) <= ARRIVAL_JITTER_S
        assert all(p.submit_s >= 0 for p in drawn)


def test_run_times_come_from_the_pods_workload_or_the_stated_fallback():
    pods = trace()
    own = defaultdict(set)
    for p in pods:
        own[p.workload].add(p.duration_s)
    single_jobs = {p.duration_s for p in pods if p.workload.startswith("job-")}
    draw = draw_workload(pods, 1)
    for p in draw.pods:
        pool = single_jobs if p.workload.startswith("job-") else own[p.workload]
        assert p.duration_s in pool
    assert draw.notes == ("3 Job pods of workloads with fewer than 2 pods draw run times from every such Job pod",)
    # Requests, usage and owners stay each pod's own: the multiset is unchanged.
    key = lambda p: (p.workload, p.cpu_request, p.cpu_usage, p.owner_kind)  # noqa: E731
    assert sorted(map(key, draw.pods)) == sorted(map(key, pods))


def test_a_trace_of_one_pod_cannot_vary():
    with pytest.raises(CannotVary, match="--tie-seeds-only"):
        draw_workload([PodSpec(0, 0.0, 10.0, 1.0, 1.0, 1.0)], 0)


def test_a_pod_alone_of_its_kind_draws_from_the_whole_trace():
    pods = trace() + [PodSpec(13, 50.0, 77.0, 1.0, 1.0, 1.0, "StatefulSet", 0, "db")]
    draw = draw_workload(pods, 0)
    assert any("alone of their kind" in note for note in draw.notes)
    assert draw.pods[[p.workload for p in draw.pods].index("db")].duration_s in {p.duration_s for p in pods}


def test_every_policy_runs_the_same_workload_per_seed_and_the_phase_reaches_telemetry():
    nodes = [NodeSpec("a", "g", 8, 16, PowerCurve.linear(50.0, 150.0))]
    cluster = ClusterModel(telemetry=TelemetryModel())
    plan = plan_benchmark(nodes, trace(), ["default", "mostallocated"], 3, cluster, vary_workload=True)
    assert [plan.pods_of(s) for s in range(3)] == [draw_workload(trace(), s).pods for s in range(3)]
    for seed in range(3):
        telemetry = plan.cluster_of(None, seed).telemetry
        assert telemetry is not None and telemetry.phase_s == draw_workload(trace(), seed).telemetry_phase_s
    old = plan_benchmark(nodes, trace(), ["default"], 3, cluster)
    assert all(old.pods_of(s) == tuple(trace()) for s in range(3))


def test_the_telemetry_phase_shifts_the_sample_grid():
    model = TelemetryModel(5.0, 5.0, phase_s=2.0)
    assert model.visible_sample_time(10.0) == pytest.approx(7.0)
    assert model.visible_sample_time(12.0) == pytest.approx(7.0)  # the store refreshed at 10
    assert model.visible_sample_time(1.0) < 0  # no sample yet
    with pytest.raises(ValueError):
        TelemetryModel(5.0, 5.0, phase_s=5.0)


def test_seeds_zero_is_refused(tmp_path, capsys):
    code = main(["benchmark", "--scenario", "homogeneous", "--seeds", "0", "--out", str(tmp_path / "r.json")])
    assert code == 2
    assert "at least one seed" in capsys.readouterr().err


def test_a_trace_that_cannot_vary_is_refused_unless_seeds_only_break_ties(tmp_path, capsys):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("- {name: g, count: 1, cpu_cores: 4, memory_gib: 8, power: {idle_watts: 50, max_watts: 100}}\n")
    one = tmp_path / "one.csv"
    one.write_text("submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n0,60,1,1,0.5\n")
    out = tmp_path / "r.json"
    argv = ["benchmark", "--nodes", str(nodes), "--trace", str(one), "--policies", "default",
            "--seeds", "2", "--out", str(out), "--no-progress", "--jobs", "1"]
    assert main(argv) == 2
    assert "cannot vary per seed" in capsys.readouterr().err
    assert main([*argv, "--tie-seeds-only"]) == 0
    document = json.loads(out.read_text())
    assert document["scenario"]["seeds_vary"] == "tie-breaking only (--tie-seeds-only)"
    runs = document["policies"]["default"]["runs"]
    assert runs[0]["energy_kwh"] == runs[1]["energy_kwh"]
