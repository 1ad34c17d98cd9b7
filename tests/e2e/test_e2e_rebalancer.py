"""`kubejoule-scheduler rebalancer` in active mode as a process against the real API server, the
real disruption controller and real PodDisruptionBudgets.

Five inefficient 4-core KWOK nodes (100–200 W, a quarter busy) and one efficient 8-core node
(50–150 W, half busy, four 1-core pods), their telemetry from fake agents (the agents' /metrics
exposition with a fresh sample time every half second, scraped by the rebalancer's static agent
source), the lifetimes of this namespace's ReplicaSet pods from a lifetime-state file (an hour):
every source node is worth emptying unless a pod on it forbids it. One round shows that

* `free`: its Deployment pod (under a PDB that allows one disruption) is evicted through the
  Eviction API and its ReplicaSet's replacement placed on the efficient node by kube-scheduler
  (the source carries the NoSchedule taint); its DaemonSet pod and its mirror pod (annotation
  `kubernetes.io/config.mirror`, owned by the Node) are never evicted;
* `bare`: a pod without an owner keeps its node (no eviction, no taint);
* `safe`: a pod with `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` keeps its node;
* `pdb`: its pod's PDB allowed one disruption when the round listed it and none when the
  eviction came (the test spent it meanwhile: the eviction is held by a proxy, the controller
  manager paused so the budget stays spent) — the API server answers 429 and the pod is never
  forced: no delete, the same pod on the same node afterwards, no second attempt;
* `edited`: its pod's PDB was edited while the controller manager was paused, so its status
  (one disruption allowed) is older than its spec — the API server refuses every eviction under
  it, and the rebalancer leaves the node alone (no taint, no eviction tried).

The rebalancer reaches the API through tests/helpers/e2e_proxy.py with a token of its own
ServiceAccount holding the shipped RBAC's rules (daemonset/components/rebalancer/rebalancer-rbac.yaml)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common.curves import PowerCurve
from rl.cluster.api import Api
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
    list_pods,
    scheduler_processes,
    service_account_kubeconfig,
    wait_ready,
    write_config,
)
from tests.helpers.sched_http import agent_exposition, text_server

NAMESPACE = "e2e-rebalancer"
LABEL = "rebalancer"
OLD = {"cpu_cores": 4, "memory_gib": 16, "power": {"idle_watts": 100, "max_watts": 200}}
NEW = {"cpu_cores": 8, "memory_gib": 32, "power": {"idle_watts": 50, "max_watts": 150}}
SOURCES = ("free", "bare", "safe", "pdb", "edited")
UTILIZATION = {"old": 0.25, "new": 0.5}
TAINT = "kubejoule.io/rebalancing"
RBAC_MANIFEST = ROOT / "daemonset/components/rebalancer/rebalancer-rbac.yaml"


def node_name(kind: str) -> str:
    return f"e2e-rb-{kind}-0"


def _deployment(name: str, replicas: int, cpu: str, *, labels: dict[str, str], annotations: dict[str, str] | None = None,
                **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/none",
                                     "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
                     "terminationGracePeriodSeconds": 0, **spec}}},
    }


def _prefers(node: str) -> dict[str, Any]:
    """On `node` while it takes pods, else on the efficient node."""
    hostname = "kubernetes.io/hostname"
    return {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": hostname, "operator": "In", "values": [node, node_name("new")]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [{"key": hostname, "operator": "In", "values": [node]}]}}],
    }}}


def _pdb(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}}}


def _workloads(api: Api, nodes: dict[str, str]) -> None:
    apps = f"/apis/apps/v1/namespaces/{NAMESPACE}"
    post = lambda path, body: api.request("POST", path, body)  # noqa: E731
    pinned = {"nodeSelector": {"kubernetes.io/hostname": nodes["new"]}}
    post(f"{apps}/deployments", _deployment("backend", 4, "1", labels={"app": "backend"}, **pinned))
    post(f"{apps}/deployments", _deployment("web", 1, "1", labels={"app": "web"}, **_prefers(nodes["free"])))
    post(f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets", _pdb("web", "web"))
    post(f"{apps}/daemonsets", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": nodes["free"]},
                     "containers": [{"name": "c", "image": "registry.invalid/none",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}},
    })
    node_uid = api.request("GET", f"/api/v1/nodes/{nodes['free']}")["metadata"]["uid"]
    mirror = _pod("static-etcd", nodes["free"], annotations={"kubernetes.io/config.mirror": "e2e"})
    mirror["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": nodes["free"],
                                              "uid": node_uid, "controller": True}]
    bare = _pod("bare", nodes["bare"])
    post(f"{apps}/deployments", _deployment("web-bare", 1, "1", labels={"app": "web-bare"}, **_prefers(nodes["bare"])))
    post(f"{apps}/deployments", _deployment(
        "safe", 1, "1", labels={"app": "safe"}, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        **_prefers(nodes["safe"])))
    # one PDB over two Deployments: one pod on the `pdb` node, one on the efficient node
    post(f"{apps}/deployments", _deployment("guarded-a", 1, "1", labels={"app": "guarded", "part": "a"},
                                            **_prefers(nodes["pdb"])))
    post(f"{apps}/deployments", _deployment("guarded-b", 1, "500m", labels={"app": "guarded", "part": "b"}, **pinned))
    post(f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets", _pdb("guarded", "guarded"))
    # the same on the `edited` node, its PDB to be edited while the controller manager is paused
    post(f"{apps}/deployments", _deployment("edited-a", 1, "1", labels={"app": "edited", "part": "a"},
                                            **_prefers(nodes["edited"])))
    post(f"{apps}/deployments", _deployment("edited-b", 1, "500m", labels={"app": "edited", "part": "b"}, **pinned))
    post(f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets", _pdb("edited", "edited"))
    create_pods(api, NAMESPACE, [mirror, bare])


def _pod(name: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.invalid/none",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


def _where(api: Api) -> dict[str, tuple[str, str]]:
    """Running pods: name → (node, uid)."""
    return {p["metadata"]["name"]: (p["spec"].get("nodeName", ""), p["metadata"]["uid"])
            for p in list_pods(api, NAMESPACE) if p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")}


# where each workload's pods start (the first prefix that matches): the kind of node
PLACES = (("backend-", "new"), ("web-bare-", "bare"), ("web-", "free"), ("agent-", "free"), ("static-etcd", "free"),
          ("bare", "bare"), ("safe-", "safe"), ("guarded-a-", "pdb"), ("guarded-b-", "new"), ("edited-a-", "edited"),
          ("edited-b-", "new"))


def _kind(name: str) -> str:
    return next(kind for prefix, kind in PLACES if name.startswith(prefix))


def _web(pods: dict[str, tuple[str, str]]) -> list[str]:
    return [n for n in pods if n.startswith("web-") and not n.startswith("web-bare-")]


@pytest.fixture(scope="module")
def nodes(plane: Any) -> Iterator[dict[str, str]]:
    api = plane.get().admin()
    create_namespace(api, NAMESPACE)
    groups = [{"name": f"e2e-rb-{kind}", "count": 1, **OLD} for kind in SOURCES]
    groups.append({"name": "e2e-rb-new", "count": 1, **NEW})
    names = create_test_nodes(api, groups, LABEL)
    try:
        yield {kind: node_name(kind) for kind in (*SOURCES, "new")}
    finally:
        api = plane.get().admin()
        delete_namespace(api, NAMESPACE)
        delete_nodes(api, names)


@pytest.fixture
def agents(nodes: dict[str, str]) -> Iterator[dict[str, str]]:
    """Fake agents for the module's nodes, their samples kept fresh: node → URL."""
    curves = {"old": PowerCurve.linear(100.0, 200.0), "new": PowerCurve.linear(50.0, 150.0)}
    stop = threading.Event()
    with text_server() as server:
        def refresh() -> None:
            while True:
                for kind, name in nodes.items():
                    size = "new" if kind == "new" else "old"
                    u = UTILIZATION[size]
                    server.pages[f"/{name}"] = agent_exposition(
                        name, time.time(), watts=curves[size].watts(u), utilization=u,
                        curve=curves[size].as_points(), pods=())
                if stop.wait(0.5):
                    return

        refresh_thread = threading.Thread(target=refresh, daemon=True)
        refresh_thread.start()
        try:
            yield {name: server.url(f"/{name}") for name in nodes.values()}
        finally:
            stop.set()
            refresh_thread.join(5)


@pytest.fixture
def own_token(cluster: Cluster, nodes: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """A token of the rebalancer's own ServiceAccount, with the shipped RBAC's rules."""
    made, token = service_account_kubeconfig(cluster, NAMESPACE, "kubejoule-rebalancer", RBAC_MANIFEST,
                                             tmp_path / "kubeconfig")
    try:
        yield token
    finally:
        delete_paths(cluster.admin(), made)


def _lifetimes(path: Path) -> Path:
    path.write_text(json.dumps({"schema": "kubejoule.lifetimes/v1", "saved_at": time.time(), "histories": [
        {"namespace": NAMESPACE, "kind": "ReplicaSet", "controller": None, "lifetimes": [3600.0] * 10}]}))
    return path


def test_active_mode_evicts_what_it_may_and_never_forces_a_refused_eviction(
    cluster: Cluster, nodes: dict[str, str], agents: dict[str, str], own_token: str, tmp_path: Path
) -> None:
    api = cluster.admin()
    _workloads(api, nodes)
    before = eventually(lambda: len(w := _where(api)) == 14 and w, 60, "every pod Running")
    for name, (node, _) in before.items():
        assert node == nodes[_kind(name)], (name, node)
    pdbs = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets"
    eventually(lambda: all(p.get("status", {}).get("disruptionsAllowed") == 1
                           for p in api.request("GET", pdbs)["items"]), 30, "every PDB allowing one disruption")
    controller = cluster.processes["kube-controller-manager"]
    with api_proxy(cluster, own_token) as proxy, scheduler_processes(tmp_path) as start:
        config = write_config(
            tmp_path / "scheduler.yaml", cluster, host=proxy.url, refresh_seconds=1,
            telemetry={"agents": {"static": agents}},
            rebalancer={"mode": "active", "interval_seconds": 1, "max_nodes_per_interval": 4,
                        "max_evictions_per_interval": 10, "scale_down_utilization_threshold": None},
        )
        guarded = next(n for n in before if n.startswith("guarded-a"))
        held = proxy.hold("POST", rf"/namespaces/{NAMESPACE}/pods/{guarded}/eviction$")
        # The controller manager paused from here until the refused eviction: the `edited` PDB's
        # status (one disruption allowed) stays older than its spec (none), which the API
        # server enforces as "none"; and the guarded PDB's budget, spent below, stays spent.
        os.kill(controller.pid, signal.SIGSTOP)
        try:
            api.request("PATCH", f"{pdbs}/edited", {"spec": {"maxUnavailable": 0}},
                        content_type="application/merge-patch+json")
            rebalancer = start(["rebalancer", "--config", str(config), "--no-leader-elect",
                                "--lifetime-state", str(_lifetimes(tmp_path / "lifetimes.json"))], "rebalancer")
            wait_ready(rebalancer)
            held.wait_arrived(60)
            # the round read the guarded PDB allowing one and the edited one allowing none: the
            # `edited` node and the efficient one (edited-b's node, as a source) skipped for it
            assert rebalancer.metric('kubejoule_rebalancer_nodes{decision="pdb"}') == 2
            edited = api.request("GET", f"{pdbs}/edited")
            assert edited["status"]["observedGeneration"] < edited["metadata"]["generation"]
            assert edited["status"]["disruptionsAllowed"] == 1
            other = next(n for n in before if n.startswith("guarded-b"))
            api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{other}/eviction",
                        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": other, "namespace": NAMESPACE}})
            held.release()
            eventually(lambda: held.answer, 30, "the held eviction answered")
        finally:
            os.kill(controller.pid, signal.SIGCONT)
        assert held.answer == 429
        eventually(lambda: rebalancer.metric('kubejoule_rebalancer_evictions_total{result="evicted"}') == 1, 30,
                   "the web pod evicted")
        gone = {_web(before)[0], other}  # evicted by the rebalancer, by the test

        after = eventually(lambda: not gone & (w := _where(api)).keys() and len(w) == len(before) and w,
                           60, "the evicted pods' replacements Running")
        time.sleep(2)  # two more rounds: the refused node cooling down, the protected ones still skipped
        assert rebalancer.metric('kubejoule_rebalancer_evictions_total{result="refused"}') == 1
        for reason, count in (("bare", 1), ("not_safe_to_evict", 1), ("pdb", 2), ("not_schedulable", 2)):
            assert rebalancer.metric(f'kubejoule_rebalancer_nodes{{decision="{reason}"}}') == count, reason
        assert rebalancer.alive(), rebalancer.text()[-3000:]
        evictions = [(m, p.split("/")[-2], s) for m, p, s in proxy.requests if p.endswith("/eviction")]
        assert not [r for r in proxy.requests if r[0] == "DELETE"]  # nothing forced
        assert rebalancer.stop() == 0
    [web] = _web(before)
    assert sorted(evictions) == sorted([("POST", guarded, 429), ("POST", web, 201)])
    # the web pod moved: a new pod, placed by kube-scheduler on the efficient node…
    [web_after] = _web(after)
    assert web_after != web and after[web_after][0] == nodes["new"]
    # …and every other pod stayed where it was, the same pod (the refused one included)
    for name, place in before.items():
        if name not in (web, other):
            assert after.get(name) == place, name
    tainted = {kind for kind, name in nodes.items()
               if any(t["key"] == TAINT for t in api.request("GET", f"/api/v1/nodes/{name}")["spec"].get("taints") or ())}
    assert tainted == {"free", "pdb"}  # not `edited`: never tried
