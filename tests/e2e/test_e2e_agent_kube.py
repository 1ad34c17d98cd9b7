"""The agent's Kubernetes side on the real API (issue 32 item 3): pod names and namespaces by UID
for the agent's own node, from kube-apiserver 1.36 (agent/kube/client.py, agent/kube/podmeta.py).

Two KWOK nodes of our own (tainted, so no other test's pods land there) and pods the real API
gave UIDs: `web` bound to the agent's node, `api` bound to the other node, `late` created
unbound. The agent runs on a fixture host tree (tests/helpers/agent_proc.py) whose pod cgroups
are renamed to those UIDs, as the kubelet would have named them. What is shown: the real API
honours the agent's `fieldSelector=spec.nodeName=NODE` (kmock ignored it), so a pod on another
node is never listed; `kubejoule-agent run` names its node's pods from its list, and a pod bound
to its node later from its watch (the Binding, a MODIFIED event); `kubejoule-agent once` names
them from one list. kmock remains in tests/agent for the fast unit tests and the API outages.
The agent's metrics.k8s.io reads run on the real metrics-server in test_e2e_metrics_server.py;
here they are off (`--no-metrics-server`): the session's plane has no metrics-server of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.kube.client import KubeClient
from rl.cluster.api import Api
from rl.cluster.controlplane import Cluster
from rl.simulation.traces.scenario import parse_node_groups
from tests.helpers.agent_proc import WORKLOADS, AgentProcess, wait_until
from tests.helpers.e2e_components import create_tainted_nodes, delete_quietly, ensure_namespace

ROOT = Path(__file__).resolve().parents[2]
TREE = WORKLOADS / "v2-systemd-containerd" / "before"
# The pod UIDs of the fixture tree's cgroups, and the pods that take them over here.
FIXTURE_UIDS = {
    "web": "6f1c3b0e-2a4d-4e8b-9c71-0d5e8f2a1b01",
    "api": "0b6e2d94-5c3f-4a1e-8d27-93f4c6a5e702",
    "late": "5e8d1c2b-7a6f-4e3d-9c8b-2a1f0e9d8c04",
}
NAMESPACE = "e2e-agent"
TAINT = {"key": "kubejoule.io/e2e", "value": "agent", "effect": "NoSchedule"}
GROUPS = [{"name": "e2e-agent", "count": 2, "cpu_cores": 4, "memory_gib": 8,
           "power": {"idle_watts": 40, "max_watts": 120}}]
MINE, OTHER = "e2e-agent-0", "e2e-agent-1"


@dataclass
class Pods:
    api: Api
    uids: dict[str, str]  # pod name → the UID the API gave it


def _pod(name: str, node: str | None) -> dict[str, object]:
    spec: dict[str, object] = {
        "tolerations": [{"key": TAINT["key"], "operator": "Exists"}],
        "containers": [{"name": "c", "image": "registry.invalid/none"}],
    }
    if node is None:
        spec["schedulerName"] = "nobody"  # no scheduler serves it: it stays unbound until we bind it
    else:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def pods(cluster: Cluster) -> Iterator[Pods]:
    api = cluster.admin()
    specs = parse_node_groups(GROUPS)
    create_tainted_nodes(api, specs, TAINT)
    ensure_namespace(api, NAMESPACE)
    uids = {}
    try:
        for name, node in (("web", MINE), ("api", OTHER), ("late", None)):
            created = api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", _pod(name, node))
            uids[name] = created["metadata"]["uid"]
        yield Pods(api, uids)
    finally:
        for name in uids:
            delete_quietly(api, f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", now=True)
        for spec in specs:
            delete_quietly(api, f"/api/v1/nodes/{spec.name}")


def adopt_uids(tree: Path, uids: dict[str, str]) -> None:
    """Rename the tree's pod cgroups (`…-pod<uid with underscores>.slice`) to the API's UIDs."""
    cgroup = tree / "sys" / "fs" / "cgroup"
    for name, fixture in FIXTURE_UIDS.items():
        old = fixture.replace("-", "_")
        [directory] = [d for d in cgroup.rglob(f"*pod{old}.slice") if d.is_dir()]
        directory.rename(directory.with_name(directory.name.replace(old, uids[name].replace("-", "_"))))


def bind(api: Api, name: str, node: str) -> None:
    api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": NAMESPACE},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    })


def test_the_real_api_lists_only_the_agents_node(cluster: Cluster, pods: Pods) -> None:
    client = KubeClient.connect(cluster.kubeconfig)
    try:
        listed = client.list_node_pods(MINE)
        assert [p["metadata"]["name"] for p in listed.items] == ["web"]
        assert listed.resource_version  # what the watch resumes from
        assert [p["metadata"]["name"] for p in client.list_node_pods(OTHER).items] == ["api"]
    finally:
        client.close()


def pod_names(agent: AgentProcess) -> dict[str, tuple[str, str]]:
    """pod_uid → (namespace, pod) of the agent's kubejoule_pod_power_watts series."""
    return {labels["pod_uid"]: (labels["namespace"], labels["pod"])
            for labels, _ in agent.samples("kubejoule_pod_power_watts")}


def test_agent_run_names_its_nodes_pods_from_list_and_watch(cluster: Cluster, pods: Pods) -> None:
    uids = pods.uids
    agent = AgentProcess(TREE, interval=0.25, node=MINE,
                         args=["--kubeconfig", str(cluster.kubeconfig), "--no-metrics-server", "--no-network"])
    adopt_uids(agent.tree, uids)
    with agent:
        agent.drive(node_watts=40.0, cgroup_share={uids["web"]: 0.3, uids["api"]: 0.2, uids["late"]: 0.1})
        wait_until(lambda: pod_names(agent).get(uids["web"]) == (NAMESPACE, "web"), what="web named from the list")
        names = pod_names(agent)
        # `api` runs on the other node: the API never sent it here, so its cgroup stays unnamed.
        assert names[uids["api"]] == ("", "") and names[uids["late"]] == ("", "")
        bind(pods.api, "late", MINE)
        wait_until(lambda: pod_names(agent).get(uids["late"]) == (NAMESPACE, "late"), what="late named from the watch")
        assert pod_names(agent)[uids["api"]] == ("", "")
        assert agent.value("kubejoule_agent_errors_total", kind="kube_api") == 0
    assert agent.returncode == 0


def test_agent_once_names_its_nodes_pods_from_one_list(cluster: Cluster, pods: Pods, tmp_path: Path) -> None:
    uids = pods.uids
    tree = tmp_path / "host"
    shutil.copytree(TREE, tree, symlinks=True)
    adopt_uids(tree, uids)
    once = subprocess.run(
        [sys.executable, "-m", "agent.cmd.cli", "once", "--procfs", str(tree / "proc"), "--sysfs", str(tree / "sys"),
         "--interval", "0.2", "--node", MINE, "--kubeconfig", str(cluster.kubeconfig), "--no-metrics-server",
         "--no-network", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert once.returncode == 0, once.stderr
    assert "pod names unknown" not in once.stderr
    named = {p["uid"]: (p["namespace"], p["name"]) for p in json.loads(once.stdout)["pods"]}
    assert named[uids["web"]] == (NAMESPACE, "web")
    assert named[uids["api"]] == (None, None) and named[uids["late"]] == (None, None)
