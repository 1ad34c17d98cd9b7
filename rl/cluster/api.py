"""The few Kubernetes API calls the control-plane harness makes itself (readiness, nodes, the
kwok node groups), over HTTPS with a client certificate. The harness deliberately does not use
the kubernetes client: only the scheduler's adapter imports it (import-linter), and what is
needed here is a handful of JSON requests."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.jsonvalue import JsonObject


class ApiError(RuntimeError):
    """An API answer outside 2xx: its status and the server's message."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status


def _message(body: bytes) -> str:
    try:
        decoded = json.loads(body)
    except ValueError:
        return body.decode(errors="replace")[:300]
    return str(decoded.get("message", decoded)) if isinstance(decoded, dict) else str(decoded)[:300]


@dataclass(frozen=True)
class Api:
    """An HTTPS endpoint with the CA that signed it and, optionally, a client certificate."""

    host: str
    port: int
    ca: Path
    cert: Path | None = None
    key: Path | None = None
    token: str | None = None
    timeout: float = 10.0

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if self.cert is not None and self.key is not None:
            context.load_cert_chain(str(self.cert), str(self.key))
        return context

    def _connect(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self._context(), timeout=timeout)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def request(
        self, method: str, path: str, body: object = None, *, content_type: str = "application/json"
    ) -> Any:
        """The decoded JSON answer (or text for non-JSON answers); ApiError outside 2xx."""
        connection = self._connect(self.timeout)
        headers = self._headers()
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        if not 200 <= response.status < 300:
            raise ApiError(method, path, response.status, _message(raw))
        text = raw.decode(errors="replace")
        if response.getheader("Content-Type", "").startswith("application/json") and text.strip():
            try:
                return json.loads(text)
            except ValueError:  # a watch's stream of events, one JSON object a line
                return text
        return text

    def watch(self, path: str, timeout_seconds: int = 3600) -> Iterator[JsonObject]:
        """The events of a watch on `path` (a list URL), one decoded event at a time, until the
        server ends it (after `timeout_seconds`) or the caller stops iterating."""
        separator = "&" if "?" in path else "?"
        url = f"{path}{separator}watch=true&timeoutSeconds={timeout_seconds}"
        connection = self._connect(timeout_seconds + 30)
        try:
            connection.request("GET", url, headers=self._headers())
            response = connection.getresponse()
            if response.status != 200:
                raise ApiError("GET", url, response.status, _message(response.read()))
            for line in response:
                if line.strip():
                    event = json.loads(line)
                    yield event if isinstance(event, dict) else {}
        finally:
            connection.close()

    def exists(self, path: str) -> bool:
        """Whether the object at `path` is there (404: no; any other error is raised)."""
        try:
            self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def healthy(self, path: str) -> bool:
        """True when `path` answers 2xx now (connection errors and 5xx are 'not yet')."""
        try:
            self.request("GET", path)
        except (OSError, ApiError, http.client.HTTPException):
            return False
        return True


def _answers_2xx(connection: http.client.HTTPConnection, path: str) -> bool:
    try:
        connection.request("GET", path)
        return 200 <= connection.getresponse().status < 300
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def probe_http(host: str, port: int, path: str, timeout: float = 2.0) -> bool:
    """True when a plain-HTTP `path` answers 2xx (etcd's /health)."""
    return _answers_2xx(http.client.HTTPConnection(host, port, timeout=timeout), path)


def probe_https_anonymous(host: str, port: int, path: str, timeout: float = 2.0) -> bool:
    """True when an HTTPS `path` answers 2xx without verifying the server (the components' own
    self-signed /healthz endpoints, which allow anonymous health checks)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return _answers_2xx(http.client.HTTPSConnection(host, port, context=context, timeout=timeout), path)
