"""The cloud provider on the real API server and kube-scheduler, with its simulated power backend
(a machine "powered on" becomes a KWOK Node after its boot delay; "powered off" its Node is
deleted), driven over mutual TLS by a client built from the same proto as cluster-autoscaler's.
The real cluster-autoscaler could not be built here (the Go module proxy refuses
k8s.io/autoscaler/cluster-autoscaler), so this test makes CA's calls itself, in CA's order:
pending pods → IncreaseSize → the Node registers → kube-scheduler places the pods; then the node
cordoned: DeleteNodes refused while a pod remains, accepted once it is gone → the Node removed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from benchmarks.harness.expander_grpc import self_signed
from rl.cluster.api import ApiError
from rl.cluster.controlplane import Cluster
from scheduler.autoscaler.protos import externalgrpc_pb2 as pb
from scheduler.autoscaler.provider.kubeside import KubeSide
from scheduler.autoscaler.provider.machines import Fleet
from scheduler.autoscaler.provider.service import CloudProviderService, start_server
from scheduler.autoscaler.provider.settings import parse_settings
from scheduler.autoscaler.provider.simulated import on_the_api
from scheduler.cluster import kube
from tests.helpers.cloud_provider import CloudProviderClient
from tests.helpers.e2e_cluster import eventually

GROUP = "e2e-bm"
MACHINES = ("e2e-bm-0", "e2e-bm-1")


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeSelector": {"kubejoule.io/node-group": GROUP}, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "registry.invalid/none", "resources": {"requests": {"cpu": "3"}}}]},
    }


@pytest.fixture
def provider(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[CloudProviderClient, Fleet]]:
    settings = parse_settings({
        "backend": "simulated", "simulated_boot_seconds": 2, "allow": list(MACHINES),
        "groups": [{"id": GROUP, "min": 0, "max": 2, "capacity": {"cpu": "4", "memory": "8Gi", "pods": "20"},
                    "machines": [{"node": n} for n in MACHINES]}],
    })
    side = KubeSide(kube.make_api_client(kubeconfig=str(cluster.kubeconfig)))
    backend = on_the_api(side, 2)
    fleet = Fleet(settings, backend, side)
    fleet.refresh()
    (tmp_path / "client").mkdir()
    server_tls, client_tls = self_signed(tmp_path), self_signed(tmp_path / "client", hosts=("ca",))
    server, port = start_server(CloudProviderService(fleet, refresh_min_seconds=0), "127.0.0.1", 0,
                                server_tls.cert_pem, server_tls.key_pem, client_tls.cert_pem)
    client = CloudProviderClient(f"localhost:{port}", server_tls.cert_pem, (client_tls.key_pem, client_tls.cert_pem))
    try:
        yield client, fleet
    finally:
        client.close()
        server.stop(grace=None)
        api = cluster.admin()
        for path in ("/api/v1/namespaces/default/pods/bm-web", *(f"/api/v1/nodes/{n}" for n in MACHINES)):
            with contextlib.suppress(ApiError):
                api.request("DELETE", path)


def test_pending_pod_powers_on_a_machine_and_a_drained_one_is_switched_off(
    cluster: Cluster, provider: tuple[CloudProviderClient, Fleet]
) -> None:
    client, fleet = provider
    api = cluster.admin()
    assert client.call("NodeGroupTargetSize", pb.NodeGroupTargetSizeRequest(id=GROUP)).targetSize == 0
    api.request("POST", "/api/v1/namespaces/default/pods", _pod("bm-web"))
    time.sleep(0.5)
    assert not api.request("GET", "/api/v1/namespaces/default/pods/bm-web")["spec"].get("nodeName")  # pending
    started = time.monotonic()
    client.call("NodeGroupIncreaseSize", pb.NodeGroupIncreaseSizeRequest(id=GROUP, delta=1))

    def registered() -> str | None:
        client.call("Refresh", pb.RefreshRequest())
        running = [i.id for i in client.call("NodeGroupNodes", pb.NodeGroupNodesRequest(id=GROUP)).instances
                   if i.status.instanceState == pb.InstanceStatus.instanceRunning]
        return running[0] if running else None

    instance = eventually(registered, 30, "the powered-on machine's Node registered and Ready", interval=0.5)
    machine = instance.removeprefix("kubejoule://")
    assert machine in MACHINES and time.monotonic() - started >= 2  # not before the boot delay
    placed = eventually(lambda: api.request("GET", "/api/v1/namespaces/default/pods/bm-web")["spec"].get("nodeName"),
                        30, "kube-scheduler placing the pending pod")
    assert placed == machine
    template = client.call("NodeGroupTemplateNodeInfo", pb.NodeGroupTemplateNodeInfoRequest(id=GROUP))
    assert template.nodeInfo.status.allocatable["cpu"].string == "4"

    # CA's scale-down: it taints the node, drains it, then calls DeleteNodes.
    api.request("PATCH", f"/api/v1/nodes/{machine}", {"spec": {"taints": [
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]}},
        content_type="application/strategic-merge-patch+json")
    delete = pb.NodeGroupDeleteNodesRequest(id=GROUP, nodes=[pb.ExternalGrpcNode(name=machine, providerID=instance)])
    with pytest.raises(grpc.RpcError) as refused:
        client.call("NodeGroupDeleteNodes", delete)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "default/bm-web" in (refused.value.details() or "")
    assert api.request("GET", f"/api/v1/nodes/{machine}")["metadata"]["name"] == machine  # still there
    api.request("DELETE", "/api/v1/namespaces/default/pods/bm-web?gracePeriodSeconds=0")
    eventually(lambda: not api.exists("/api/v1/namespaces/default/pods/bm-web"), 30, "the pod gone")
    client.call("NodeGroupDeleteNodes", delete)
    client.call("Refresh", pb.RefreshRequest())
    assert not api.exists(f"/api/v1/nodes/{machine}")
    assert client.call("NodeGroupTargetSize", pb.NodeGroupTargetSizeRequest(id=GROUP)).targetSize == 0
    reasons = [e["reason"] for e in api.request("GET", "/api/v1/namespaces/default/events")["items"]
               if e["involvedObject"]["name"] == machine]
    assert {"PoweringOn", "PoweredOn", "PowerOffRefused", "PoweringOff", "PoweredOff"} <= set(reasons)



def test_the_command_serves_with_the_simulated_backend(cluster: Cluster, tmp_path: Path) -> None:
    import subprocess
    import sys

    import yaml

    from benchmarks.harness.processes import free_port, stop

    tls = self_signed(tmp_path)
    config = tmp_path / "provider.yaml"
    config.write_text(yaml.safe_dump({
        "backend": "simulated", "shadow": True, "allow": ["e2e-cli-0"],
        "groups": [{"id": "e2e-cli", "min": 0, "max": 1, "machines": [{"node": "e2e-cli-0"}]}],
    }))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cmd.cli", "cloud-provider", "--provider-config", str(config),
         "--tls-cert", str(tls.cert_path), "--tls-key", str(tls.key_path), "--listen", f"127.0.0.1:{port}",
         "--metrics-listen", "off", "--kubeconfig", str(cluster.kubeconfig)],
        cwd=Path(__file__).resolve().parents[2], stderr=subprocess.PIPE, text=True,
    )
    client = CloudProviderClient(f"localhost:{port}", tls.cert_pem)
    try:
        def groups() -> list[str] | None:
            try:
                return [g.id for g in client.call("NodeGroups", pb.NodeGroupsRequest(), timeout=2).nodeGroups]
            except grpc.RpcError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                return None

        assert eventually(groups, 20, "the cloud-provider command answering NodeGroups", interval=0.3) == ["e2e-cli"]
        with pytest.raises(grpc.RpcError, match="shadow mode: would power on e2e-cli-0"):
            client.call("NodeGroupIncreaseSize", pb.NodeGroupIncreaseSizeRequest(id="e2e-cli", delta=1))
        assert not cluster.admin().exists("/api/v1/nodes/e2e-cli-0")
    finally:
        client.close()
        stop(process)
