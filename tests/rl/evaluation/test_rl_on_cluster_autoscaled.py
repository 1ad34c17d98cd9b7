"""The autoscaled benchmark on the cluster without a cluster-autoscaler binary: what is refused
and how (its message names the proxy's 403 and how to give one), what a run's watches record of
nodes and evictions, and the fidelity table's autoscaler columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rl.cmd.benchmark_cli import command, parse_args
from rl.evaluation.benchmark import RunTask
from rl.evaluation.fidelity import format_fidelity
from rl.evaluation.node_watch import NodeWatch
from rl.evaluation.on_cluster import AUTOSCALER_BLOCKED, check_static, run_tag
from rl.evaluation.replay import PodWatch, Recording, pod_manifest
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import PodSpec
from rl.simulation.traces.trace import PdbSpec

AUTOSCALED = ClusterModel(autoscaler=AutoscalerModel())
BARE = [PodSpec(0, 0.0, 10.0, 1.0, 1.0, 1.0)]


def test_without_a_binary_the_refusal_names_the_403_and_how_to_give_one() -> None:
    for expanders, policies in ((["least-waste"], ["default"]), ([], ["default@kubejoule"])):
        with pytest.raises(ValueError, match="403") as refused:
            check_static(AUTOSCALED, expanders, policies)
        assert "--ca-bin" in str(refused.value) and "build-ca-from-source.sh" in str(refused.value)
    assert "KUBEJOULE_CA_BIN" in AUTOSCALER_BLOCKED


def test_the_cli_refuses_without_a_binary_and_checks_one_that_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBEJOULE_CA_BIN", raising=False)
    out = str(tmp_path / "o.json")
    args = parse_args(["--scenario", "homogeneous", "--on-cluster", "--autoscaler", "--out", out])
    assert command(args) == 2 and "--ca-bin" in capsys.readouterr().err
    args = parse_args(["--scenario", "homogeneous", "--on-cluster", "--autoscaler", "--out", out,
                       "--ca-bin", str(tmp_path / "missing"), "--bin-dir", str(tmp_path)])
    assert command(args) == 2 and "no such file" in capsys.readouterr().err


def test_with_a_binary_only_what_the_cluster_reproduces_is_accepted(tmp_path: Path) -> None:
    ca_bin = tmp_path / "cluster-autoscaler"
    ca_bin.write_text("")
    check_static(AUTOSCALED, ["least-waste", "random"], ["default", "kubejoule@kubejoule"], ca_bin, BARE)
    with pytest.raises(ValueError, match="expander 'priority' is not run on the cluster"):
        check_static(AUTOSCALED, ["priority"], ["default"], ca_bin, BARE)
    # Owned pods and PDBs are replayed (rl/evaluation/owners.py); what the cluster cannot stand for is refused.
    owned = [PodSpec(0, 0.0, 10.0, 1.0, 1.0, 1.0, owner_kind="ReplicaSet", workload="w"),
             PodSpec(1, 0.0, 10.0, 1.0, 1.0, 1.0, owner_kind="Job", workload="j")]
    pdbs = ClusterModel(autoscaler=AutoscalerModel(), workloads=WorkloadModel(pdbs=(PdbSpec("w", max_unavailable=1),)))
    check_static(pdbs, [], ["default@least-waste"], ca_bin, owned)
    with pytest.raises(ValueError, match="trace row 0 is owned by a CronJob"):
        check_static(AUTOSCALED, [], ["default@least-waste"], ca_bin, [PodSpec(0, 0.0, 10.0, 1.0, 1.0, 1.0, owner_kind="CronJob")])
    job_pdb = ClusterModel(autoscaler=AutoscalerModel(), workloads=WorkloadModel(pdbs=(PdbSpec("j", max_unavailable=1),)))
    with pytest.raises(ValueError, match="PDB of j .*Job's scale"):
        check_static(job_pdb, [], ["default@least-waste"], ca_bin, owned)
    with pytest.raises(ValueError, match="only-empty-nodes"):
        check_static(ClusterModel(autoscaler=AutoscalerModel(utilization_threshold=None)), [], ["default"], ca_bin, BARE)


def test_runs_of_one_policy_under_two_expanders_have_names_of_their_own() -> None:
    a = run_tag(RunTask("default", "least-waste", "default@least-waste", 0))
    b = run_tag(RunTask("default", "kubejoule", "default@kubejoule", 0))
    assert a == "default-least-waste-s0" and a != b
    assert run_tag(RunTask("default+extender:2.5", None, "default+extender:2.5", 1)) == "default-extender-2-5-s1"


def test_a_pods_safe_to_evict_goes_to_the_cluster_as_cluster_autoscaler_reads_it() -> None:
    drainable = pod_manifest(PodSpec(3, 0.0, 10.0, 1.0, 1.0, 1.0, safe_to_evict=True), "kj", 10.0, "ns")
    assert drainable["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "true"
    assert "cluster-autoscaler.kubernetes.io/safe-to-evict" not in pod_manifest(BARE[0], "kj", 10.0, "ns")["metadata"]["annotations"]


def _node(name: str, group: str | None, ready: bool, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"kubejoule.io/node-group": group} if group else {}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    return {"metadata": metadata, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_the_node_watch_records_each_nodes_creation_ready_and_deletion(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = Recording(speedup=10.0, t0=100.0)
    watch = NodeWatch(None, recording, 60)  # type: ignore[arg-type]
    clock = iter([100.0, 101.0, 102.0, 103.5, 104.0])
    monkeypatch.setattr("rl.evaluation.node_watch.time.monotonic", lambda: next(clock))
    watch._note(_node("hot-0-run", "hot", True), "LISTED")  # there at the start
    watch._note(_node("lean-abcde", "lean", False), "ADDED")  # created by cluster-autoscaler at 10 s
    watch._note(_node("control", None, True), "ADDED")  # not a group's: not recorded
    watch._note(_node("lean-abcde", "lean", False), "MODIFIED")
    watch._note(_node("lean-abcde", "lean", True), "MODIFIED")  # Ready at 35 s
    watch._note(_node("lean-abcde", "lean", True), "DELETED")
    assert [(n.name, n.group, n.created_s, n.ready_s, n.deleted_s) for n in watch.lives()] == [
        ("hot-0-run", "hot", 0.0, 0.0, None), ("lean-abcde", "lean", 10.0, 35.0, 40.0)]
    assert watch.alive() == {"hot": 1}


def test_a_bare_pod_deleted_before_it_ended_is_evicted_and_done() -> None:
    recording = Recording(speedup=10.0, t0=0.0)
    watch = PodWatch(None, "ns", recording, 60)  # type: ignore[arg-type]
    running = {"metadata": {"name": "p-4"}, "spec": {"nodeName": "lean-a"}, "status": {"phase": "Running"}}
    watch._note(running, "MODIFIED")
    watch._note({**running, "metadata": {"name": "p-4", "deletionTimestamp": "x"}}, "MODIFIED")
    done = {"metadata": {"name": "p-5"}, "spec": {"nodeName": "lean-a"}, "status": {"phase": "Succeeded"}}
    watch._note(done, "MODIFIED")
    watch._note(done, "DELETED")  # deleted after it ended: not an eviction
    assert set(recording.evicted) == {(4, 0)} and set(recording.ended) == {(5, 0)} and recording.done == 2
    lives = {life.index: life for life in recording.lives()}
    assert lives[4].evicted and lives[4].end_s == recording.evicted[(4, 0)]
    assert not lives[5].evicted


def test_the_fidelity_table_shows_the_autoscalers_counts_when_it_ran() -> None:
    axes = {"energy_kwh": 1.0, "busy_node_hours": 1.0, "node_hours": 2.0, "pending_p99_s": 5.0, "pods_placed": 4.0,
            "scale_ups": 3.0, "scale_downs": 2.0, "evictions": 0.0}
    row = {"seeds": [0], "simulator": axes, "cluster": {**axes, "scale_ups": 4.0},
           "difference_pct": {a: 0.0 for a in axes}}
    table = format_fidelity({"default@least-waste": row})
    assert "scale-ups / downs / evictions" in table and "3 / 2 / 0; 4 / 2 / 0" in table
    static = format_fidelity({"default": {**row, "simulator": {**axes, "scale_ups": 0.0},
                                          "cluster": {**axes, "scale_ups": 0.0}}})
    assert "scale-ups" not in static
