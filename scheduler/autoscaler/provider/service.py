"""cluster-autoscaler's externalgrpc CloudProvider service over TLS, answered from the Fleet.

cluster-autoscaler (`--cloud-provider=externalgrpc --cloud-config=FILE`, the file naming this
address, its CA certificate and, with mutual TLS, its own client pair) calls each method with
its `grpc_timeout` (default 5 s). Pricing is not offered (Unimplemented: CA's price expander then
does without it); the GPU label is empty. `NodeGroupGetOptions` answers CA's defaults with the
max node provision time raised to the boot deadline, so CA waits as long as a machine may take
to boot. Every call counts in `kubejoule_cloudprovider_requests_total{method,code}`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent import futures
from typing import TypeVar

import grpc
from google.protobuf import message as pb_message

from common.jsonvalue import subobject, subobjects
from scheduler.autoscaler.protos import externalgrpc_pb2 as pb
from scheduler.autoscaler.protos import k8s_core_v1_pb2
from scheduler.autoscaler.provider.machines import (
    BOOTING,
    FAILED,
    RUNNING,
    STOPPING,
    Fleet,
    ProviderError,
)
from scheduler.autoscaler.provider.safety import CA_DELETION_TAINT
from scheduler.autoscaler.tls import serve_tls

log = logging.getLogger("kubejoule.cloudprovider")

SERVICE = "clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider"
_STATE = {
    RUNNING: pb.InstanceStatus.instanceRunning,
    BOOTING: pb.InstanceStatus.instanceCreating,
    FAILED: pb.InstanceStatus.instanceCreating,
    STOPPING: pb.InstanceStatus.instanceDeleting,
}
# One RPC's answer to the request gRPC decoded; what gRPC calls with it and the call's context.
Answer = Callable[[pb_message.Message], pb_message.Message]
Handler = Callable[[pb_message.Message, grpc.ServicerContext], pb_message.Message]
Request = TypeVar("Request", bound=pb_message.Message)


def _answering(request_type: type[Request], method: Callable[[Request], pb_message.Message]) -> Answer:
    """`method` as an RPC's answer: gRPC decodes its request with `request_type` (generic_handler)."""

    def answer(request: pb_message.Message) -> pb_message.Message:
        if not isinstance(request, request_type):
            raise ProviderError("INTERNAL", f"expected a {request_type.DESCRIPTOR.name}, got {type(request).__name__}")
        return method(request)

    return answer


OTHER_ERROR_CLASS = 99
# Taints of a node's present, not of the group: left off the template.
_PASSING_TAINTS = (CA_DELETION_TAINT, "DeletionCandidateOfClusterAutoscaler", "node.kubernetes.io/unschedulable",
                   "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def template_message(node: dict[str, object], group_id: str) -> k8s_core_v1_pb2.Node:
    """A v1.Node message of a real Node of the group, as a template: its labels, taints of the
    group (not of the moment), capacity, allocatable, Ready; its own name replaced."""
    meta, spec, status = subobject(node, "metadata"), subobject(node, "spec"), subobject(node, "status")
    out = k8s_core_v1_pb2.Node()
    out.metadata.name = f"template-node-for-{group_id}"
    out.metadata.labels.update({str(k): str(v) for k, v in subobject(meta, "labels").items()})
    for taint in subobjects(spec, "taints"):
        if taint.get("key") not in _PASSING_TAINTS:
            out.spec.taints.add(key=taint.get("key", ""), value=taint.get("value", ""), effect=taint.get("effect", ""))
    for name in ("capacity", "allocatable"):
        for resource, quantity in subobject(status, name).items():
            getattr(out.status, name)[resource].string = str(quantity)
    out.status.conditions.add(type="Ready", status="True")
    return out


class CloudProviderService:
    def __init__(self, fleet: Fleet, refresh_min_seconds: float = 5.0) -> None:
        self.fleet = fleet
        self.refresh_min_seconds = refresh_min_seconds
        self._last_refresh = 0.0

    def _group(self, group_id: str) -> pb.NodeGroup:
        group = self.fleet.group(group_id)
        return pb.NodeGroup(id=group.id, minSize=group.min_size, maxSize=group.max_size,
                            debug=f"{group.id}: {len(group.machines)} bare-metal machine(s)")

    def NodeGroups(self, _request: pb.NodeGroupsRequest) -> pb.NodeGroupsResponse:
        return pb.NodeGroupsResponse(nodeGroups=[self._group(g.id) for g in self.fleet.settings.groups])

    def NodeGroupForNode(self, request: pb.NodeGroupForNodeRequest) -> pb.NodeGroupForNodeResponse:
        node = request.node
        group = self.fleet.group_of_node(node.name, node.providerID, dict(node.labels))
        return pb.NodeGroupForNodeResponse(nodeGroup=self._group(group.id) if group else pb.NodeGroup())

    def GPULabel(self, _request: pb.GPULabelRequest) -> pb.GPULabelResponse:
        return pb.GPULabelResponse(label="")

    def GetAvailableGPUTypes(self, _request: pb.GetAvailableGPUTypesRequest) -> pb.GetAvailableGPUTypesResponse:
        return pb.GetAvailableGPUTypesResponse()

    def Cleanup(self, _request: pb.CleanupRequest) -> pb.CleanupResponse:
        return pb.CleanupResponse()

    def Refresh(self, _request: pb.RefreshRequest) -> pb.RefreshResponse:
        if time.monotonic() - self._last_refresh >= self.refresh_min_seconds:
            self.fleet.refresh()
            self._last_refresh = time.monotonic()
        return pb.RefreshResponse()

    def NodeGroupTargetSize(self, request: pb.NodeGroupTargetSizeRequest) -> pb.NodeGroupTargetSizeResponse:
        return pb.NodeGroupTargetSizeResponse(targetSize=self.fleet.target_size(request.id))

    def NodeGroupIncreaseSize(self, request: pb.NodeGroupIncreaseSizeRequest) -> pb.NodeGroupIncreaseSizeResponse:
        self.fleet.increase(request.id, request.delta)
        return pb.NodeGroupIncreaseSizeResponse()

    def NodeGroupDeleteNodes(self, request: pb.NodeGroupDeleteNodesRequest) -> pb.NodeGroupDeleteNodesResponse:
        self.fleet.delete_nodes(request.id, [(n.name, n.providerID) for n in request.nodes])
        return pb.NodeGroupDeleteNodesResponse()

    def NodeGroupDecreaseTargetSize(
        self, request: pb.NodeGroupDecreaseTargetSizeRequest
    ) -> pb.NodeGroupDecreaseTargetSizeResponse:
        self.fleet.decrease_target(request.id, request.delta)
        return pb.NodeGroupDecreaseTargetSizeResponse()

    def NodeGroupNodes(self, request: pb.NodeGroupNodesRequest) -> pb.NodeGroupNodesResponse:
        response = pb.NodeGroupNodesResponse()
        for t in self.fleet.instances(request.id):
            instance = response.instances.add(id=self.fleet.instance_id(t))
            instance.status.instanceState = _STATE[t.state]
            if t.state == FAILED:
                instance.status.errorInfo.errorCode = "kubejoule-power"
                instance.status.errorInfo.errorMessage = t.error
                instance.status.errorInfo.instanceErrorClass = OTHER_ERROR_CLASS
        return response

    def NodeGroupTemplateNodeInfo(
        self, request: pb.NodeGroupTemplateNodeInfoRequest
    ) -> pb.NodeGroupTemplateNodeInfoResponse:
        node = self.fleet.template(request.id)
        if node is None:
            raise ProviderError("UNIMPLEMENTED", f"{request.id}: no Node of this group seen yet and no capacity configured")
        message = template_message(node, request.id)
        return pb.NodeGroupTemplateNodeInfoResponse(nodeInfo=message, nodeBytes=message.SerializeToString())

    def NodeGroupGetOptions(
        self, request: pb.NodeGroupAutoscalingOptionsRequest
    ) -> pb.NodeGroupAutoscalingOptionsResponse:
        self.fleet.group(request.id)
        options = pb.NodeGroupAutoscalingOptions()
        options.CopyFrom(request.defaults)
        deadline = self.fleet.settings.boot_deadline_seconds
        if options.MaxNodeProvisionDuration.ToTimedelta().total_seconds() < deadline:
            options.MaxNodeProvisionDuration.FromSeconds(int(deadline))
        return pb.NodeGroupAutoscalingOptionsResponse(nodeGroupAutoscalingOptions=options)

    # -- gRPC ---------------------------------------------------------------------------------

    def _wrap(self, name: str, method: Answer) -> Handler:
        metrics = self.fleet.metrics

        def handle(request: pb_message.Message, context: grpc.ServicerContext) -> pb_message.Message:
            try:
                answer = method(request)
            except ProviderError as exc:
                metrics.requests.labels(name, exc.code).inc()
                log.info("%s: %s: %s", name, exc.code, exc)
                context.abort(getattr(grpc.StatusCode, exc.code), str(exc)[:1000])
            except Exception as exc:  # never let one call take the server down
                metrics.requests.labels(name, "INTERNAL").inc()
                log.exception("%s: unexpected error", name)
                context.abort(grpc.StatusCode.INTERNAL, f"kubejoule cloud provider error: {exc!r}"[:1000])
            metrics.requests.labels(name, "OK").inc()
            return answer

        return handle

    def _unimplemented(self, name: str) -> Handler:
        def handle(_request: pb_message.Message, context: grpc.ServicerContext) -> pb_message.Message:
            self.fleet.metrics.requests.labels(name, "UNIMPLEMENTED").inc()
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name}: not offered by kubejoule")

        return handle

    def answers(self) -> dict[str, Answer]:
        """The RPCs this provider answers, by name; the service's others (its pricing ones)
        answer UNIMPLEMENTED."""
        return {
            "NodeGroups": _answering(pb.NodeGroupsRequest, self.NodeGroups),
            "NodeGroupForNode": _answering(pb.NodeGroupForNodeRequest, self.NodeGroupForNode),
            "GPULabel": _answering(pb.GPULabelRequest, self.GPULabel),
            "GetAvailableGPUTypes": _answering(pb.GetAvailableGPUTypesRequest, self.GetAvailableGPUTypes),
            "Cleanup": _answering(pb.CleanupRequest, self.Cleanup),
            "Refresh": _answering(pb.RefreshRequest, self.Refresh),
            "NodeGroupTargetSize": _answering(pb.NodeGroupTargetSizeRequest, self.NodeGroupTargetSize),
            "NodeGroupIncreaseSize": _answering(pb.NodeGroupIncreaseSizeRequest, self.NodeGroupIncreaseSize),
            "NodeGroupDeleteNodes": _answering(pb.NodeGroupDeleteNodesRequest, self.NodeGroupDeleteNodes),
            "NodeGroupDecreaseTargetSize": _answering(pb.NodeGroupDecreaseTargetSizeRequest, self.NodeGroupDecreaseTargetSize),
            "NodeGroupNodes": _answering(pb.NodeGroupNodesRequest, self.NodeGroupNodes),
            "NodeGroupTemplateNodeInfo": _answering(pb.NodeGroupTemplateNodeInfoRequest, self.NodeGroupTemplateNodeInfo),
            "NodeGroupGetOptions": _answering(pb.NodeGroupAutoscalingOptionsRequest, self.NodeGroupGetOptions),
        }

    def generic_handler(self) -> grpc.GenericRpcHandler:
        handlers = {}
        answers = self.answers()
        for method in pb.DESCRIPTOR.services_by_name["CloudProvider"].methods:
            request_class = getattr(pb, method.input_type.name)
            implementation = answers.get(method.name)
            handler = (self._wrap(method.name, implementation) if implementation is not None
                       else self._unimplemented(method.name))
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                handler, request_deserializer=request_class.FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
        return grpc.method_handlers_generic_handler(SERVICE, handlers)


def start_server(service: CloudProviderService, host: str, port: int, certificate_pem: bytes,
                 private_key_pem: bytes, client_ca_pem: bytes | None = None,
                 workers: int = 4) -> tuple[grpc.Server, int]:
    """The TLS gRPC server (a client certificate required when `client_ca_pem` is given)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cloudprovider"),
                         handlers=[service.generic_handler()])
    return server, serve_tls(server, host, port, certificate_pem, private_key_pem, client_ca_pem)
