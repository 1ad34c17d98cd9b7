"""The agent's PodResources client (gRPC's wire protocol over h2) on a real Unix socket, against
grpcio's server from the same .proto (benchmarks/harness/podresources_server.py), and the committed
protobuf code: it is what the .proto generates, with the kubelet's package, service, method,
names and field numbers."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from agent.device.nvml import GpuDevice
from agent.device.podresources import METHOD, PodResourcesClient
from agent.protos import generate, podresources_pb2
from benchmarks.harness.podresources_server import GPU, serving

H100 = GpuDevice(0, "GPU-aaaa", "NVIDIA H100")
A10 = GpuDevice(1, "GPU-bbbb", "NVIDIA A10")


def socket_path(tmp_path: Path) -> Path:
    return tmp_path / "kubelet.sock"


def test_list_gives_each_gpus_holders_by_uuid_or_index_and_marks_replicas(tmp_path: Path) -> None:
    pods = [
        ("ml", "train-0", "trainer", GPU, ["GPU-aaaa"]),
        ("web", "infer-1", "server", GPU, ["1::0"]),  # time-slicing replicas of GPU 1 (index ids)
        ("web", "infer-2", "server", GPU, ["1::1"]),
        ("net", "sriov", "app", "intel.com/sriov", ["0000:3b:00.1"]),  # another plugin's device: not a GPU
    ]
    with serving(socket_path(tmp_path), pods) as server:
        client = PodResourcesClient(socket_path(tmp_path))
        allocations = client.list()
        client.close()
    assert allocations is not None and allocations.error is None and server.calls == 1
    holders, replicated = allocations.holders(H100)
    assert [(h.namespace, h.pod, h.container) for h in holders] == [("ml", "train-0", "trainer")] and not replicated
    holders, replicated = allocations.holders(A10)
    assert [h.pod for h in holders] == ["infer-1", "infer-2"] and replicated
    assert allocations.holders(GpuDevice(2, "GPU-cccc", "x")) == ((), False)
    assert set(allocations.devices) == {"GPU-aaaa", "1"}


def test_no_socket_means_no_kubelet_here_a_failing_or_slow_kubelet_is_an_error(tmp_path: Path) -> None:
    assert PodResourcesClient(tmp_path / "absent.sock").list() is None
    with serving(socket_path(tmp_path), [("ml", "a", "c", GPU, ["GPU-aaaa"])]) as server:
        client = PodResourcesClient(socket_path(tmp_path), timeout_seconds=0.5)
        server.fail = True
        failed = client.list()
        assert failed is not None and failed.devices == {} and "UNAVAILABLE" in (failed.error or "")
        server.fail, server.delay_seconds = False, 2.0
        started = time.monotonic()
        slow = client.list()
        assert slow is not None and "DEADLINE_EXCEEDED" in (slow.error or "")
        assert time.monotonic() - started < 1.5
        server.delay_seconds = 0.0
        again = client.list()  # the same channel works again once the kubelet answers
        assert again is not None and again.error is None and again.holders(H100)[0]
        client.close()


def test_list_is_called_again_only_when_the_pods_changed_or_it_is_old(tmp_path: Path) -> None:
    with serving(socket_path(tmp_path), [("ml", "a", "c", GPU, ["GPU-aaaa"])]) as server:
        client = PodResourcesClient(socket_path(tmp_path), refresh_seconds=0.5)
        pods = frozenset({"uid-a"})
        first = client.list(pods)
        assert client.list(pods) is first and server.calls == 1  # the same pods, 0.5 s not passed
        assert client.list(frozenset({"uid-a", "uid-b"})) is not first and server.calls == 2  # a pod came
        time.sleep(0.6)
        client.list(frozenset({"uid-a", "uid-b"}))
        assert server.calls == 3  # old
        server.fail = True
        failed = client.list(frozenset({"uid-a"}))
        assert failed is not None and failed.error is not None
        server.fail = False
        assert client.list(frozenset({"uid-a"})).error is None and server.calls == 5  # a failure is retried


def test_a_socket_that_is_no_grpc_server_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "not-grpc.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)

    def answer_garbage() -> None:
        connection, _ = listener.accept()
        connection.recv(1024)
        connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        connection.close()

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    allocations = PodResourcesClient(path, timeout_seconds=2).list()
    thread.join(5)
    listener.close()
    assert allocations is not None and allocations.devices == {}
    assert "not an HTTP/2 gRPC server" in (allocations.error or "") or "UNAVAILABLE" in (allocations.error or "")


def test_regenerating_gives_the_committed_files(tmp_path: Path) -> None:
    generate.generate(tmp_path)
    out = tmp_path / generate.PROTO_DIR.relative_to(generate.ROOT)
    generated = sorted(p.name for p in out.iterdir())
    committed = sorted(p.name for p in generate.PROTO_DIR.iterdir() if "_pb2." in p.name)
    assert generated == committed
    for name in generated:
        assert (out / name).read_bytes() == (generate.PROTO_DIR / name).read_bytes(), (
            f"{name} differs from what its .proto generates: run `make protos`"
        )


def fields(message: type) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]


def test_the_kubelets_names_and_numbers() -> None:
    # k8s.io/kubelet pkg/apis/podresources/v1/api.proto (kubernetes/kubelet 63b3249)
    service = podresources_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister" and METHOD == "/v1.PodResourcesLister/List"
    method = service.methods_by_name["List"]
    assert method.input_type.full_name == "v1.ListPodResourcesRequest"
    assert method.output_type.full_name == "v1.ListPodResourcesResponse"
    assert fields(podresources_pb2.ListPodResourcesResponse) == {"pod_resources": 1}
    assert fields(podresources_pb2.PodResources) == {"name": 1, "namespace": 2, "containers": 3, "cpu_ids": 4,
                                                     "memory": 5}
    assert fields(podresources_pb2.ContainerResources) == {"name": 1, "devices": 2, "cpu_ids": 3, "memory": 4,
                                                           "dynamic_resources": 5}
    assert fields(podresources_pb2.ContainerDevices) == {"resource_name": 1, "device_ids": 2, "topology": 3}
    assert fields(podresources_pb2.ContainerMemory) == {"memory_type": 1, "size": 2, "topology": 3}
    assert fields(podresources_pb2.TopologyInfo) == {"nodes": 1}
    assert fields(podresources_pb2.NUMANode) == {"ID": 1}
    assert fields(podresources_pb2.DynamicResource) == {"claim_name": 2, "claim_namespace": 3, "claim_resources": 4}
    assert fields(podresources_pb2.ClaimResource) == {"cdi_devices": 1, "driver_name": 2, "pool_name": 3,
                                                      "device_name": 4, "share_id": 5}
    assert fields(podresources_pb2.CDIDevice) == {"name": 1}
