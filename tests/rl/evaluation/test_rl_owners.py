"""A trace's workloads on the cluster (rl/evaluation/owners.py): the owner objects and PDBs the
real components read, the pods' ownerReferences, each owner's scale kept at its workload's
existing pods, and an evicted pod's replacement as the simulator's ledger makes it — seen through
the pod watch as the replay sees the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from rl.evaluation.owners import (
    RECOUNT_ANNOTATION,
    Incarnation,
    Workloads,
    check_owned,
    owner_manifest,
    parse_name,
    pdb_manifest,
    workload_name,
)
from rl.evaluation.replay import PodWatch, Recording, pod_manifest
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import PodSpec
from rl.simulation.traces.trace import PdbSpec

PODS = [
    PodSpec(0, 0.0, 100.0, 1.0, 1.0, 0.5, owner_kind="ReplicaSet", workload="svc_A"),
    PodSpec(1, 5.0, 100.0, 1.0, 1.0, 0.5, owner_kind="ReplicaSet", workload="svc_A"),
    PodSpec(2, 5.0, 100.0, 1.0, 1.0, 0.5, owner_kind="Job", workload="job-1"),
    PodSpec(3, 5.0, 100.0, 1.0, 1.0, 0.5),
]
MODEL = WorkloadModel(pdbs=(PdbSpec("svc_A", max_unavailable=1),), pod_startup_s=10.0)


class FakeApi:
    """The API calls made, answering a POST with the object and a uid."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json") -> Any:
        self.calls.append((method, path, body))
        return {**(body or {}), "metadata": {**(body or {}).get("metadata", {}), "uid": f"uid-{len(self.calls)}"}}


def test_owner_objects_are_what_the_disruption_controller_and_cluster_autoscaler_read() -> None:
    rs = owner_manifest("ReplicaSet", "svc-a", 3)
    assert (rs["apiVersion"], rs["spec"]["replicas"]) == ("apps/v1", 3)
    assert rs["spec"]["selector"] == {"matchLabels": {"kubejoule.io/workload": "svc-a"}}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"kubejoule.io/workload": "svc-a"}
    assert owner_manifest("ReplicationController", "r", 1)["spec"]["selector"] == {"kubejoule.io/workload": "r"}
    assert owner_manifest("StatefulSet", "db", 2)["spec"]["serviceName"] == "db"
    job = owner_manifest("Job", "job-1", 2)
    assert (job["apiVersion"], job["spec"]["parallelism"], job["spec"]["template"]["spec"]["restartPolicy"]) == (
        "batch/v1", 2, "Never")
    assert "replicas" not in job["spec"] and "selector" not in job["spec"]  # the API server makes a Job's
    pdb = pdb_manifest(PdbSpec("svc_A", max_unavailable=1))
    assert pdb["spec"] == {"selector": {"matchLabels": {"kubejoule.io/workload": "svc-a"}}, "maxUnavailable": 1}
    assert pdb_manifest(PdbSpec("w", min_available="50%"))["spec"]["minAvailable"] == "50%"
    assert workload_name(PODS[3]) == "pod-3" and workload_name(PODS[0]) == "svc-a"


def test_workloads_the_cluster_cannot_tell_apart_or_stand_for_are_refused() -> None:
    check_owned(PODS, MODEL.pdbs)
    clash = [*PODS, PodSpec(4, 5.0, 100.0, 1.0, 1.0, 0.5, owner_kind="ReplicaSet", workload="svc-a")]
    with pytest.raises(ValueError, match="'svc_A' and 'svc-a' have one object name"):
        check_owned(clash, ())
    with pytest.raises(ValueError, match="workload 'job-1' has pods of two owner kinds"):
        check_owned([*PODS, PodSpec(4, 5.0, 100.0, 1.0, 1.0, 0.5, owner_kind="StatefulSet", workload="job-1")], ())
    with pytest.raises(ValueError, match="owned by a DaemonSet"):
        check_owned([PodSpec(0, 0.0, 1.0, 1.0, 1.0, 1.0, owner_kind="DaemonSet", workload="d")], ())
    check_owned(PODS, (PdbSpec("job-1", min_available=1),))  # an integer count needs no scale
    with pytest.raises(ValueError, match="Job's scale"):
        check_owned(PODS, (PdbSpec("job-1", min_available="50%"),))


def test_a_replacement_is_named_scaled_owned_and_ready_only_after_its_startup() -> None:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "svc-a", "uid": "u", "controller": True}
    body = pod_manifest(PODS[0], "kj", 10.0, "ns", Incarnation(0, 2, 10.0, 55.0), owner)
    assert body["metadata"]["name"] == "p-0-2" and parse_name("p-0-2") == (0, 2) and parse_name("p-7") == (7, 0)
    assert parse_name("agent-x") is None and parse_name("p-1-x") is None
    assert body["metadata"]["ownerReferences"] == [owner]
    assert body["metadata"]["labels"]["kubejoule.io/workload"] == "svc-a"
    assert body["metadata"]["annotations"]["kubejoule.io/startup"] == "1000ms"  # 10 s ÷ 10
    assert body["metadata"]["annotations"]["kubejoule.io/duration"] == "5500ms"  # the lifetime left ÷ 10
    assert "kubejoule.io/startup" not in pod_manifest(PODS[0], "kj", 10.0, "ns")["metadata"]["annotations"]


def test_install_creates_every_owner_at_zero_and_the_pdbs_and_sync_scales_them_to_existing_pods() -> None:
    api = FakeApi()
    workloads = Workloads(PODS, MODEL)
    workloads.install(api, "ns")  # type: ignore[arg-type]
    posts = [(path, body["metadata"]["name"]) for method, path, body in api.calls if method == "POST"]
    assert posts == [("/apis/apps/v1/namespaces/ns/replicasets", "svc-a"), ("/apis/batch/v1/namespaces/ns/jobs", "job-1"),
                     ("/apis/policy/v1/namespaces/ns/poddisruptionbudgets", "svc-a")]
    assert workloads.owner_reference(PODS[0]) == {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "svc-a",
                                                  "uid": "uid-1", "controller": True, "blockOwnerDeletion": True}
    assert workloads.owner_reference(PODS[3]) is None
    for row in range(4):
        workloads.arrived(row)
    api.calls.clear()
    workloads.sync(api, "ns")  # type: ignore[arg-type]
    # the scales, then the PDB touched: the disruption controller recounts on no scale change
    assert [(path, body) for _, path, body in api.calls] == [
        ("/apis/apps/v1/namespaces/ns/replicasets/svc-a", {"spec": {"replicas": 2}}),
        ("/apis/batch/v1/namespaces/ns/jobs/job-1", {"spec": {"parallelism": 1}}),
        ("/apis/policy/v1/namespaces/ns/poddisruptionbudgets/svc-a",
         {"metadata": {"annotations": {RECOUNT_ANNOTATION: "1"}}})]
    workloads.started(0, 0, 1.0)
    workloads.evicted(0, 0, 20.0)  # replaced: the workload still expects two pods
    workloads.ended(1)
    api.calls.clear()
    workloads.sync(api, "ns")  # type: ignore[arg-type]
    assert [(path, body) for _, path, body in api.calls] == [
        ("/apis/apps/v1/namespaces/ns/replicasets/svc-a", {"spec": {"replicas": 1}}),
        ("/apis/policy/v1/namespaces/ns/poddisruptionbudgets/svc-a",
         {"metadata": {"annotations": {RECOUNT_ANNOTATION: "2"}}})]
    api.calls.clear()
    workloads.sync(api, "ns")  # type: ignore[arg-type]
    assert api.calls == []  # nothing changed


def test_an_owner_is_scaled_down_ahead_of_its_pods_end_and_the_pdb_recounted_after_it() -> None:
    """A ReplicaSet's scale drops before its pod goes (as a real scale-down), with no recount
    then; the end seen touches the PDB; a pod evicted after its owner was scaled down for it is
    replaced, and the scale goes back up."""
    api = FakeApi()
    workloads = Workloads(PODS, MODEL)
    workloads.install(api, "ns")  # type: ignore[arg-type]
    workloads.arrived(0)
    workloads.arrived(1)
    workloads.started(0, 0, 0.0)  # ends at 100
    workloads.started(1, 0, 5.0)  # ends at 105
    workloads.sync(api, "ns")  # type: ignore[arg-type]
    api.calls.clear()

    def synced() -> list[tuple[str, Any]]:
        workloads.sync(api, "ns")  # type: ignore[arg-type]
        calls = [(path.rsplit("/", 2)[-2], body) for _, path, body in api.calls]
        api.calls.clear()
        return calls

    workloads.retire_ending(94.0, 5.0)
    assert synced() == []  # 99 is before either end
    workloads.retire_ending(95.0, 5.0)
    assert synced() == [("replicasets", {"spec": {"replicas": 1}})]  # p-0's: no recount yet
    workloads.retire_ending(96.0, 5.0)
    assert synced() == []  # once only
    workloads.ended(0)
    assert synced() == [("poddisruptionbudgets", {"metadata": {"annotations": {RECOUNT_ANNOTATION: "2"}}})]
    workloads.retire_ending(100.0, 5.0)
    assert synced() == [("replicasets", {"spec": {"replicas": 0}})]
    workloads.evicted(1, 0, 101.0)  # drained just before its end: replaced, expected again
    assert synced() == [("replicasets", {"spec": {"replicas": 1}}),
                        ("poddisruptionbudgets", {"metadata": {"annotations": {RECOUNT_ANNOTATION: "3"}}})]


def _pod(name: str, phase: str, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    return {"metadata": metadata, "spec": {"nodeName": "lean-a"}, "status": {"phase": phase}}


def test_an_evicted_pod_is_replaced_as_its_owner_would_and_a_bare_one_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = Recording(speedup=10.0, t0=0.0)
    workloads = Workloads(PODS, MODEL)
    watch = PodWatch(None, "ns", recording, 60, workloads)  # type: ignore[arg-type]
    clock = [0.0]
    monkeypatch.setattr("rl.evaluation.replay.time.monotonic", lambda: clock[0])

    def at(seconds: float, pod: dict[str, Any], event: str = "MODIFIED") -> None:
        clock[0] = seconds / 10.0  # trace seconds at 10×
        watch._note(pod, event)

    for row in (0, 2, 3):
        workloads.arrived(row)
        at(5.0, _pod(f"p-{row}", "Running"))
    at(45.0, _pod("p-0", "Running", deleting=True))  # ran 40 s of 100: the ReplicaSet's pod lives 60 more
    at(45.0, _pod("p-2", "Running", deleting=True))  # the Job's starts over: 100 s
    at(45.0, _pod("p-3", "Running", deleting=True))  # bare: gone
    at(45.0, _pod("p-3", "Running", deleting=True), "DELETED")  # seen again: one eviction
    assert list(recording.replacements) == [Incarnation(0, 1, 10.0, 60.0), Incarnation(2, 1, 10.0, 100.0)]
    assert recording.gone == {3} and recording.done == 1
    assert recording.horizon_s == pytest.approx(45.0 + 110.0)
    # The replacement is evicted while it starts (5 s of its 10): its lifetime is still 60 s.
    at(50.0, _pod("p-0-1", "Running"))
    at(55.0, _pod("p-0-1", "Running", deleting=True))
    assert recording.replacements[-1] == Incarnation(0, 2, 10.0, 60.0)
    at(60.0, _pod("p-0-2", "Running"))
    at(130.0, _pod("p-0-2", "Succeeded"))
    assert recording.gone == {0, 3}
    lives = [(x.index, x.start_s, x.end_s, x.evicted) for x in recording.lives()]
    assert lives == [(0, 5.0, 45.0, True), (0, 50.0, 55.0, True), (0, 60.0, 130.0, False), (2, 5.0, 45.0, True),
                     (3, 5.0, 45.0, True)]
