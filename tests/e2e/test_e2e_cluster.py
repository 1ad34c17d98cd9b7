"""The control-plane harness on the real components: KWOK nodes Ready, pods scheduled by the
real kube-scheduler, run and ended by KWOK after their duration, Deployments and PDBs served by
the real controller manager, and `kubejoule-rl cluster up|down` as people run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rl.cluster.api import ApiError
from rl.cluster.controlplane import Cluster, create_nodes, wait_nodes_ready
from rl.simulation.traces.scenario import parse_node_groups
from tests.helpers.e2e_cluster import eventually, leftover_processes

ROOT = Path(__file__).resolve().parents[2]
GROUPS = [
    {"name": "e2e-small", "count": 2, "cpu_cores": 4, "memory_gib": 8, "power": {"idle_watts": 40, "max_watts": 120}},
    {"name": "e2e-big", "count": 1, "cpu_cores": 16, "memory_gib": 32, "power": {"idle_watts": 90, "max_watts": 300}},
]


def _pod(name: str, cpu: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/none", "resources": {"requests": {"cpu": cpu}}}]},
    }


@pytest.fixture
def nodes(cluster: Cluster) -> list[str]:
    api = cluster.admin()
    specs = parse_node_groups(GROUPS)
    fresh = [s for s in specs if not api.exists(f"/api/v1/nodes/{s.name}")]
    create_nodes(api, fresh)
    wait_nodes_ready(api, [s.name for s in specs], 60)
    return [s.name for s in specs]



def test_kwok_nodes_are_ready_with_the_groups_capacity_and_curve(cluster: Cluster, nodes: list[str]) -> None:
    big = cluster.admin().request("GET", "/api/v1/nodes/e2e-big-0")
    assert big["status"]["allocatable"]["cpu"] in ("16", "16000m")
    assert big["metadata"]["labels"]["kubejoule.io/node-group"] == "e2e-big"
    assert big["metadata"]["annotations"]["kubejoule.io/power-curve"].startswith("[90")
    lease = eventually(
        lambda: cluster.admin().exists("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/e2e-big-0"),
        30, "KWOK's node lease",
    )
    assert lease


def test_a_pod_is_scheduled_runs_and_ends_after_its_duration(cluster: Cluster, nodes: list[str]) -> None:
    api = cluster.admin()
    api.request("POST", "/api/v1/namespaces/default/pods", _pod("lifetime", "6", **{"kubejoule.io/duration": "2s"}))
    running = eventually(
        lambda: (p := api.request("GET", "/api/v1/namespaces/default/pods/lifetime"))["status"].get("phase") == "Running" and p,
        30, "the pod Running",
    )
    assert running["spec"]["nodeName"] == "e2e-big-0"  # 6 CPUs fit only the big node
    done = eventually(
        lambda: api.request("GET", "/api/v1/namespaces/default/pods/lifetime")["status"].get("phase") == "Succeeded",
        30, "the pod Succeeded after its 2 s",
    )
    assert done
    api.request("DELETE", "/api/v1/namespaces/default/pods/lifetime")


def test_deployments_and_pdbs_are_served_by_the_controller_manager(cluster: Cluster, nodes: list[str]) -> None:
    api = cluster.admin()
    labels = {"app": "guarded"}
    api.request("POST", "/apis/apps/v1/namespaces/default/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "guarded"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/none"}]}}},
    })
    api.request("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}},
    })

    def running() -> list[str]:
        pods = api.request("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dguarded")["items"]
        return [p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"]

    names = eventually(lambda: len(running()) == 2 and running(), 60, "two Running replicas")
    eventually(
        lambda: api.request("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/guarded")
        .get("status", {}).get("observedGeneration") == 1, 30, "the disruption controller's PDB status",
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": names[0], "namespace": "default"}}
    with pytest.raises(ApiError) as refused:
        api.request("POST", f"/api/v1/namespaces/default/pods/{names[0]}/eviction", eviction)
    assert refused.value.status == 429  # minAvailable 2 of 2: the real API refuses
    api.request("DELETE", "/apis/apps/v1/namespaces/default/deployments/guarded")
    api.request("DELETE", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/guarded")


def test_cluster_up_and_down_as_people_run_them(k8s_bin: Path, tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("- {name: cli, count: 3, cpu_cores: 8, memory_gib: 16, power: {idle_watts: 50, max_watts: 150}}\n")
    directory = tmp_path / "plane"
    env = {**os.environ, "KUBEJOULE_K8S_BIN": str(k8s_bin)}
    command = [sys.executable, "-m", "rl.cmd.cli", "cluster"]
    try:
        up = subprocess.run([*command, "up", "--dir", str(directory), "--nodes", str(nodes)],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=240)
        assert up.returncode == 0, up.stderr
        kubeconfig = Path(up.stdout.strip().splitlines()[-1])
        assert kubeconfig == directory.resolve() / "kubeconfig" and kubeconfig.is_file()
        assert "creating 3 KWOK nodes" in up.stderr
        assert leftover_processes(str(directory)), "the components run on after `up` returns"
        again = subprocess.run([*command, "up", "--dir", str(directory)], capture_output=True, text=True, env=env,
                               cwd=ROOT, timeout=60)
        assert again.returncode == 1 and "already holds a cluster" in again.stderr
    finally:
        down = subprocess.run([*command, "down", "--dir", str(directory)], capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=120)
    assert down.returncode == 0, down.stderr
    assert "stopped 5 components" in down.stderr
    assert leftover_processes(str(directory)) == []
