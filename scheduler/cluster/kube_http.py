"""A lean HTTP transport for the scheduler's small API calls (bindings, Events, status patches,
gets), part of `scheduler/cluster/kube.py`'s door to the Kubernetes API (`kube_request.py` takes
it where it stands in), and the error every call raises (`ApiError`).

The `kubernetes` client's request path (parameter serialization, urllib3's pool manager, its
response wrappers) costs about 0.8 ms of CPU per call; a binding and an Event per pod made it
most of the standalone scheduler's CPU outside its decisions. Here each calling thread keeps one
keep-alive `http.client` connection to the API server, configured from the client's own
`Configuration` — host, TLS (CA, client certificate, verification), bearer token (refreshed by
the client's own hook), User-Agent — and bodies are encoded by msgspec: about a third of the
CPU. A connection the server closed while idle is opened again once, as urllib3 does. A
configuration this transport does not reproduce (a proxy, a TLS server name or hostname
assertion, socket options) is served by the client's own path instead (`usable()` says which).
"""

from __future__ import annotations

import http.client
import ssl
import threading
import urllib.parse
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

# A connection the server closed while it sat idle: the request never reached it (opened again
# once, as urllib3 does for a dropped connection).
_DROPPED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
_ENCODER = msgspec.json.Encoder()


class ClientConfiguration(Protocol):
    """The `kubernetes` client's `Configuration` (kubernetes 37.0.3 has every field below), as
    far as this transport reads it."""

    @property
    def host(self) -> str: ...
    @property
    def ssl_ca_cert(self) -> str | None: ...
    @property
    def ca_cert_data(self) -> str | bytes | None: ...
    @property
    def verify_ssl(self) -> bool: ...
    @property
    def cert_file(self) -> str | None: ...
    @property
    def key_file(self) -> str | None: ...
    # what this transport does not reproduce (`usable`)
    @property
    def proxy(self) -> str | None: ...
    @property
    def tls_server_name(self) -> str | None: ...
    @property
    def assert_hostname(self) -> bool | str | None: ...
    @property
    def socket_options(self) -> Sequence[tuple[int, int, int | bytes]] | None: ...

    def auth_settings(self) -> Mapping[str, Mapping[str, str]]: ...


class Client(Protocol):
    """The `kubernetes` client's `ApiClient`, as far as this transport reads it."""

    @property
    def configuration(self) -> ClientConfiguration: ...
    @property
    def user_agent(self) -> str: ...
    @property
    def default_headers(self) -> Mapping[str, str]: ...


# Query parameters, in order (a key may repeat).
Query = list[tuple[str, str]]


def usable(configuration: ClientConfiguration) -> bool:
    """Whether this transport reproduces the client's connection for `configuration`."""
    scheme = urllib.parse.urlsplit(configuration.host).scheme
    return (
        scheme in ("http", "https")
        and not configuration.proxy
        and not configuration.tls_server_name
        and configuration.assert_hostname in (None, True)
        and configuration.socket_options is None
    )


def _ssl_context(configuration: ClientConfiguration) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert, cadata=configuration.ca_cert_data)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context


class Response:
    """A finished response: status, reason and the body, read whole."""

    __slots__ = ("status", "reason", "data")

    def __init__(self, status: int, reason: str, data: bytes) -> None:
        self.status = status
        self.reason = reason
        self.data = data


class _ThreadConnection(threading.local):
    """A calling thread's connection (None until its first request, or after `close()`) and
    whether a request has gone through it."""

    connection: http.client.HTTPConnection | None = None
    used: bool = False


class Transport:
    """Keep-alive connections to one API server, one per calling thread."""

    def __init__(self, api: Client) -> None:
        configuration = api.configuration
        url = urllib.parse.urlsplit(configuration.host)
        self._https = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._https else 80)
        self._base = url.path.rstrip("/")
        self._context = _ssl_context(configuration) if self._https else None
        self._api = api
        self._local = _ThreadConnection()

    def _headers(self, content_type: str | None) -> dict[str, str]:
        api = self._api
        headers = {"Accept": "application/json", "User-Agent": api.user_agent, **api.default_headers}
        if content_type is not None:
            headers["Content-Type"] = content_type
        # As the client applies its "BearerToken" setting (its hook refreshes the token).
        token = api.configuration.auth_settings().get("BearerToken")
        if token and token.get("in") == "header" and token.get("value"):
            headers[token["key"]] = token["value"]
        return headers

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        connection = self._local.connection
        if connection is None:
            if self._https:
                connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=self._context
                )
            else:
                connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            self._local.connection = connection
            self._local.used = False
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

    def close(self) -> None:
        """Close this thread's connection."""
        connection = self._local.connection
        self._local.connection = None
        if connection is not None:
            connection.close()

    def request(
        self,
        method: str,
        path: str,
        query: str = "",
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 10.0,
    ) -> Response:
        """One request; OSError (or http.client's errors) when the server is not reached."""
        payload = None if body is None else _ENCODER.encode(body)
        target = self._base + path + (f"?{query}" if query else "")
        headers = self._headers(content_type if payload is not None else None)
        for attempt in (1, 2):
            connection = self._connection(timeout)
            reused = self._local.used
            try:
                connection.request(method, target, body=payload, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
            except _DROPPED:
                self.close()
                if attempt == 1 and reused:
                    continue
                raise
            except BaseException:
                self.close()
                raise
            self._local.used = True
            if answer.will_close:
                self.close()
            return Response(answer.status, answer.reason, data)
        raise AssertionError("unreachable")


class ApiError(Exception):
    """An API call that failed: `status` is the HTTP status, None when the server was not
    reached or the connection broke."""

    def __init__(self, status: int | None, reason: str, message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if status else f"{reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404


def error_of(status: int, reason: str, body: bytes) -> ApiError:
    """The ApiError of an answer that is not 2xx: the message of the Status it holds, else (not
    a Status) the start of its body."""
    try:
        message = str(msgspec.json.decode(body).get("message") or "")
    except (ValueError, AttributeError):  # msgspec.DecodeError is a ValueError
        message = body[:500].decode(errors="replace")
    return ApiError(status, reason, message)


_TRANSPORTS: weakref.WeakKeyDictionary[Client, Transport | None] = weakref.WeakKeyDictionary()
_TRANSPORTS_LOCK = threading.Lock()


def transport_of(api: Client) -> Transport | None:
    """The lean transport of `api` (kube_http.py), None where it cannot stand in."""
    try:
        return _TRANSPORTS[api]
    except KeyError:
        pass
    with _TRANSPORTS_LOCK:
        if api not in _TRANSPORTS:
            _TRANSPORTS[api] = Transport(api) if usable(api.configuration) else None
        return _TRANSPORTS[api]


@dataclass(frozen=True, slots=True)
class Call:
    """One API request, as either path sends it (this transport, or the client's own:
    `kube_request.py`). `timeout`: seconds, or (connect, read) seconds."""

    method: str
    path: str
    query: Query | None = None
    body: object = None  # what msgspec encodes (JSON objects, a patch's list)
    content_type: str = "application/json"
    timeout: float | tuple[float, float] | None = 10.0


def lean_request(transport: Transport, call: Call) -> bytes:
    """One request through the lean transport: the body of a 2xx answer, else ApiError."""
    timeout = call.timeout
    seconds = max(timeout) if isinstance(timeout, tuple) else (timeout or 60.0)
    try:
        answer = transport.request(
            call.method, call.path, urllib.parse.urlencode(call.query or []), call.body,
            call.content_type, seconds,
        )
    except (OSError, http.client.HTTPException) as exc:
        raise ApiError(None, type(exc).__name__, str(exc)) from exc
    if not 200 <= answer.status <= 299:
        raise error_of(answer.status, answer.reason, answer.data)
    return answer.data


