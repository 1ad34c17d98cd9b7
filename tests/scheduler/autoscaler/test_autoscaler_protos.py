"""The committed protobuf code of the gRPC expander is what its .proto files generate, and the
messages keep the upstream package, service, method, names and field numbers."""

from __future__ import annotations

from pathlib import Path

from scheduler.autoscaler.protos import expander_pb2, generate, k8s_core_v1_pb2, k8s_meta_v1_pb2

PROTO_DIR = Path(generate.__file__).resolve().parent


def test_regenerating_gives_the_committed_files(tmp_path: Path) -> None:
    generate.generate(tmp_path)
    out = tmp_path / PROTO_DIR.relative_to(generate.ROOT)
    generated = sorted(p.name for p in out.iterdir())
    committed = sorted(p.name for p in PROTO_DIR.iterdir() if "_pb2." in p.name)
    assert generated == committed
    for name in generated:
        assert (out / name).read_bytes() == (PROTO_DIR / name).read_bytes(), (
            f"{name} differs from what its .proto generates: run `make protos`"
        )


def fields(message: type) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]


def test_cluster_autoscalers_names_and_numbers() -> None:
    # cluster-autoscaler expander/grpcplugin/protos/expander.proto (1.34.2–1.34.5 carry all five
    # Option fields and all three request fields; 1.35+ drop 2 and 4).
    service = expander_pb2.DESCRIPTOR.services_by_name["Expander"]
    assert service.full_name == "grpcplugin.Expander"
    method = service.methods_by_name["BestOptions"]
    assert method.input_type.full_name == "grpcplugin.BestOptionsRequest"
    assert method.output_type.full_name == "grpcplugin.BestOptionsResponse"
    assert fields(expander_pb2.BestOptionsRequest) == {"options": 1, "nodeMap": 2, "nodeBytesMap": 3}
    assert fields(expander_pb2.BestOptionsResponse) == {"options": 1}
    assert fields(expander_pb2.Option) == {
        "nodeGroupId": 1, "nodeCount": 2, "debug": 3, "pod": 4, "podBytes": 5,
    }
    # k8s.io/api core/v1 and apimachinery meta/v1 generated.proto.
    assert k8s_core_v1_pb2.Node.DESCRIPTOR.full_name == "k8s.io.api.core.v1.Node"
    assert fields(k8s_core_v1_pb2.Node) == {"metadata": 1, "spec": 2, "status": 3}
    assert fields(k8s_core_v1_pb2.NodeStatus) == {"capacity": 1, "allocatable": 2, "conditions": 4}
    assert fields(k8s_core_v1_pb2.NodeSpec) == {"unschedulable": 4, "taints": 5}
    assert fields(k8s_core_v1_pb2.PodSpec) == {
        "containers": 2, "nodeName": 10, "schedulerName": 19, "initContainers": 20, "overhead": 32,
    }
    assert fields(k8s_core_v1_pb2.Container) == {"name": 1, "resources": 8, "restartPolicy": 24}
    assert fields(k8s_core_v1_pb2.ResourceRequirements) == {"requests": 2}
    assert fields(k8s_meta_v1_pb2.ObjectMeta) == {
        "name": 1, "namespace": 3, "uid": 5, "labels": 11, "annotations": 12,
    }


def test_the_cloud_providers_names_and_numbers() -> None:
    # cluster-autoscaler cloudprovider/externalgrpc/protos/externalgrpc.proto (1.36.1; field 1
    # of the template answer as in 1.33.0–1.34.x).
    from scheduler.autoscaler.protos import externalgrpc_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["CloudProvider"]
    assert service.full_name == "clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider"
    assert [m.name for m in service.methods] == [
        "NodeGroups", "NodeGroupForNode", "PricingNodePrice", "PricingPodPrice", "GPULabel",
        "GetAvailableGPUTypes", "Cleanup", "Refresh", "NodeGroupTargetSize",
        "NodeGroupIncreaseSize", "NodeGroupDeleteNodes", "NodeGroupDecreaseTargetSize",
        "NodeGroupNodes", "NodeGroupTemplateNodeInfo", "NodeGroupGetOptions",
    ]
    assert fields(pb.NodeGroup) == {"id": 1, "minSize": 2, "maxSize": 3, "debug": 4}
    assert fields(pb.ExternalGrpcNode) == {"providerID": 1, "name": 2, "labels": 3, "annotations": 4}
    assert fields(pb.NodeGroupIncreaseSizeRequest) == {"delta": 1, "id": 2}
    assert fields(pb.NodeGroupDeleteNodesRequest) == {"nodes": 1, "id": 2}
    assert fields(pb.Instance) == {"id": 1, "status": 2}
    assert fields(pb.InstanceStatus) == {"instanceState": 1, "errorInfo": 2}
    assert fields(pb.InstanceErrorInfo) == {"errorCode": 1, "errorMessage": 2, "instanceErrorClass": 3}
    assert fields(pb.NodeGroupTemplateNodeInfoResponse) == {"nodeInfo": 1, "nodeBytes": 2}
    assert fields(pb.PricingPodPriceRequest) == {"pod_bytes": 4, "startTimestamp": 5, "endTimestamp": 6}
    assert fields(pb.NodeGroupAutoscalingOptions) == {
        "scaleDownUtilizationThreshold": 1, "scaleDownGpuUtilizationThreshold": 2,
        "zeroOrMaxNodeScaling": 6, "ignoreDaemonSetsUtilization": 7,
        "scaleDownUnneededDuration": 8, "scaleDownUnreadyDuration": 9, "MaxNodeProvisionDuration": 10,
    }
    states = pb.InstanceStatus.InstanceState
    assert [states.Name(i) for i in range(4)] == [
        "unspecified", "instanceRunning", "instanceCreating", "instanceDeleting",
    ]
