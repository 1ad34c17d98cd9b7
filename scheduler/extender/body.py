"""Request bodies as the extender admits them: the per-request limit (413), the bytes all requests
hold at once (`BodyBudget`: 503 with `Retry-After` past it), and the 400 of a bad body
(`BadRequest`, which `wire.py` raises for what a body says).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import Request
from starlette.requests import ClientDisconnect

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


@asynccontextmanager
async def admitted_body(request: Request, limit: int, budget: BodyBudget) -> AsyncIterator[bytearray]:
    """The request's body, held within `budget` until the block ends: 413 past `limit`, 503 (with
    Retry-After) past the budget — decided on the declared length when there is one, else on
    the bytes read so far. A refused body is still read to its end, into nothing, so that the
    client, still sending, gets the answer rather than a reset connection. A bytearray: msgspec
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
