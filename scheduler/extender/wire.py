"""The extender's wire format: kube-scheduler's `k8s.io/kube-scheduler/extender/v1` JSON.

Its Go structs have no JSON tags, so every key is PascalCase:

* request `ExtenderArgs`: `{"Pod": v1.Pod, "Nodes": v1.NodeList | null, "NodeNames": [str] | null}`
  — `NodeNames` when the extender is configured `nodeCacheCapable: true`, else `Nodes.items`;
* `/prioritize` answers `HostPriorityList`: `[{"Host": str, "Score": int}]`, scores 0–10;
* `/filter` answers `ExtenderFilterResult`: `{"Nodes", "NodeNames", "FailedNodes",
  "FailedAndUnresolvableNodes", "Error"}` in the form it was asked.

Bad input (malformed JSON, wrong shape, bad quantities, negative or out-of-range values) is a
`BadRequest` (400) with a message; a body larger than the per-request limit is a 413; a body that
would take the bytes held by all requests together past the `BodyBudget` is a 503 with
`Retry-After` (kube-scheduler's call fails and, the extender being `ignorable`, the pod is
scheduled without it; the next pod tries again).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any

import numpy as np
import orjson
from fastapi import Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from scheduler.extender import jsonwalk
from scheduler.model import NodeInfo, PodInfo

# The body limit, unless configured: room for a Nodes.items body of every known node. A Node
# as kube-scheduler sends it is 5–8 KB (labels, annotations, conditions, an images list of up
# to the kubelet's 50 images); 16 KiB each leaves room for more, and the floor for the Pod.
MIN_MAX_BODY_BYTES = 16 * 1024 * 1024
BODY_BYTES_PER_NODE = 16 * 1024


def body_limit_for(nodes: int) -> int:
    return max(MIN_MAX_BODY_BYTES, (1 << 20) + BODY_BYTES_PER_NODE * nodes)


# Request bodies held at once by all requests together (read, parsed, answered, recorded),
# unless configured. A body costs about three times its size while it is being answered
# (the bytes, the parsed JSON, the NodeInfos; measured in benchmarks/bench_extender_abuse.py):
# 64 MiB of bodies keeps the process well under the manifest's 512Mi limit. Of it, the last
# SMALL_BODY_RESERVE is for small bodies only, so large ones can never crowd small ones out;
# and large bodies may always use one request's limit, so a maximal body is admissible alone.
DEFAULT_INFLIGHT_BODY_BYTES = 64 * 1024 * 1024
SMALL_BODY_RESERVE = 8 * 1024 * 1024
RETRY_AFTER_SECONDS = 1  # what a 503 over the budget asks the client to wait
# Bodies above this are answered one at a time, in a thread of their own (their JSON parse
# holds the GIL for tens of milliseconds); smaller ones in a small pool, so they never queue
# behind a large one. A body is small until its bytes say otherwise.
LARGE_BODY_BYTES = 1 << 20


class BadRequest(Exception):
    def __init__(
        self, message: str, status: int = 400, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})


class BodyBudget:
    """Bytes of request bodies in flight across all requests: small bodies (up to
    LARGE_BODY_BYTES) may use all of `limit`, larger ones all but SMALL_BODY_RESERVE of it,
    and never less than one request's limit. Used from the event loop only (reading bodies
    and releasing them), so it needs no lock."""

    def __init__(self, limit: int, small_reserve: int = SMALL_BODY_RESERVE) -> None:
        self.limit = limit
        self.small_reserve = min(small_reserve, limit)
        self.held = 0
        self.peak = 0
        self.refused = 0

    def take(self, size: int, total: int, request_limit: int) -> bool:
        """Hold `size` more bytes for a body now `total` bytes long; False (counted) when the
        total held would pass what a body of that size may use."""
        if total > LARGE_BODY_BYTES:
            room = max(self.limit - self.small_reserve, request_limit)
        else:
            room = max(self.limit, request_limit)
        if size and self.held + size > room:
            self.refused += 1
            return False
        self.held += size
        self.peak = max(self.peak, self.held)
        return True

    def give(self, size: int) -> None:
        self.held -= size

    def over(self) -> BadRequest:
        return BadRequest(
            f"too many request bytes in flight (budget {self.limit} bytes); retry shortly",
            503,
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        )


class HostPriorityList:
    """`[{"Host": name, "Score": n}, …]`, encoded straight to JSON (thousands of entries: the
    generic encoder was the slowest part of a 5,000-node answer)."""

    def __init__(self, names: Sequence[str], scores: Sequence[int] | np.ndarray) -> None:
        self.names = names
        self.scores = scores

    def to_json(self) -> str:
        encode = encode_basestring_ascii
        scores = self.scores.tolist() if isinstance(self.scores, np.ndarray) else self.scores
        items = [
            f'{{"Host":{encode(name)},"Score":{int(score)}}}'
            for name, score in zip(self.names, scores, strict=True)
        ]
        return "[" + ",".join(items) + "]"


# -- request parsing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtenderArgs:
    pod: PodInfo
    node_names: list[str] | None  # the NodeNames form
    node_items: list[dict[str, Any]] | None  # the Nodes.items form (full v1.Node objects)
    node_infos: tuple[NodeInfo, ...] = ()  # node_items, parsed (same order)

    @property
    def names(self) -> list[str]:
        if self.node_names is not None:
            return self.node_names
        return [info.name for info in self.node_infos]


_gc_lock = threading.Lock()
_gc_pauses = 0


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a large body becomes objects (JSON trees have no
    cycles; at 5,000 Node objects the collections it triggers cost more than the parse).
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


def parse_args(
    body: bytes | bytearray, node_info: Callable[[Mapping[str, Any]], NodeInfo] = NodeInfo.from_k8s
) -> ExtenderArgs:
    """ExtenderArgs from a request body, or BadRequest saying what is wrong. Everything is
    parsed and type-checked here, so answering cannot fail on the request's shape.
    `node_info` turns a Node object into a NodeInfo (the extender passes a cached one)."""
    with gc_paused():
        return _parse_args(body, node_info)


def _parse_args(body: bytes | bytearray, node_info: Callable[[Mapping[str, Any]], NodeInfo]) -> ExtenderArgs:
    try:
        # orjson: 2–3 times the standard library's speed (docs/scheduler.md); it also refuses
        # NaN, Infinity and numbers past a double. A large body is walked instead, one Node at
        # a time (jsonwalk.py): orjson would hold the interpreter from every other request for
        # the whole parse.
        data = jsonwalk.loads(body) if len(body) > LARGE_BODY_BYTES else orjson.loads(body)
    except ValueError as exc:  # orjson.JSONDecodeError, UnicodeDecodeError are ValueErrors
        if "depth limit" in str(exc) or "nested too deeply" in str(exc):
            raise BadRequest("body is not valid JSON: nested too deeply") from exc
        raise BadRequest(f"body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadRequest("body must be a JSON object with Pod and Nodes or NodeNames")
    pod = data.get("Pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise BadRequest("Pod must be a v1.Pod object with metadata")
    spec = pod.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise BadRequest("Pod.spec must be an object")
    try:
        pod_info = PodInfo.from_k8s(pod)
    except ValueError as exc:
        raise BadRequest(f"Pod.{exc}") from exc

    names = data.get("NodeNames")
    nodes = data.get("Nodes")
    if names is not None:
        # set(map(type, …)) runs at C speed: this list can hold thousands of names.
        if not isinstance(names, list) or set(map(type, names)) - {str} or "" in names:
            raise BadRequest("NodeNames must be a list of node names")
        return ExtenderArgs(pod_info, names, None)
    if nodes is None:
        raise BadRequest("one of Nodes or NodeNames is required")
    if not isinstance(nodes, dict):
        raise BadRequest("Nodes must be a v1.NodeList object")
    items = nodes.get("items") or []
    if not isinstance(items, list):
        raise BadRequest("Nodes.items must be a list")
    infos = []
    for i, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise BadRequest(f"Nodes.items[{i}] must be a v1.Node with metadata.name")
        try:
            infos.append(node_info(item))
        except ValueError as exc:
            raise BadRequest(f"Nodes.items[{i}].{exc}") from exc
    return ExtenderArgs(pod_info, None, items, tuple(infos))


@asynccontextmanager
async def admitted_body(request: Request, limit: int, budget: BodyBudget) -> AsyncIterator[bytearray]:
    """The request's body, held within `budget` until the block ends: 413 past `limit`, 503 (with
    Retry-After) past the budget — decided on the declared length when there is one, else on
    the bytes read so far. A refused body is still read to its end, into nothing, so that the
    client, still sending, gets the answer rather than a reset connection. A bytearray: orjson
    reads it without a copy."""
    held = 0
    try:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit():
            size = int(declared)
            if size > limit:
                raise BadRequest(f"request body of {size} bytes is over the {limit}-byte limit", 413)
            if not budget.take(size, size, limit):
                await _discard(request, limit)
                raise budget.over()
            held = size
        body = bytearray()
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise BadRequest(f"request body is over the {limit}-byte limit", 413)
                if len(body) > held:
                    if not budget.take(len(body) - held, len(body), limit):
                        del body
                        await _discard(request, limit)
                        raise budget.over()
                    held = len(body)
        except ClientDisconnect:
            raise BadRequest("the client went away before sending its whole body") from None
        yield body
    finally:
        budget.give(held)


async def _discard(request: Request, limit: int) -> None:
    """Read the rest of a refused body (at most `limit` bytes) without keeping it."""
    seen = 0
    try:
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit:
                return
    except (ClientDisconnect, RuntimeError):  # gone, or nothing left to read
        return


def json_response(
    payload: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    body = payload.to_json() if isinstance(payload, HostPriorityList) else orjson.dumps(payload)
    return Response(body, status, headers=dict(headers) if headers else None, media_type="application/json")
