"""The extender's wire format: kube-scheduler's `k8s.io/kube-scheduler/extender/v1` JSON.

Its Go structs have no JSON tags, so every key is PascalCase:

* request `ExtenderArgs`: `{"Pod": v1.Pod, "Nodes": v1.NodeList | null, "NodeNames": [str] | null}`
  — `NodeNames` when the extender is configured `nodeCacheCapable: true`, else `Nodes.items`;
* `/prioritize` answers `HostPriorityList`: `[{"Host": str, "Score": int}]`, scores 0–10;
* `/filter` answers `ExtenderFilterResult`: `{"Nodes", "NodeNames", "FailedNodes",
  "FailedAndUnresolvableNodes", "Error"}` in the form it was asked.

Bad input (malformed JSON, wrong shape, bad quantities, negative or out-of-range values) is a
`BadRequest` (400) with a message. Before a body is decoded here it is admitted (`body.py`): a
body larger than the per-request limit is a 413; a body that would take the bytes held by all
requests together past the `BodyBudget` is a 503 with `Retry-After` (kube-scheduler's call fails
and, the extender being `ignorable`, the pod is scheduled without it; the next pod tries again).
"""

from __future__ import annotations

import gc
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import msgspec
import numpy as np
import orjson
from fastapi.responses import Response

from scheduler.cluster.kubejson import Node, Pod, type_error
from scheduler.cluster.kubeobjects import node_info_from_k8s, pod_info_from_k8s
from scheduler.domain.model import NodeInfo, PodInfo
from scheduler.extender import jsonwalk
from scheduler.extender.body import LARGE_BODY_BYTES, BadRequest
from scheduler.extender.bounded import MAX_NODE_SPECS


class HostPriority(msgspec.Struct):
    """extenderv1.HostPriority."""

    Host: str  # noqa: N815 (kube-scheduler's keys)
    Score: int  # noqa: N815


class HostPriorityList:
    """`[{"Host": name, "Score": n}, …]` (thousands of entries: encoded by msgspec from structs,
    ~3 times faster than building the text by hand)."""

    def __init__(self, names: Sequence[str], scores: Sequence[int] | np.ndarray) -> None:
        self.names = names
        self.scores = scores

    def to_json(self) -> bytes:
        scores = self.scores.tolist() if isinstance(self.scores, np.ndarray) else list(self.scores)
        return _ENCODER.encode(list(map(HostPriority, self.names, scores)))


_ENCODER = msgspec.json.Encoder()


# -- request decoding ----------------------------------------------------------------------------
#
# msgspec decodes a body straight into typed structs holding only the fields used
# (`scheduler.cluster.kubeobjects`). Each Node of the `Nodes.items` form is kept as its raw JSON
# (`msgspec.Raw`, a view of the body): decoded on its own — so a large body gives other threads
# the interpreter between two Nodes, where one call would hold it for the whole parse — and
# echoed back as it came in a `/filter` answer. Bad input is a BadRequest naming what is wrong:
# a JSON syntax error anywhere in the body first, as before (orjson's standard: NaN, Infinity,
# numbers past a double, lone surrogates, nesting past its depth limit are refused; a large body
# is checked by `jsonwalk`, which does not hold the interpreter for the whole body), then a
# wrong type or value (`Pod.spec.tolerations[0].effect: expected a string, got int`).


class _NodeList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class _Args(msgspec.Struct):
    Pod: Pod | None = None  # noqa: N815 (kube-scheduler's keys)
    Nodes: _NodeList | None = None  # noqa: N815
    NodeNames: list[str] | None = None  # noqa: N815


class _Identity(msgspec.Struct):
    name: object = None
    resourceVersion: object = None  # noqa: N815


class _Identified(msgspec.Struct):
    metadata: _Identity | None = None


class _IdentifiedList(msgspec.Struct):
    items: list[_Identified] | None = None


class _ArgsIdentified(msgspec.Struct):
    """ExtenderArgs with each Node's identity only (name, resourceVersion)."""

    Pod: Pod | None = None  # noqa: N815 (kube-scheduler's keys)
    Nodes: _IdentifiedList | None = None  # noqa: N815
    NodeNames: list[str] | None = None  # noqa: N815


_ARGS = msgspec.json.Decoder(_Args)
_ARGS_IDENTIFIED = msgspec.json.Decoder(_ArgsIdentified)
_NODE = msgspec.json.Decoder(Node)
_IDENTITY = msgspec.json.Decoder(_Identified)


def _identity_of(meta: _Identity | None) -> tuple[str, str] | None:
    if meta is None:
        return None
    name, version = meta.name, meta.resourceVersion
    if isinstance(name, str) and name and isinstance(version, str) and version:
        return name, version
    return None


def node_identity(raw: msgspec.Raw | bytes) -> tuple[str, str] | None:
    """(name, resourceVersion) of a Node's JSON when both are non-empty strings, else None
    (also for JSON that is not a Node: decode_node says what is wrong). Cheaper than
    decoding the Node: kube-scheduler sends the same Nodes with every pod."""
    try:
        return _identity_of(_IDENTITY.decode(raw).metadata)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def decode_args(body: bytes | bytearray) -> _Args:
    """The body's top level (Nodes.items left raw); msgspec's own errors."""
    return _ARGS.decode(body)


@dataclass(frozen=True)
class ExtenderArgs:
    pod: PodInfo
    node_names: list[str] | None  # the NodeNames form (else Nodes.items)
    # The Nodes.items form: each Node's JSON, as sent (None unless asked for: parse_args'
    # raw_nodes), and each Node decoded (same order).
    node_items: list[msgspec.Raw] | None
    node_infos: tuple[NodeInfo, ...] = ()

    @property
    def names(self) -> list[str]:
        if self.node_names is not None:
            return self.node_names
        return [info.name for info in self.node_infos]


# What a wrong top-level shape is called (path of msgspec's error → message).
_SHAPES = (
    (re.compile(r"^$"), "body must be a JSON object with Pod and Nodes or NodeNames"),
    (re.compile(r"^Pod(\.metadata)?$"), "Pod must be a v1.Pod object with metadata"),
    (re.compile(r"^Pod\.spec$"), "Pod.spec must be an object"),
    (re.compile(r"^NodeNames(\[\d+\])?$"), "NodeNames must be a list of node names"),
    (re.compile(r"^Nodes$"), "Nodes must be a v1.NodeList object"),
    (re.compile(r"^Nodes\.items$"), "Nodes.items must be a list"),
)


def _refused(body: bytes | bytearray, exc: Exception) -> BadRequest:
    """The 400 for a body msgspec refused: a syntax error anywhere comes first (checked as the
    extender always has: orjson, or `jsonwalk` for a large body), else the type error msgspec
    found."""
    try:
        jsonwalk.loads(body) if len(body) > LARGE_BODY_BYTES else orjson.loads(body)
    except ValueError as syntax:  # orjson.JSONDecodeError, UnicodeDecodeError are ValueErrors
        if "depth limit" in str(syntax) or "nested too deeply" in str(syntax):
            return BadRequest("body is not valid JSON: nested too deeply")
        return BadRequest(f"body is not valid JSON: {syntax}")
    if not isinstance(exc, msgspec.ValidationError):
        return BadRequest(f"body is not valid JSON: {exc}")
    path, message = type_error(exc)
    for pattern, named in _SHAPES:
        if pattern.match(path):
            return BadRequest(named)
    return BadRequest(message)


def decode_node(raw: msgspec.Raw | bytes, position: int) -> Node:
    """One Node of Nodes.items; BadRequest naming it when it is not a v1.Node with a name."""
    where = f"Nodes.items[{position}]"
    try:
        node = _NODE.decode(raw)
    except msgspec.ValidationError as exc:
        path, message = type_error(exc, where)
        if path in (where, f"{where}.metadata", f"{where}.metadata.name"):
            raise BadRequest(f"{where} must be a v1.Node with metadata.name") from exc
        raise BadRequest(message) from exc
    if node.metadata is None or not node.metadata.name:
        raise BadRequest(f"{where} must be a v1.Node with metadata.name")
    return node


def read_node(raw: msgspec.Raw | bytes | Node, position: int) -> NodeInfo:
    """decode_node() (unless decoded already) then its NodeInfo (BadRequest naming the
    field)."""
    node = raw if isinstance(raw, Node) else decode_node(raw, position)
    try:
        return node_info_from_k8s(node)
    except ValueError as exc:
        raise BadRequest(f"Nodes.items[{position}].{exc}") from exc


NodeReader = Callable[[msgspec.Raw, int], NodeInfo]

# Node specs remembered by name and resourceVersion (emptied beyond this many).
MAX_REMEMBERED_NODES = MAX_NODE_SPECS


class RememberedNodes:
    """read_node(), remembered by name and resourceVersion: kube-scheduler sends the same Node
    objects with every pod, and the API server gives a changed object a new resourceVersion,
    so a Node seen before costs the look-up of its identity instead of its decoding (a
    Nodes.items body of 1,000 realistic Nodes: ~20 ms of CPU less per request) and comes back
    as the same NodeInfo object. (A client that changes an object without changing its
    resourceVersion gets the spec it sent first.) Objects without one are read every time.
    Used from several request threads: each step is one dict operation."""

    def __init__(self, limit: int = MAX_REMEMBERED_NODES) -> None:
        self.limit = limit
        self._specs: dict[str, tuple[str, NodeInfo]] = {}  # name → (resourceVersion, NodeInfo)

    def __len__(self) -> int:
        return len(self._specs)

    def known(self, identity: tuple[str, str] | None) -> NodeInfo | None:
        """The NodeInfo remembered for (name, resourceVersion), if it is."""
        if identity is None:
            return None
        known = self._specs.get(identity[0])
        return known[1] if known is not None and known[0] == identity[1] else None

    def __call__(self, raw: msgspec.Raw | bytes, position: int = 0) -> NodeInfo:
        identity = node_identity(raw)
        if identity is None:
            return read_node(raw, position)
        name, version = identity
        known = self._specs.get(name)
        if known is not None and known[0] == version:
            return known[1]
        info = read_node(raw, position)
        if len(self._specs) >= self.limit:
            self._specs.clear()
        self._specs[name] = (version, info)
        return info


def parse_args(
    body: bytes | bytearray, read: NodeReader = read_node, raw_nodes: bool = True
) -> ExtenderArgs:
    """ExtenderArgs from a request body, or BadRequest saying what is wrong. Everything is
    decoded and type-checked here, so answering cannot fail on the request's shape.
    `read(raw, position)` turns one Node into a NodeInfo (the extender passes a
    `RememberedNodes`). Without `raw_nodes` (/prioritize: it echoes no Node back) and with a
    RememberedNodes, the body is decoded once into each Node's identity, and each Node's JSON
    is decoded only if its name and resourceVersion are not remembered (`_identified`)."""
    with gc_paused():
        if not raw_nodes and isinstance(read, RememberedNodes):
            identified = _identified(body, read)
            if identified is not None:
                return identified
        try:
            args = decode_args(body)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            raise _refused(body, exc) from exc
        pod = args.Pod
        if pod is None or pod.metadata is None:
            raise BadRequest("Pod must be a v1.Pod object with metadata")
        try:
            info = pod_info_from_k8s(pod)
        except ValueError as exc:
            raise BadRequest(f"Pod.{exc}") from exc
        if args.NodeNames is not None:
            if "" in args.NodeNames:
                raise BadRequest("NodeNames must be a list of node names")
            return ExtenderArgs(info, args.NodeNames, None)
        if args.Nodes is None:
            raise BadRequest("one of Nodes or NodeNames is required")
        items = args.Nodes.items or []
        infos = tuple(read(raw, i) for i, raw in enumerate(items))
        return ExtenderArgs(info, None, items, infos)


def _identified(body: bytes | bytearray, remembered: RememberedNodes) -> ExtenderArgs | None:
    """parse_args' answer from one pass that reads each Node's identity only: the Nodes seen
    before (kube-scheduler sends the same Nodes with every pod) are the NodeInfos remembered,
    and only the others are decoded (the body's Nodes kept raw for them: a second pass). At
    5,000 realistic Nodes: 11 ms of CPU instead of 22 (decoding the body with raw Nodes, then
    each Node's identity). None when the body is anything else than a well-formed request
    (parse_args' own decoding then names what is wrong, as always)."""
    try:
        args = _ARGS_IDENTIFIED.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    pod = args.Pod
    if pod is None or pod.metadata is None:
        return None
    try:
        info = pod_info_from_k8s(pod)
    except ValueError:
        return None
    if args.NodeNames is not None:
        return ExtenderArgs(info, args.NodeNames, None) if "" not in args.NodeNames else None
    if args.Nodes is None:
        return None
    items = args.Nodes.items or []
    infos = [remembered.known(_identity_of(item.metadata)) for item in items]
    if None in infos:
        raws = decode_args(body).Nodes.items  # type: ignore[union-attr]  # the same shape
        assert raws is not None and len(raws) == len(infos)
        infos = [known if known is not None else remembered(raws[i], i) for i, known in enumerate(infos)]
    return ExtenderArgs(info, None, None, tuple(infos))  # type: ignore[arg-type]  # no None left


_gc_lock = threading.Lock()
_gc_pauses = 0


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a body becomes objects (decoded trees have no
    cycles; at 5,000 Node objects the collections it triggers cost more than the decoding).
    Counted, so that overlapping pauses in several threads end with the last one."""
    global _gc_pauses
    with _gc_lock:
        _gc_pauses += 1
        if _gc_pauses == 1:
            gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0:
                gc.enable()


def json_response(
    payload: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON answer (msgspec: a /filter answer's Nodes go back as the raw JSON they came in)."""
    body = payload.to_json() if isinstance(payload, HostPriorityList) else _ENCODER.encode(payload)
    return Response(body, status, headers=dict(headers) if headers else None, media_type="application/json")
