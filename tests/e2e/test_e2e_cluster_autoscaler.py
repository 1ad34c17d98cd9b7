"""`kubejoule-rl cluster up --autoscaler` as people run it: the control plane with the real
cluster-autoscaler (rl/cluster/autoscaled_plane.py) in real time on a tiny nodes file — one group
between 0 and 2 nodes, one always on. A pod that fits only the scalable group makes
cluster-autoscaler add a node there (after its 10 s scan); KWOK makes it Ready after the
simulator's default boot (120 s) and kube-scheduler binds the pod to it. `cluster down` then leaves
no process of the cluster, cluster-autoscaler included. About 3 minutes.

cluster-autoscaler is the one real component CI cannot have: the Go module proxy answers 403
"This module version is not available" for k8s.io/autoscaler/cluster-autoscaler, and CI reaches
only the registries. This test runs when $KUBEJOULE_CA_BIN names a binary built from its GitHub
source (tools/k8s/build-ca-from-source.sh) and is skipped otherwise, saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rl.cluster.api import Api
from rl.cluster.controlplane import load
from rl.cluster.kwok import GROUP_LABEL
from tests.helpers.e2e_cluster import eventually, leftover_processes

ROOT = Path(__file__).resolve().parents[2]
NODES = (
    "- {name: scaled, count: 2, min_count: 0, cpu_cores: 8, memory_gib: 16, power: {idle_watts: 50, max_watts: 150}}\n"
    "- {name: base, count: 1, min_count: 1, cpu_cores: 2, memory_gib: 4, power: {idle_watts: 20, max_watts: 60}}\n"
)
SCALE_UP_TIMEOUT_S = 90.0  # its scan (10 s), the new pod's 2 s, the provider's node
BIND_TIMEOUT_S = 240.0  # the boot (120 s), the not-ready taint's removal, the scheduler's retry


def _pod(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/none", "resources": {"requests": {"cpu": cpu}}}]},
    }


def _scaled_nodes(api: Api) -> list[str]:
    items = api.request("GET", "/api/v1/nodes").get("items", [])
    return [n["metadata"]["name"] for n in items if (n["metadata"].get("labels") or {}).get(GROUP_LABEL) == "scaled"]


@pytest.mark.timeout(600)
def test_cluster_up_with_the_autoscaler_adds_a_node_for_a_pending_pod(k8s_bin: Path, ca_bin: Path,
                                                                      tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    directory = tmp_path / "plane"
    env = {**os.environ, "KUBEJOULE_K8S_BIN": str(k8s_bin)}
    command = [sys.executable, "-m", "rl.cmd.cli", "cluster"]
    try:
        up = subprocess.run([*command, "up", "--dir", str(directory), "--nodes", str(nodes), "--autoscaler",
                             "--ca-bin", str(ca_bin)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=360)
        assert up.returncode == 0, up.stderr
        assert "starting cluster-autoscaler" in up.stderr
        cluster = load(directory)
        assert "cluster-autoscaler" in cluster.processes
        api = cluster.admin()
        assert _scaled_nodes(api) == []  # min 0: nothing of it on at t = 0
        assert api.exists("/api/v1/nodes/base-0")
        api.request("POST", "/api/v1/namespaces/default/pods", _pod("needs-scaled", "4"))  # base has 2 cores
        added = eventually(lambda: _scaled_nodes(api), SCALE_UP_TIMEOUT_S, "cluster-autoscaler adds a scaled node",
                           interval=1.0)
        assert len(added) == 1, added

        def bound() -> str | None:
            pod = api.request("GET", "/api/v1/namespaces/default/pods/needs-scaled")
            return pod["spec"].get("nodeName")

        assert eventually(bound, BIND_TIMEOUT_S, "the pod bound to the new node", interval=1.0) == added[0]
        assert not cluster.dead(), cluster.dead()
    finally:
        down = subprocess.run([*command, "down", "--dir", str(directory)], capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=120)
    assert down.returncode == 0, down.stderr
    assert "stopped 6 components" in down.stderr and "cluster-autoscaler" in down.stderr
    assert leftover_processes(str(directory)) == []
