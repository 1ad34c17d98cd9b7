"""The cloud provider's externalgrpc service over mutual TLS on loopback, called by a client
built from the same .proto as cluster-autoscaler's is (the real cluster-autoscaler could not be
built here: the Go module proxy refuses k8s.io/autoscaler/cluster-autoscaler)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from benchmarks.harness.expander_grpc import TLSFiles, self_signed
from scheduler.autoscaler.protos import externalgrpc_pb2 as pb
from scheduler.autoscaler.protos import k8s_core_v1_pb2
from scheduler.autoscaler.provider.backend import RESET_GRACEFUL, RESET_ON
from scheduler.autoscaler.provider.machines import Fleet
from scheduler.autoscaler.provider.service import CloudProviderService, start_server
from tests.helpers.cloud_provider import (
    Clock,
    CloudProviderClient,
    FakeBackend,
    FakeKube,
    node,
    pod,
    settings,
)


@pytest.fixture(scope="module")
def server_tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return self_signed(tmp_path_factory.mktemp("server"))


@pytest.fixture(scope="module")
def client_tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return self_signed(tmp_path_factory.mktemp("client"), hosts=("cluster-autoscaler",))


class Served:
    def __init__(self, fleet: Fleet, backend: FakeBackend, kube: FakeKube, clock: Clock, client: CloudProviderClient) -> None:
        self.fleet, self.backend, self.kube, self.clock, self.client = fleet, backend, kube, clock, client


@pytest.fixture
def served(server_tls: TLSFiles, client_tls: TLSFiles) -> Iterator[Served]:
    backend, kube, clock = FakeBackend(("m0", "m1")), FakeKube(), Clock()
    kube.nodes.update(m0=node("m0"), m1=node("m1"))
    fleet = Fleet(settings(), backend, kube, clock=clock)
    fleet.refresh()
    server, port = start_server(CloudProviderService(fleet, refresh_min_seconds=0), "127.0.0.1", 0,
                                server_tls.cert_pem, server_tls.key_pem, client_ca_pem=client_tls.cert_pem)
    client = CloudProviderClient(f"localhost:{port}", server_tls.cert_pem, (client_tls.key_pem, client_tls.cert_pem))
    try:
        yield Served(fleet, backend, kube, clock, client)
    finally:
        client.close()
        server.stop(grace=None)


def test_groups_nodes_and_template_as_ca_reads_them(served: Served) -> None:
    c = served.client
    (group,) = c.call("NodeGroups", pb.NodeGroupsRequest()).nodeGroups
    assert (group.id, group.minSize, group.maxSize) == ("rack", 1, 4)
    found = c.call("NodeGroupForNode", pb.NodeGroupForNodeRequest(node=pb.ExternalGrpcNode(name="m1", providerID="kubejoule://m1")))
    assert found.nodeGroup.id == "rack"
    stranger = c.call("NodeGroupForNode", pb.NodeGroupForNodeRequest(node=pb.ExternalGrpcNode(name="cp-0")))
    assert stranger.nodeGroup.id == ""  # not ours: CA leaves it alone
    assert c.call("NodeGroupTargetSize", pb.NodeGroupTargetSizeRequest(id="rack")).targetSize == 2
    instances = c.call("NodeGroupNodes", pb.NodeGroupNodesRequest(id="rack")).instances
    assert [(i.id, i.status.instanceState) for i in instances] == [
        ("kubejoule://m0", pb.InstanceStatus.instanceRunning), ("kubejoule://m1", pb.InstanceStatus.instanceRunning)]
    template = c.call("NodeGroupTemplateNodeInfo", pb.NodeGroupTemplateNodeInfoRequest(id="rack"))
    decoded = k8s_core_v1_pb2.Node.FromString(template.nodeBytes)
    assert decoded == template.nodeInfo
    assert decoded.metadata.name == "template-node-for-rack"
    assert decoded.status.allocatable["cpu"].string == "31"
    assert decoded.metadata.labels["kubejoule.io/node-group"] == "rack"
    defaults = pb.NodeGroupAutoscalingOptions(scaleDownUtilizationThreshold=0.5)
    defaults.MaxNodeProvisionDuration.FromSeconds(300)
    options = c.call("NodeGroupGetOptions", pb.NodeGroupAutoscalingOptionsRequest(id="rack", defaults=defaults))
    got = options.nodeGroupAutoscalingOptions
    assert got.scaleDownUtilizationThreshold == 0.5 and got.MaxNodeProvisionDuration.seconds == 600
    assert c.call("GPULabel", pb.GPULabelRequest()).label == ""
    with pytest.raises(grpc.RpcError) as raised:
        c.call("PricingNodePrice", pb.PricingNodePriceRequest())
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_the_service_answers_every_rpc_but_the_pricing_ones() -> None:
    service = CloudProviderService(Fleet(settings(), FakeBackend(), FakeKube()))
    rpcs = {m.name for m in pb.DESCRIPTOR.services_by_name["CloudProvider"].methods}
    assert rpcs - set(service.answers()) == {"PricingNodePrice", "PricingPodPrice"}
    assert set(service.answers()) <= rpcs


def test_scale_up_and_down_through_the_service(served: Served) -> None:
    c, backend, kube = served.client, served.backend, served.kube
    c.call("NodeGroupIncreaseSize", pb.NodeGroupIncreaseSizeRequest(id="rack", delta=1))
    assert backend.resets == [("m2", RESET_ON)]  # m2 the only allowed machine off
    creating = c.call("NodeGroupNodes", pb.NodeGroupNodesRequest(id="rack")).instances[-1]
    assert creating.status.instanceState == pb.InstanceStatus.instanceCreating
    kube.nodes["m2"] = node("m2")
    c.call("Refresh", pb.RefreshRequest())
    assert served.fleet.tracked["m2"].state == "running"
    kube.nodes["m1"] = node("m1", taint="ToBeDeletedByClusterAutoscaler")
    kube.pods.append(pod("web", "m1"))
    request = pb.NodeGroupDeleteNodesRequest(id="rack", nodes=[pb.ExternalGrpcNode(name="m1", providerID="kubejoule://m1")])
    with pytest.raises(grpc.RpcError) as refused:
        c.call("NodeGroupDeleteNodes", request)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "default/web" in (refused.value.details() or "")
    kube.pods.clear()
    c.call("NodeGroupDeleteNodes", request)
    assert backend.resets[-1] == ("m1", RESET_GRACEFUL)
    assert served.fleet.metrics.value("kubejoule_cloudprovider_requests_total",
                                      {"method": "NodeGroupDeleteNodes", "code": "FAILED_PRECONDITION"}) == 1


def test_a_failed_machine_reaches_ca_as_an_instance_error(served: Served) -> None:
    served.backend.ignore = {"m2"}
    served.client.call("NodeGroupIncreaseSize", pb.NodeGroupIncreaseSizeRequest(id="rack", delta=1))
    served.clock.now += 61
    served.client.call("Refresh", pb.RefreshRequest())
    failed = served.client.call("NodeGroupNodes", pb.NodeGroupNodesRequest(id="rack")).instances[-1]
    assert failed.id == "kubejoule://m2"
    assert failed.status.errorInfo.instanceErrorClass == 99
    assert "still off" in failed.status.errorInfo.errorMessage


def test_unknown_group_and_a_client_without_certificate(served: Served, server_tls: TLSFiles) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        served.client.call("NodeGroupTargetSize", pb.NodeGroupTargetSizeRequest(id="nope"))
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    target = served.client.channel._channel.target().decode()  # type: ignore[attr-defined]
    anonymous = CloudProviderClient(target, server_tls.cert_pem)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            anonymous.call("NodeGroups", pb.NodeGroupsRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        anonymous.close()


def test_the_cli_refuses_a_bmc_that_is_not_redfish_naming_the_key(tmp_path: Path) -> None:
    from scheduler.autoscaler.provider.backend import BackendError
    from scheduler.cmd.provider_cli import probe
    from scheduler.config.parse import ConfigError

    class NotRedfish(FakeBackend):
        def power_state(self, machine):  # type: ignore[no-untyped-def]
            if machine.node == "m2":
                raise BackendError("https://x/redfish/v1/Systems/1: not a Redfish ComputerSystem (no PowerState)", refused=True)
            return super().power_state(machine)

    with pytest.raises(ConfigError, match=r"groups\[0\]\.machines\[2\]\.bmc \(m2\): .*not a Redfish ComputerSystem"):
        probe(settings(), NotRedfish())
    silent = FakeBackend()
    silent.silent = {"m1"}
    assert probe(settings(), silent) == ["m1: BMC of m1: no answer within 10 s"]


def test_a_template_from_the_configuration_before_any_node_is_seen(server_tls: TLSFiles, client_tls: TLSFiles) -> None:
    from scheduler.autoscaler.provider.settings import parse_settings

    bare = settings()
    configured = parse_settings({"backend": "simulated", "allow": [],
                                 "groups": [{"id": "rack", "capacity": {"cpu": "24", "memory": "12Gi"},
                                             "labels": {"node.kubernetes.io/instance-type": "x3550"},
                                             "machines": [{"node": "m0"}]}]})
    answers = []
    for chosen in (bare, configured):
        fleet = Fleet(chosen, FakeBackend(), FakeKube())
        fleet.refresh()
        server, port = start_server(CloudProviderService(fleet), "127.0.0.1", 0, server_tls.cert_pem, server_tls.key_pem)
        client = CloudProviderClient(f"localhost:{port}", server_tls.cert_pem)
        try:
            answers.append(client.call("NodeGroupTemplateNodeInfo", pb.NodeGroupTemplateNodeInfoRequest(id="rack")))
        except grpc.RpcError as exc:
            answers.append(exc.code())
        finally:
            client.close()
            server.stop(grace=None)
    assert answers[0] == grpc.StatusCode.UNIMPLEMENTED  # CA then builds the template itself
    node = k8s_core_v1_pb2.Node.FromString(answers[1].nodeBytes)
    assert node.status.capacity["cpu"].string == "24"
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == "x3550"
