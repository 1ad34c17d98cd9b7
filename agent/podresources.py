"""Which pod holds which GPU: the kubelet's PodResources API, `List` over its Unix socket.

The kubelet serves `v1.PodResourcesLister` on `/var/lib/kubelet/pod-resources/kubelet.sock`
(the DaemonSet mounts the directory read-only). `List` gives every pod on the node by namespace
and name (no UID: the pod watch's names give it) with each container's device-plugin devices.
NVIDIA's device plugin names GPUs `nvidia.com/gpu` with their UUIDs as device ids (or their
indexes, with `DEVICE_ID_STRATEGY=index`); with time-slicing each GPU is offered as replicas
`<id>::<n>`, so a replica id means the GPU is shared. MIG slices (`nvidia.com/mig-…`) and Dynamic
Resource Allocation claims are not read: such GPUs are split by their processes, or reported as
gaps (agent/gpu_power.py).

The protobuf messages are generated from agent/protos/podresources.proto (`make protos`); the
call is grpcio's, over a channel opened once and kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.nvml import GpuDevice

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
METHOD = "/v1.PodResourcesLister/List"
GPU_RESOURCE = "nvidia.com/gpu"
REPLICA_SEPARATOR = "::"
MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # the kubelet's own limit for this API's messages
DEFAULT_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class Allocations:
    """GPU device ids (UUID or index, replica suffix removed) → the containers they are allocated
    to, and whether they were allocated as time-slicing replicas. `error`: List failed (which
    GPU is held is unknown this interval)."""

    devices: dict[str, tuple[Holder, ...]] = field(default_factory=dict)
    replicated: frozenset[str] = frozenset()
    error: str | None = None

    def holders(self, device: GpuDevice) -> tuple[tuple[Holder, ...], bool]:
        """The containers holding DEVICE (by its UUID or its index), and whether it is replicated."""
        for key in (device.uuid, str(device.index)):
            if key and key in self.devices:
                return self.devices[key], key in self.replicated
        return (), False


def allocations_from(response: Any) -> Allocations:
    """Allocations from a ListPodResourcesResponse."""
    devices: dict[str, list[Holder]] = {}
    replicated: set[str] = set()
    for pod in response.pod_resources:
        for container in pod.containers:
            for group in container.devices:
                if group.resource_name != GPU_RESOURCE:
                    continue
                for device_id in group.device_ids:
                    base, separator, _ = device_id.partition(REPLICA_SEPARATOR)
                    if separator:
                        replicated.add(base)
                    holder = Holder(pod.namespace, pod.name, container.name)
                    if holder not in devices.setdefault(base, []):
                        devices[base].append(holder)
    return Allocations({key: tuple(value) for key, value in devices.items()}, frozenset(replicated))


class PodResourcesClient:
    """`List` on the kubelet's socket; a socket that does not exist means no kubelet allocates
    devices here (a host outside Kubernetes): `list()` then answers None."""

    def __init__(self, socket: Path = DEFAULT_SOCKET, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self.socket = socket
        self.timeout_seconds = timeout_seconds
        self._channel: Any = None
        self._call: Any = None

    def _connect(self) -> None:
        import grpc

        from agent.protos import podresources_pb2

        self._channel = grpc.insecure_channel(
            f"unix://{self.socket}", options=[("grpc.max_receive_message_length", MAX_RESPONSE_BYTES)]
        )
        self._call = self._channel.unary_unary(
            METHOD,
            request_serializer=podresources_pb2.ListPodResourcesRequest.SerializeToString,
            response_deserializer=podresources_pb2.ListPodResourcesResponse.FromString,
        )
        self._request = podresources_pb2.ListPodResourcesRequest()

    def list(self) -> Allocations | None:
        if not self.socket.exists():
            return None
        import grpc

        if self._call is None:
            self._connect()
        try:
            response = self._call(self._request, timeout=self.timeout_seconds)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            name = code.name if code is not None else "error"
            return Allocations(error=f"PodResources List on {self.socket} failed: {name}: {details}"[:500])
        return allocations_from(response)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = self._call = None
