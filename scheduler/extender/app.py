"""The extender's HTTP app (FastAPI): `POST /filter`, `POST /prioritize`, `/healthz`, `/readyz`,
`/metrics`.

The event loop only reads bodies and sends answers: parsing, answering and encoding run in
threads (a large body in a thread of its own, one at a time; small ones in a small pool, so a
small request never queues behind a large one). Bodies count against a global `BodyBudget`
while they are held; past it a request is a 503 with `Retry-After`. A response is sent once the
decision lines its answer produced are written (see `scheduler/extender/recorder.py`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, nullcontext

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import generate_latest

from scheduler.extender.body import (
    DEFAULT_INFLIGHT_BODY_BYTES,
    LARGE_BODY_BYTES,
    BadRequest,
    BodyBudget,
    admitted_body,
)
from scheduler.extender.calls import Pending, awaiting_writes
from scheduler.extender.core import Extender
from scheduler.extender.wire import ExtenderArgs, gc_paused, json_response, parse_args

log = logging.getLogger(__name__)

SMALL_REQUEST_THREADS = 4
# The interpreter's thread switch interval while the app serves (Python's default: 5 ms). A
# small request crosses threads several times (loop → worker → loop), each time waiting up to
# one interval for a thread busy with a large body: at 1 ms its p99 under 32 concurrent
# maximal bodies fell from 0.34 s to 0.13 s (benchmarks/bench_extender_abuse.py, load 5).
SWITCH_INTERVAL_SECONDS = 0.001


def create_app(
    extender: Extender, manage_store: bool = True, inflight_body_bytes: int | None = None
) -> FastAPI:
    """The extender's HTTP app; with `manage_store` the store's refresh thread follows the app.
    `inflight_body_bytes`: the global budget of request bytes held at once (default
    DEFAULT_INFLIGHT_BODY_BYTES; never less than one request's limit)."""
    budget = BodyBudget(
        DEFAULT_INFLIGHT_BODY_BYTES if inflight_body_bytes is None else inflight_body_bytes
    )
    pools = _Pools()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(switch_interval, SWITCH_INTERVAL_SECONDS))
        if manage_store:
            extender.start()
        try:
            yield
        finally:
            if manage_store:
                extender.stop()
            pools.shutdown()
            sys.setswitchinterval(switch_interval)

    # No OpenAPI page (nor docs): the extender's callers are kube-scheduler and Prometheus.
    app = FastAPI(title="kubejoule scheduler extender", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.body_budget = budget
    metrics = extender.metrics

    def work(
        body: bytearray, answer: Callable[[ExtenderArgs], object], raw_nodes: bool
    ) -> tuple[Response, list[Pending]]:
        # A large body's objects live until its answer is encoded: the cyclic collector stays
        # off for all of it, or a full collection walks them all (~0.1 s, the GIL held).
        paused = gc_paused() if len(body) > LARGE_BODY_BYTES else nullcontext()
        with paused, awaiting_writes() as pending:
            response = json_response(answer(parse_args(body, extender.states.node_info, raw_nodes)))
        return response, pending

    async def handle(verb: str, request: Request, answer: Callable[[ExtenderArgs], object]) -> Response:
        started = time.perf_counter()
        try:
            async with admitted_body(request, extender.body_limit(), budget) as body:
                pool = pools.get(len(body) > LARGE_BODY_BYTES)
                loop = asyncio.get_running_loop()
                # /filter echoes the Nodes it keeps as they came: their JSON is kept.
                response, pending = await loop.run_in_executor(pool, work, body, answer, verb == "filter")
                # The decision lines first (the budget still holds the body: the decision
                # keeps the parsed nodes until its line is written).
                await _written(pending)
        except BadRequest as exc:
            response = json_response({"Error": str(exc)}, exc.status, exc.headers)
        except Exception as exc:  # report, never crash the scheduler's call with a bare 500 page
            # The details go to the log; the caller learns only that it failed (an exception's
            # text can hold paths, node names of others, or values of the process).
            log.exception("%s failed (%s)", verb, type(exc).__name__)
            response = json_response({"Error": "internal error (see the extender's log)"}, 500)
        metrics.requests.labels(verb, str(response.status_code)).inc()
        metrics.latency.labels(verb).observe(time.perf_counter() - started)
        return response

    @app.post("/prioritize")
    async def prioritize(request: Request) -> Response:
        """kube-scheduler's prioritize call: ExtenderArgs in, a HostPriorityList out — each node's
        score, 0–10 (shadow mode: 5 for every node, the recommendation only recorded)."""
        return await handle("prioritize", request, extender.prioritize)

    @app.post("/filter")
    async def filter_(request: Request) -> Response:
        """kube-scheduler's filter call: ExtenderArgs in, an ExtenderFilterResult out — the nodes
        kept, in the form they came (Nodes or NodeNames), and FailedNodes: those a power cap
        excludes, with the reason (active mode; shadow mode keeps every node)."""
        return await handle("filter", request, extender.filter)

    @app.get("/healthz")
    async def healthz() -> Response:
        """Liveness: 200 `ok` while the process serves."""
        return PlainTextResponse("ok\n")

    @app.get("/readyz")
    async def readyz() -> Response:
        """Readiness: 200 once the first telemetry refresh is done, else 503."""
        if extender.ready:
            return PlainTextResponse("ready\n")
        return PlainTextResponse("telemetry not loaded yet\n", status_code=503)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        """The extender's Prometheus metrics (text exposition format)."""
        return Response(generate_latest(metrics.registry), media_type="text/plain; version=0.0.4")

    @app.exception_handler(405)
    async def wrong_method(request: Request, exc: Exception) -> Response:
        return JSONResponse({"Error": f"{request.method} is not allowed on {request.url.path}"}, 405)

    return app


class _Pools:
    """The request threads: one for large bodies, a few for small ones; made when first needed
    (again after a shutdown: an app may be served more than once)."""

    def __init__(self) -> None:
        self._pools: dict[bool, ThreadPoolExecutor] = {}

    def get(self, large: bool) -> ThreadPoolExecutor:
        pool = self._pools.get(large)
        if pool is None:
            pool = self._pools[large] = ThreadPoolExecutor(
                1 if large else SMALL_REQUEST_THREADS,
                thread_name_prefix="extender-large-request" if large else "extender-request",
            )
        return pool

    def shutdown(self) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.shutdown(wait=False, cancel_futures=True)


async def _written(pending: list[Pending]) -> None:
    """Wait for the announced decision lines, each at most its timeout (a late line is the
    recorder's to count; the answer goes out regardless). `asyncio.wait` never cancels them."""
    for item in pending:
        if not item.written.done():
            await asyncio.wait([asyncio.wrap_future(item.written)], timeout=item.timeout_seconds)
