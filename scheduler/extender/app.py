"""The extender's HTTP app (FastAPI): `POST /filter`, `POST /prioritize`, `/healthz`, `/readyz`,
`/metrics`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import generate_latest

from scheduler.extender.core import Extender
from scheduler.extender.wire import BadRequest, ExtenderArgs, json_response, parse_args, read_body

log = logging.getLogger(__name__)


def create_app(extender: Extender, manage_store: bool = True) -> FastAPI:
    """The extender's HTTP app; with `manage_store` the store's refresh thread follows the app."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        if manage_store:
            extender.start()
        try:
            yield
        finally:
            if manage_store:
                extender.stop()

    app = FastAPI(title="kubejoule scheduler extender", lifespan=lifespan, docs_url=None, redoc_url=None)
    metrics = extender.metrics

    async def handle(verb: str, request: Request, answer: Callable[[ExtenderArgs], Any]) -> Response:
        started = time.perf_counter()
        try:
            body = await read_body(request, extender.body_limit())
            response = json_response(answer(parse_args(body, extender.states.node_info)))
        except BadRequest as exc:
            response = json_response({"Error": str(exc)}, exc.status)
        except Exception as exc:  # report, never crash the scheduler's call with a bare 500 page
            log.exception("%s failed", verb)
            response = json_response({"Error": f"internal error: {exc!r}"}, 500)
        metrics.requests.labels(verb, str(response.status_code)).inc()
        metrics.latency.labels(verb).observe(time.perf_counter() - started)
        return response

    @app.post("/prioritize")
    async def prioritize(request: Request) -> Response:
        return await handle("prioritize", request, extender.prioritize)

    @app.post("/filter")
    async def filter_(request: Request) -> Response:
        return await handle("filter", request, extender.filter)

    @app.get("/healthz")
    async def healthz() -> Response:
        return PlainTextResponse("ok\n")

    @app.get("/readyz")
    async def readyz() -> Response:
        if extender.ready:
            return PlainTextResponse("ready\n")
        return PlainTextResponse("telemetry not loaded yet\n", status_code=503)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.registry), media_type="text/plain; version=0.0.4")

    @app.exception_handler(405)
    async def wrong_method(request: Request, exc: Exception) -> Response:
        return JSONResponse({"Error": f"{request.method} is not allowed on {request.url.path}"}, 405)

    return app
