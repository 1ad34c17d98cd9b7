"""Which pod holds which GPU: the kubelet's PodResources API, `List` over its Unix socket.

The kubelet serves `v1.PodResourcesLister` on `/var/lib/kubelet/pod-resources/kubelet.sock`
(the DaemonSet mounts the directory read-only). `List` gives every pod on the node by namespace
and name (no UID: the pod watch's names give it) with each container's device-plugin devices.
NVIDIA's device plugin names GPUs `nvidia.com/gpu` with their UUIDs as device ids (or their
indexes, with `DEVICE_ID_STRATEGY=index`); with time-slicing each GPU is offered as replicas
`<id>::<n>`, so a replica id means the GPU is shared. MIG slices (`nvidia.com/mig-…`) and Dynamic
Resource Allocation claims are not read: such GPUs are split by their processes, or reported as
gaps (agent/monitor/gpu_power.py).

The protobuf messages are generated from agent/protos/podresources.proto (`make protos`). The call
is gRPC's wire protocol (a POST of one length-prefixed message over HTTP/2, the status in the
trailers) spoken with h2, the pure-Python HTTP/2 library, on a fresh connection each time: grpcio
would add 13 MB to the agent (its core and the threads its first channel starts) and about 3 ms of
CPU per call on those threads, for one small call every 30 s. `List` is called when the agent's
pods changed (a pod's cgroup came or went) and at least every 30 s, not every sample.
"""

from __future__ import annotations

import socket
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.device.nvml import GpuDevice

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
METHOD = "/v1.PodResourcesLister/List"
GPU_RESOURCE = "nvidia.com/gpu"
REPLICA_SEPARATOR = "::"
MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # the kubelet's own limit for this API's messages
DEFAULT_TIMEOUT_SECONDS = 2.0
REFRESH_SECONDS = 30.0  # List at least this often (and whenever the node's pods changed)
# gRPC status codes (grpc/doc/statuscodes.md), by number, for the error messages
_STATUS = {1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
           7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
           16: "UNAUTHENTICATED"}


class RpcError(Exception):
    """A gRPC call that gave no message; `code` is the status name (UNAVAILABLE, DEADLINE_EXCEEDED, …)."""

    def __init__(self, code: str, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code


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


def unary_call(socket_path: Path, method: str, request: bytes, timeout_seconds: float,
               max_response_bytes: int = MAX_RESPONSE_BYTES) -> bytes:
    """One gRPC unary call over a Unix socket: the response message's bytes, or RpcError."""
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings

    deadline = time.monotonic() + timeout_seconds
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_seconds)
            sock.connect(str(socket_path))
            conn.initiate_connection()
            conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: max_response_bytes})
            conn.increment_flow_control_window(max_response_bytes)
            stream = conn.get_next_available_stream_id()
            conn.send_headers(stream, [
                (b":method", b"POST"), (b":scheme", b"http"), (b":path", method.encode()),
                (b":authority", b"localhost"), (b"content-type", b"application/grpc"), (b"te", b"trailers"),
                (b"grpc-timeout", f"{max(1, int(timeout_seconds * 1000))}m".encode()),
            ])
            conn.send_data(stream, b"\x00" + len(request).to_bytes(4, "big") + request, end_stream=True)
            sock.sendall(conn.data_to_send())
            body, headers, ended = bytearray(), {}, False
            while not ended:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                sock.settimeout(remaining)
                data = sock.recv(65536)
                if not data:
                    raise RpcError("UNAVAILABLE", "the connection closed before the answer ended")
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.DataReceived):
                        body += event.data
                        if len(body) > max_response_bytes + 5:
                            raise RpcError("RESOURCE_EXHAUSTED", f"an answer above {max_response_bytes} bytes")
                        conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                        headers.update(dict(event.headers))
                    elif isinstance(event, h2.events.StreamReset):
                        raise RpcError("UNAVAILABLE", f"the stream was reset (HTTP/2 error {event.error_code})")
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        raise RpcError("UNAVAILABLE", f"the server closed the connection (HTTP/2 error {event.error_code})")
                    elif isinstance(event, h2.events.StreamEnded):
                        ended = True
                pending = conn.data_to_send()
                if pending:
                    sock.sendall(pending)
    except TimeoutError:
        raise RpcError("DEADLINE_EXCEEDED", f"no answer within {timeout_seconds:g} s") from None
    except OSError as exc:
        raise RpcError("UNAVAILABLE", f"{socket_path}: {exc.strerror or exc}") from None
    except h2.exceptions.ProtocolError as exc:
        raise RpcError("INTERNAL", f"not an HTTP/2 gRPC server: {exc}") from None
    status = headers.get(b":status")
    if status != b"200":
        raise RpcError("UNKNOWN", f"HTTP status {status.decode(errors='replace') if status else 'missing'}")
    code = headers.get(b"grpc-status", b"")
    if code != b"0":
        message = urllib.parse.unquote(headers.get(b"grpc-message", b"").decode(errors="replace"))
        number = int(code) if code.isdigit() else 2
        raise RpcError(_STATUS.get(number, f"status {number}"), message or "no message")
    if len(body) < 5 or body[0] != 0 or int.from_bytes(body[1:5], "big") != len(body) - 5:
        raise RpcError("INTERNAL", "the answer is not one uncompressed gRPC message")
    return bytes(body[5:])


class PodResourcesClient:
    """`List` on the kubelet's socket, kept between calls and refreshed when the node's pods
    change or every REFRESH_SECONDS; a socket that does not exist means no kubelet allocates
    devices here (a host outside Kubernetes): `list()` then answers None."""

    def __init__(self, socket: Path = DEFAULT_SOCKET, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
                 refresh_seconds: float = REFRESH_SECONDS) -> None:
        self.socket = socket
        self.timeout_seconds = timeout_seconds
        self.refresh_seconds = refresh_seconds
        self.calls = 0
        self._last: tuple[float, frozenset[str], Allocations] | None = None

    def list(self, pods: frozenset[str] | None = None) -> Allocations | None:
        """The allocations: from the last call while the pods (uids) are the same and it is
        younger than `refresh_seconds` and did not fail, else from a new call."""
        if not self.socket.exists():
            self._last = None
            return None
        now, key = time.monotonic(), pods if pods is not None else frozenset()
        if self._last is not None and pods is not None:
            when, seen, allocations = self._last
            if seen == key and now - when < self.refresh_seconds and allocations.error is None:
                return allocations
        from agent.protos import podresources_pb2

        self.calls += 1
        try:
            data = unary_call(self.socket, METHOD, podresources_pb2.ListPodResourcesRequest().SerializeToString(),
                              self.timeout_seconds)
            allocations = allocations_from(podresources_pb2.ListPodResourcesResponse.FromString(data))
        except RpcError as exc:
            allocations = Allocations(error=f"PodResources List on {self.socket} failed: {exc}"[:500])
        except ValueError as exc:  # protobuf's DecodeError
            allocations = Allocations(error=f"PodResources List on {self.socket}: an answer that is not "
                                            f"a ListPodResourcesResponse: {exc}"[:500])
        self._last = (now, key, allocations)
        return allocations

    def close(self) -> None:
        self._last = None
