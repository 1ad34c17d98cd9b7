"""A PodResources server on a Unix socket, from the kubelet's API as agent/protos/podresources.proto
writes it: grpcio serving `v1.PodResourcesLister/List` with the pods a test gives it (or failing,
or answering late), as the kubelet serves /var/lib/kubelet/pod-resources/kubelet.sock."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from agent.protos import podresources_pb2

GPU = "nvidia.com/gpu"


@dataclass
class PodResourcesServer:
    """`pods`: (namespace, pod, container, resource name, device ids); `fail` aborts List with
    UNAVAILABLE; `delay_seconds` answers late. `calls` counts the List calls."""

    socket: Path
    pods: list[tuple[str, str, str, str, Sequence[str]]] = field(default_factory=list)
    fail: bool = False
    delay_seconds: float = 0.0
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def response(self) -> podresources_pb2.ListPodResourcesResponse:
        response = podresources_pb2.ListPodResourcesResponse()
        for namespace, pod, container, resource, ids in self.pods:
            entry = response.pod_resources.add(name=pod, namespace=namespace)
            holder = entry.containers.add(name=container)
            holder.cpu_ids.extend([2, 3])  # exclusive CPUs too, as a CPU-manager node lists them
            holder.devices.add(resource_name=resource, device_ids=list(ids))
        return response

    def handle(self, request: podresources_pb2.ListPodResourcesRequest, context: grpc.ServicerContext
               ) -> podresources_pb2.ListPodResourcesResponse:
        with self._lock:
            self.calls += 1
        if self.delay_seconds:
            time.sleep(self.delay_seconds)
        if self.fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the kubelet is restarting")
        return self.response()


@contextmanager
def serving(socket: Path, pods: list[tuple[str, str, str, str, Sequence[str]]] | None = None
            ) -> Iterator[PodResourcesServer]:
    state = PodResourcesServer(socket, list(pods or []))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.unary_unary_rpc_method_handler(
        state.handle,
        request_deserializer=podresources_pb2.ListPodResourcesRequest.FromString,
        response_serializer=podresources_pb2.ListPodResourcesResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1.PodResourcesLister", {"List": handler})])
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        yield state
    finally:
        server.stop(grace=None).wait(5)
