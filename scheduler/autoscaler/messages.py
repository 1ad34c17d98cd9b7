"""cluster-autoscaler's BestOptionsRequest → the choice's GroupOptions, in every protocol form.

cluster-autoscaler ≤ 1.34.1 sends the template nodes in `nodeMap` (field 2) and the pods as
messages in `Option.pod` (field 4); 1.34.2–1.34.5 send those and the same objects
protobuf-encoded in `nodeBytesMap` (3) and `Option.podBytes` (5); ≥ 1.35 sends only 3 and 5. The
encoded forms are preferred when present (as the upstream proto asks readers to).

Template nodes are turned into the JSON shape Kubernetes uses and read by the scheduler's own
`node_info_from_k8s`; a pod's requests are counted by its `effective_requests` and
`nonzero_requests` (containers, sidecar and init containers, overhead; Kubernetes quantities),
exactly as for the extender's JSON. Of a pod the choice needs only its requests and identity;
scheduling constraints (selectors, affinity, tolerations) have been applied by
cluster-autoscaler already when it built the option. Every problem is a RequestError naming the
option, pod or node: the server answers it with INVALID_ARGUMENT.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from scheduler.autoscaler.protos import (
    expander_pb2,
    k8s_core_v1_pb2,
    k8s_meta_v1_pb2,
    k8s_resource_pb2,
)
from scheduler.cluster.kubeobjects import effective_requests, node_info_from_k8s, nonzero_requests
from scheduler.decisions.expansion import GroupOption
from scheduler.domain.model import NodeInfo, PodInfo, Resources, ShapeError

# cluster-autoscaler sends an int32 node count; more new nodes than this in one scale-up is not
# a request any autoscaler makes (its --max-nodes-total default is 0 = unlimited, but clouds cap
# group sizes in the thousands).
MAX_NODE_COUNT = 100_000


class RequestError(ValueError):
    """A request the expander cannot read; the message says where."""


@dataclass(frozen=True)
class ParsedRequest:
    options: list[GroupOption]
    missing_templates: list[str]  # group ids with no template node (cannot be priced)
    form: str  # "messages" (fields 2/4), "bytes" (3/5), "both"


# Containers as far as they count for requests: each one's sorted (resource, quantity) requests
# and its restart policy.
ContainersKey = tuple[tuple[tuple[tuple[str, str], ...], str], ...]
M = TypeVar("M", bound=Message)


def _quantities(values: Mapping[str, k8s_resource_pb2.Quantity]) -> dict[str, str]:
    return {name: quantity.string for name, quantity in values.items()}


def _meta(meta: k8s_meta_v1_pb2.ObjectMeta) -> dict[str, object]:
    return {
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": meta.uid,
        "labels": dict(meta.labels),
        "annotations": dict(meta.annotations),
    }


def node_json(node: k8s_core_v1_pb2.Node) -> dict[str, object]:
    """The fields of a v1.Node message that node_info_from_k8s reads, as Kubernetes JSON."""
    status: dict[str, object] = {
        "capacity": _quantities(node.status.capacity),
        "allocatable": _quantities(node.status.allocatable),
        "conditions": [{"type": c.type, "status": c.status} for c in node.status.conditions],
    }
    spec: dict[str, object] = {
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints]
    }
    if node.spec.HasField("unschedulable"):
        spec["unschedulable"] = node.spec.unschedulable
    return {"metadata": _meta(node.metadata), "spec": spec, "status": status}


def _requests_key(containers: Iterable[k8s_core_v1_pb2.Container]) -> ContainersKey:
    return tuple(
        (tuple(sorted((name, q.string) for name, q in c.resources.requests.items())), c.restartPolicy)
        for c in containers
    )


def _spec_json(key: tuple[ContainersKey, ContainersKey, tuple[tuple[str, str], ...]]) -> dict[str, object]:
    containers, init_containers, overhead = key
    return {
        "containers": [{"resources": {"requests": dict(r)}, "restartPolicy": p} for r, p in containers],
        "initContainers": [
            {"resources": {"requests": dict(r)}, "restartPolicy": p} for r, p in init_containers
        ],
        "overhead": dict(overhead),
    }


def node_info(node: k8s_core_v1_pb2.Node, where: str) -> NodeInfo:
    try:
        return node_info_from_k8s(node_json(node))
    except ShapeError as exc:
        raise RequestError(f"{where}: {exc}") from exc


def _decode(message_type: type[M], data: bytes, where: str) -> M:
    message = message_type()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise RequestError(f"{where}: not a protobuf-encoded {message_type.DESCRIPTOR.name}: {exc}") from exc
    return message


class _PodReader:
    """Pods → PodInfo with their requests counted as kube-scheduler counts them (the model's
    effective_requests and nonzero_requests). cluster-autoscaler repeats the same pods in many
    options and most pods share a few specs (one per workload), so each encoding is decoded once
    and each spec — as far as the subset declares it: containers' names, requests and restart
    policies, overhead, scheduler and node name — counted once."""

    def __init__(self) -> None:
        self._by_bytes: dict[bytes, PodInfo] = {}
        self._by_spec: dict[bytes, tuple[Resources, Resources]] = {}

    def from_bytes(self, data: bytes, where: str) -> PodInfo:
        cached = self._by_bytes.get(data)
        if cached is None:
            cached = self.from_message(_decode(k8s_core_v1_pb2.Pod, data, where), where)
            self._by_bytes[data] = cached
        return cached

    def from_message(self, pod: k8s_core_v1_pb2.Pod, where: str) -> PodInfo:
        spec = pod.spec
        # The undeclared fields (volumes with generated names, env, probes …) differ from pod
        # to pod of one workload and say nothing about requests: leave them out of the key.
        spec.DiscardUnknownFields()
        spec_key = spec.SerializeToString(deterministic=True)
        requests = self._by_spec.get(spec_key)
        if requests is None:
            spec_json = _spec_json(
                (
                    _requests_key(spec.containers),
                    _requests_key(spec.initContainers),
                    tuple(sorted((name, q.string) for name, q in spec.overhead.items())),
                )
            )
            try:
                requests = (effective_requests(spec_json), nonzero_requests(spec_json))
            except ShapeError as exc:
                raise RequestError(f"{where}: {exc}") from exc
            self._by_spec[spec_key] = requests
        meta = pod.metadata
        return PodInfo(
            namespace=meta.namespace or "default",
            name=meta.name,
            uid=meta.uid,
            requests=requests[0],
            nonzero_requests=requests[1],
            scheduler_name=spec.schedulerName or "default-scheduler",
            node_name=spec.nodeName or None,
            phase=pod.status.phase or None,
        )


def decode_request(data: bytes) -> expander_pb2.BestOptionsRequest:
    """The request from its wire bytes; RequestError when they are not one."""
    return _decode(expander_pb2.BestOptionsRequest, data, "request")


def parse_request(request: expander_pb2.BestOptionsRequest) -> ParsedRequest:
    """GroupOptions from a request in any protocol form. RequestError for no options, a bad
    node count or group id, or a node or pod that does not decode or has a bad field."""
    if not request.options:
        raise RequestError("the request has no options")
    has_messages = bool(request.nodeMap) or any(len(o.pod) for o in request.options)
    has_bytes = bool(request.nodeBytesMap) or any(len(o.podBytes) for o in request.options)
    form = "both" if has_messages and has_bytes else "bytes" if has_bytes else "messages"
    templates: dict[str, NodeInfo | None] = {}
    missing: list[str] = []
    pods = _PodReader()
    options: list[GroupOption] = []
    for index, option in enumerate(request.options):
        where = f"options[{index}]"
        group = option.nodeGroupId
        if not group:
            raise RequestError(f"{where}: nodeGroupId is empty")
        if not 1 <= option.nodeCount <= MAX_NODE_COUNT:
            raise RequestError(
                f"{where} ({group}): nodeCount must be between 1 and {MAX_NODE_COUNT}, got {option.nodeCount}"
            )
        if group not in templates:
            templates[group] = _template(request, group)
            if templates[group] is None:
                missing.append(group)
        if len(option.podBytes):
            infos = tuple(
                pods.from_bytes(data, f"{where} ({group}).podBytes[{i}]")
                for i, data in enumerate(option.podBytes)
            )
        else:
            infos = tuple(
                pods.from_message(pod, f"{where} ({group}).pod[{i}]")
                for i, pod in enumerate(option.pod)
            )
        template = templates[group]
        options.append(
            GroupOption(
                group_id=group,
                node_count=option.nodeCount,
                pods=infos,
                # A group without a template cannot be priced: a node with no CPU never wins.
                template=template if template is not None else NodeInfo(group, Resources()),
                debug=option.debug,
            )
        )
    return ParsedRequest(options, missing, form)


def _template(request: expander_pb2.BestOptionsRequest, group: str) -> NodeInfo | None:
    if group in request.nodeBytesMap:
        where = f"nodeBytesMap[{group}]"
        return node_info(_decode(k8s_core_v1_pb2.Node, request.nodeBytesMap[group], where), where)
    if group in request.nodeMap:
        return node_info(request.nodeMap[group], f"nodeMap[{group}]")
    return None
