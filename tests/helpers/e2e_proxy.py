"""A plain-HTTP proxy to the test control plane's API server (as `kubectl proxy` is one: our
processes reach it with `kubernetes.host: http://127.0.0.1:PORT`; it adds the credentials: a
ServiceAccount's token, or the admin's certificate), which can hold a chosen
request until the test releases it — the deterministic way to make something happen between a
process's decision and the call that carries it out (a node deleted before a binding arrives,
a PodDisruptionBudget spent before an eviction arrives). Everything else passes through as it
is, watches streamed."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rl.cluster.controlplane import Cluster

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass
class Hold:
    """One request to hold: the first whose method and path (with its query) match."""

    method: str
    path: re.Pattern[str]
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    seen_path: str = ""
    body: bytes = b""  # the held request's body
    answer: int = 0  # the API server's status for it, once released and answered

    def wait_arrived(self, timeout: float) -> str:
        assert self.arrived.wait(timeout), f"no {self.method} {self.path.pattern} within {timeout:g} s"
        return self.seen_path

    def release(self) -> None:
        self.released.set()


class ApiProxy:
    def __init__(self, cluster: Cluster, token: str | None = None) -> None:
        """Requests go on with `token` (a ServiceAccount's), else as the cluster's admin."""
        self.cluster = cluster
        context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
        if token is None:
            context.load_cert_chain(str(cluster.pki / "admin.crt"), str(cluster.pki / "admin.key"))
        self._token = token
        self._context = context
        self._holds: list[Hold] = []
        self._upstreams: set[http.client.HTTPSConnection] = set()  # open now (watches: long)
        self._lock = threading.Lock()
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status) of each answered
        self._streamed = bytearray()  # every watch's bytes as passed on, all watches together
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                proxy._forward(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any  # noqa: N815 (http.server's names)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 — quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def watched(self) -> list[tuple[str, str, str]]:
        """(type, kind, name) of every watch event passed on to the client so far."""
        with self._lock:
            lines = bytes(self._streamed).splitlines()
        events = []
        for line in lines:
            event = json.loads(line)
            obj = event.get("object") or {}
            events.append((event.get("type", ""), obj.get("kind", ""), (obj.get("metadata") or {}).get("name", "")))
        return events

    def hold(self, method: str, path_pattern: str) -> Hold:
        hold = Hold(method, re.compile(path_pattern))
        with self._lock:
            self._holds.append(hold)
        return hold

    def _claim(self, method: str, path: str, body: bytes) -> Hold | None:
        with self._lock:
            for hold in self._holds:
                if hold.method == method and hold.path.search(path) and not hold.arrived.is_set():
                    hold.seen_path, hold.body = path, body
                    hold.arrived.set()
                    return hold
        return None

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        hold = self._claim(handler.command, handler.path, body or b"")
        if hold is not None:
            hold.released.wait(120)
        headers = {k: v for k, v in handler.headers.items()
                   if k.lower() not in HOP_BY_HOP and k.lower() not in ("host", "authorization")}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        upstream = http.client.HTTPSConnection("127.0.0.1", self.cluster.api_port, context=self._context,
                                               timeout=400)
        with self._lock:
            self._upstreams.add(upstream)
        try:
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            response = upstream.getresponse()
            if hold is not None:
                hold.answer = response.status
            self.requests.append((handler.command, handler.path, response.status))
            handler.send_response(response.status, response.reason)
            chunked = response.getheader("Content-Length") is None
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    handler.send_header(name, value)
            if chunked:
                handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            if not chunked:
                handler.wfile.write(response.read())
                return
            pending = b""
            while data := response.read1(65536):  # a watch: pass each piece on as it comes
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                handler.wfile.flush()
                lines, _, pending = (pending + data).rpartition(b"\n")
                if lines:
                    with self._lock:
                        self._streamed += lines + b"\n"
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            handler.close_connection = True  # the client or the API server went away
        finally:
            with self._lock:
                self._upstreams.discard(upstream)
            upstream.close()

    def start(self) -> ApiProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            for hold in self._holds:
                hold.release()
            upstreams = list(self._upstreams)
        self._server.shutdown()
        self._server.server_close()
        for upstream in upstreams:  # ends the watches still streaming
            with contextlib.suppress(OSError):
                if upstream.sock is not None:
                    upstream.sock.shutdown(socket.SHUT_RDWR)


@contextmanager
def api_proxy(cluster: Cluster, token: str | None = None) -> Iterator[ApiProxy]:
    proxy = ApiProxy(cluster, token).start()
    try:
        yield proxy
    finally:
        proxy.stop()
