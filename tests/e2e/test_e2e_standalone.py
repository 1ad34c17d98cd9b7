"""`kubejoule-scheduler run` (the standalone scheduler) as a process against the real API server:
pods that name it are bound through the Binding subresource and get `Scheduled` Events, a pod
that fits nowhere gets `FailedScheduling` and `PodScheduled=False` (a strategic-merge patch of
its status); two replicas under Lease leader election, the leader SIGKILLed mid-stream, bind 300
pods exactly once; shadow mode binds where the default profile would and writes its
recommendation (its `shadow_output` helper reads it through the API); a node deleted between the
decision and the binding is not bound to (the API server would accept that binding: a pod on no
node until the pod garbage collector deletes it) and the pod lands on a node that exists — made
deterministic by a proxy that holds another binding while the one binder thread waits on it
(tests/helpers/e2e_proxy.py); a binding the API server refuses with 409 because another bound the
pod first (held by the proxy meanwhile) is not retried and crashes nothing. The scheduler runs
with a token of its own ServiceAccount holding the rules of the shipped RBAC
(daemonset/base/scheduler-rbac.yaml; its Role in this namespace), behind the proxy too.

Every pod here has a nodeSelector on this module's own KWOK nodes (`kubejoule.io/e2e: standalone`);
the nodes and the namespace are deleted at the end."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rl.cluster.api import Api, ApiError
from rl.cluster.controlplane import Cluster
from tests.helpers.e2e_cluster import eventually
from tests.helpers.e2e_proxy import api_proxy
from tests.helpers.e2e_sched import (
    ROOT,
    create_namespace,
    create_pods,
    create_test_nodes,
    delete_namespace,
    delete_nodes,
    delete_paths,
    events,
    list_pods,
    pod_object,
    scheduler_processes,
    service_account_kubeconfig,
    wait_ready,
    write_config,
)

NAMESPACE = "e2e-standalone"
LABEL = "standalone"
SCHEDULER = "kubejoule-scheduler"
# 3 × 16 cores and 120 pods each: 300 pods of 100 m fit with room to spare
GROUPS = [{"name": "e2e-sa", "count": 3, "cpu_cores": 16, "memory_gib": 64, "max_pods": 120,
           "power": {"idle_watts": 60, "max_watts": 200}}]
RBAC_MANIFEST = ROOT / "daemonset/base/scheduler-rbac.yaml"
LEASE = ["--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5"]


@pytest.fixture(scope="module")
def nodes(plane: Any) -> Iterator[list[str]]:
    api = plane.get().admin()
    create_namespace(api, NAMESPACE)
    names = create_test_nodes(api, GROUPS, LABEL)
    try:
        yield names
    finally:
        api = plane.get().admin()
        delete_namespace(api, NAMESPACE)
        delete_nodes(api, names)


@pytest.fixture(scope="module")
def own_account(plane: Any, nodes: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A kubeconfig of the scheduler's own ServiceAccount (the shipped RBAC's rules), its token."""
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    made, token = service_account_kubeconfig(plane.get(), NAMESPACE, "kubejoule-scheduler", RBAC_MANIFEST, path)
    try:
        yield path, token
    finally:
        delete_paths(plane.get().admin(), made)


@pytest.fixture(scope="module")
def own_kubeconfig(own_account: tuple[Path, str]) -> Path:
    return own_account[0]


@pytest.fixture(scope="module")
def own_token(own_account: tuple[Path, str]) -> str:
    return own_account[1]


def _run_args(config: Path, *extra: str) -> list[str]:
    return ["run", "--config", str(config), "--lease-namespace", NAMESPACE, *extra]


def _bound(api: Api, selector: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in list_pods(api, NAMESPACE, selector)
            if p["spec"].get("nodeName")}


def test_pods_that_name_it_are_bound_and_get_events(cluster: Cluster, nodes: list[str], own_kubeconfig: Path,
                                                   tmp_path: Path) -> None:
    api = cluster.admin()
    config = write_config(tmp_path / "scheduler.yaml", cluster, kubeconfig=own_kubeconfig)
    with scheduler_processes(tmp_path) as start:
        scheduler = start(_run_args(config, "--mode", "active", "--no-leader-elect"), "scheduler")
        wait_ready(scheduler)
        pods = [pod_object(f"one-{i}", scheduler=SCHEDULER, label=LABEL, labels={"test": "one"}) for i in range(5)]
        pods.append(pod_object("too-big", "100", scheduler=SCHEDULER, label=LABEL, labels={"test": "big"}))
        pods.append(pod_object("not-ours", label=LABEL, labels={"test": "one"}, schedulerName="someone-else"))
        create_pods(api, NAMESPACE, pods)
        bound = eventually(lambda: len(b := _bound(api, "test%3Done")) == 5 and b, 30, "five pods bound")
        assert set(bound) == {f"one-{i}" for i in range(5)} and set(bound.values()) <= set(nodes)

        def scheduled() -> dict[str, str]:
            return {e["involvedObject"]["name"]: e["message"] for e in events(api, NAMESPACE, "Scheduled")}

        told = eventually(lambda: len(s := scheduled()) == 5 and s, 30, "a Scheduled event per pod")
        for name, node in bound.items():
            assert told[name] == f"Successfully assigned {NAMESPACE}/{name} to {node}"

        def unschedulable() -> dict[str, Any] | None:
            pod = api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/too-big")
            conditions = {c["type"]: c for c in pod["status"].get("conditions") or []}
            return conditions.get("PodScheduled")

        condition = eventually(unschedulable, 30, "PodScheduled=False on the pod that fits nowhere")
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
        assert "Insufficient cpu" in condition["message"]
        failed = events(api, NAMESPACE, "FailedScheduling")
        assert [e["involvedObject"]["name"] for e in failed] == ["too-big"]
        assert failed[0]["source"]["component"] == SCHEDULER
        assert "not-ours" not in _bound(api, "test%3Done")
        # a cluster change (a node's labels) retries it: the same Event again, its count patched
        api.request("PATCH", f"/api/v1/nodes/{nodes[0]}", {"metadata": {"labels": {"kubejoule.io/e2e-nudge": "1"}}},
                    content_type="application/merge-patch+json")
        again = eventually(lambda: [e for e in events(api, NAMESPACE, "FailedScheduling") if e.get("count", 1) >= 2],
                           30, "the repeated FailedScheduling counted on the first Event")
        assert [e["metadata"]["name"] for e in again] == [failed[0]["metadata"]["name"]]
        assert scheduler.alive()
        assert scheduler.stop() == 0
    assert "Traceback" not in scheduler.text(), scheduler.text()[-3000:]


def test_two_replicas_bind_300_pods_exactly_once_with_the_leader_killed(
    cluster: Cluster, nodes: list[str], own_kubeconfig: Path, tmp_path: Path
) -> None:
    api = cluster.admin()
    config = write_config(tmp_path / "scheduler.yaml", cluster, kubeconfig=own_kubeconfig)
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/kubejoule-scheduler"  # the Role's
    with scheduler_processes(tmp_path) as start:
        replicas = {
            name: start(_run_args(config, "--mode", "active", "--identity", name, *LEASE), name)
            for name in ("r1", "r2")
        }
        for replica in replicas.values():
            wait_ready(replica)
        holder = eventually(lambda: api.request("GET", lease)["spec"].get("holderIdentity"), 30, "a leader")
        leader, standby = replicas[holder], replicas[next(n for n in replicas if n != holder)]
        began = time.monotonic()
        pods = [pod_object(f"ha-{i:03d}", scheduler=SCHEDULER, label=LABEL, labels={"test": "ha"}) for i in range(300)]
        creating = threading.Thread(target=create_pods, args=(api, NAMESPACE, pods, 2))
        creating.start()  # a stream of pods; the leader dies while it flows
        try:
            eventually(lambda: len(_bound(api, "test%3Dha")) >= 40, 60, "the leader binding", interval=0.05)
            leader.kill()
            by_leader = set(_bound(api, "test%3Dha"))  # all it bound (but a request in flight at its death)
        finally:
            creating.join()
        killed_after = len(by_leader)
        assert killed_after <= 200, f"the leader was killed after {killed_after} bindings: not mid-stream"
        bound = eventually(lambda: len(b := _bound(api, "test%3Dha")) == 300 and b, 90, "all 300 pods bound")
        took = time.monotonic() - began
        assert api.request("GET", lease)["spec"]["holderIdentity"] != holder
        assert standby.alive(), standby.text()[-3000:]
        assert standby.metric("kubejoule_scheduler_leader ") == 1.0
        # every pod bound once: one node each; the survivor told of each pod it bound, once, and
        # of none the killed leader had bound (the leader's last pods may lack their Event)
        assert set(bound.values()) <= set(nodes)

        def told() -> list[dict[str, Any]]:
            return [e for e in events(api, NAMESPACE, "Scheduled") if e["involvedObject"]["name"].startswith("ha-")]

        survivor = standby.log.stem
        eventually(lambda: len({e["involvedObject"]["name"] for e in told() if e["reportingInstance"] == survivor})
                   >= 300 - killed_after - 4, 30, "the survivor's Scheduled events")
        per_pod = Counter(e["involvedObject"]["name"] for e in told())
        assert max(per_pod.values()) == 1 and all(e.get("count", 1) == 1 for e in told())
        for event in told():
            name = event["involvedObject"]["name"]
            assert event["message"].endswith(f" to {bound[name]}")
            assert (event["reportingInstance"] == survivor) == (name not in by_leader)
        assert standby.metric('kubejoule_scheduler_pending_pods{queue="active"}') == 0
        assert standby.stop() == 0
        assert api.request("GET", lease)["spec"]["holderIdentity"] == ""  # released on its way out
    assert "Traceback" not in standby.text(), standby.text()[-3000:]
    print(f"300 pods bound in {took:.1f} s, the leader killed after {killed_after}")


def shadow_output(api: Api, namespace: str, pod: str, nodes: list[str]) -> str:
    """What shadow mode tells of its recommendation for `pod`, read through the API: the node its
    `EnergyRecommendation` Event names (an Event, never a patch of the pod: the scheduler has no
    right to patch pods)."""
    def event() -> dict[str, Any] | None:
        listed = api.request("GET", f"/api/v1/namespaces/{namespace}/events?fieldSelector="
                             f"involvedObject.name%3D{pod},reason%3DEnergyRecommendation")
        return next(iter(listed.get("items", [])), None)

    found = eventually(event, 30, f"the EnergyRecommendation Event of {pod}")
    message = found["message"]
    assert message.startswith("energy recommendation: "), message
    recommended = message.removeprefix("energy recommendation: ").split(";", 1)[0]
    assert recommended in nodes, message
    assert recommended in message.split("scores: ", 1)[1]
    annotations = api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")["metadata"].get("annotations") or {}
    assert not any(key.startswith("kubejoule.io/") for key in annotations), annotations
    return recommended


def test_shadow_mode_binds_as_the_default_profile_and_writes_its_recommendation(
    cluster: Cluster, nodes: list[str], own_kubeconfig: Path, tmp_path: Path
) -> None:
    api = cluster.admin()
    config = write_config(tmp_path / "scheduler.yaml", cluster, kubeconfig=own_kubeconfig)
    log = tmp_path / "decisions.jsonl"
    with scheduler_processes(tmp_path) as start:
        scheduler = start(_run_args(config, "--mode", "shadow", "--no-leader-elect", "--decision-log", str(log)),
                          "shadow")
        wait_ready(scheduler)
        create_pods(api, NAMESPACE, [pod_object(f"sh-{i}", scheduler=SCHEDULER, label=LABEL, labels={"test": "sh"})
                                     for i in range(3)])
        bound = eventually(lambda: len(b := _bound(api, "test%3Dsh")) == 3 and b, 30, "three pods bound")
        assert scheduler.metric('kubejoule_scheduler_schedule_attempts_total{result="scheduled"}') == 3
        assert scheduler.stop() == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    decisions = {r["pod"]["name"]: r for r in lines if r["type"] == "decision"}
    assert set(decisions) >= set(bound)
    for name, node in bound.items():  # bound where the default profile chose, not where energy would
        record = decisions[name]
        assert record["mode"] == "shadow" and record["chosen"] == record["default_choice"] == node
        assert record["recommended"] == shadow_output(api, NAMESPACE, name, nodes)


def test_a_node_deleted_between_decision_and_binding_is_not_bound_to(
    cluster: Cluster, nodes: list[str], own_token: str, tmp_path: Path
) -> None:
    """The API server accepts a Binding to a node that does not exist. Made deterministic with
    one binder thread held busy: the proxy holds the binding of a first pod; the second pod is
    decided (its only fitting node `first`) and waits for the binder; then `first` is deleted and
    another node made to fit, and the first binding let go."""
    api = cluster.admin()
    first, second = create_test_nodes(api, [{"name": "e2e-gone", "count": 2, "cpu_cores": 4, "memory_gib": 8,
                                             "power": {"idle_watts": 40, "max_watts": 120}}], "standalone-gone")
    pool = "kubejoule.io/e2e-pool"
    node_path = "/api/v1/nodes/{}"
    try:
        api.request("PATCH", node_path.format(first), {"metadata": {"labels": {pool: "a"}}},
                    content_type="application/merge-patch+json")
        with api_proxy(cluster, own_token) as proxy, scheduler_processes(tmp_path) as start:
            config = write_config(tmp_path / "scheduler.yaml", cluster, host=proxy.url)
            scheduler = start(_run_args(config, "--mode", "active", "--no-leader-elect", "--bind-workers", "1"),
                              "gone")
            wait_ready(scheduler)
            held = proxy.hold("POST", r"/pods/blocker/binding$")
            create_pods(api, NAMESPACE, [pod_object("blocker", scheduler=SCHEDULER, label=LABEL)])
            held.wait_arrived(30)
            target = pod_object("target", scheduler=SCHEDULER, label="standalone-gone")
            target["spec"]["nodeSelector"][pool] = "a"
            create_pods(api, NAMESPACE, [target])
            eventually(lambda: scheduler.metric('kubejoule_scheduler_pending_pods{queue="in_flight"}') == 2, 30,
                       "the target taken off the queue")
            time.sleep(0.5)  # its decision follows in the same pass (milliseconds)
            api.request("DELETE", node_path.format(first))
            api.request("PATCH", node_path.format(second), {"metadata": {"labels": {pool: "a"}}},
                        content_type="application/merge-patch+json")
            eventually(lambda: {("DELETED", "Node", first), ("MODIFIED", "Node", second)} <= set(proxy.watched()),
                       30, "both changes passed on to the scheduler's node watch")
            time.sleep(0.2)  # and applied to its cache (milliseconds)
            held.release()
            placed = eventually(lambda: _bound(api, "").get("target"), 30, "the target bound")
            assert placed == second
            assert scheduler.metric('kubejoule_scheduler_binding_errors_total{kind="node_gone"}') == 1
            bindings = [(m, p, s) for m, p, s in proxy.requests if p.endswith("/pods/target/binding")]
            assert bindings == [("POST", f"/api/v1/namespaces/{NAMESPACE}/pods/target/binding", 201)]
            assert scheduler.stop() == 0
    finally:
        for name in ("blocker", "target"):
            with contextlib.suppress(ApiError):
                api.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}?gracePeriodSeconds=0")
        delete_nodes(api, [first, second])


def test_a_binding_refused_because_another_bound_the_pod_first_is_not_retried(
    cluster: Cluster, nodes: list[str], own_token: str, tmp_path: Path
) -> None:
    """The scheduler's binding held by the proxy while another binds the pod elsewhere: the real
    API server refuses ours (409 Conflict); the scheduler asks the API, finds the pod bound and
    lets it be — no second binding, no Scheduled event of its own, no crash."""
    api = cluster.admin()
    with api_proxy(cluster, own_token) as proxy, scheduler_processes(tmp_path) as start:
        config = write_config(tmp_path / "scheduler.yaml", cluster, host=proxy.url)
        scheduler = start(_run_args(config, "--mode", "active", "--no-leader-elect"), "conflict")
        wait_ready(scheduler)
        held = proxy.hold("POST", r"/pods/raced/binding$")
        create_pods(api, NAMESPACE, [pod_object("raced", scheduler=SCHEDULER, label=LABEL)])
        held.wait_arrived(30)
        chosen = json.loads(held.body)["target"]["name"]
        elsewhere = next(n for n in nodes if n != chosen)
        api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods/raced/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "raced"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": elsewhere}})
        held.release()
        eventually(lambda: scheduler.metric('kubejoule_scheduler_binding_errors_total{kind="conflict"}') == 1, 30,
                   "the 409 counted")
        eventually(lambda: scheduler.metric('kubejoule_scheduler_pending_pods{queue="backoff"}') == 0
                   and scheduler.metric('kubejoule_scheduler_pending_pods{queue="in_flight"}') == 0, 30,
                   "the pod out of the scheduler's queue")
        time.sleep(1.5)  # past the first backoff: a retry would show now
        assert api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/raced")["spec"]["nodeName"] == elsewhere
        bindings = [s for m, p, s in proxy.requests if m == "POST" and p.endswith("/pods/raced/binding")]
        assert bindings == [409]
        assert [e for e in events(api, NAMESPACE, "Scheduled") if e["involvedObject"]["name"] == "raced"] == []
        assert scheduler.alive() and scheduler.stop() == 0
    assert "Traceback" not in scheduler.text(), scheduler.text()[-3000:]
