"""How `scheduler/cluster/kube.py`'s calls reach the API server: one request, through the lean
transport (`kube_http.py`) where it stands in for the client, else through the `kubernetes`
client's own request path; its answer as JSON, or as a watch's stream of events.

The client's path (its configuration: host, credentials, TLS, proxy) is taken without its typed
wrappers: the wrappers validate every call with pydantic (the first call of each costs seconds
while the validator is built) and deserialize answers into models, which for a Binding fails
outright — the API answers a Status, the client expects a V1Binding with a `target`. Raw JSON
in, raw JSON out.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Protocol, cast

import msgspec
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from common.jsonvalue import subobject, subobjects
from scheduler.cluster.kube_http import ApiError, Call, Query, error_of, lean_request, transport_of

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class RawResponse(Protocol):
    """The client's answer unread (urllib3's response, `_preload_content=False`), as read here."""

    status: int
    reason: str | None

    @property
    def data(self) -> bytes: ...

    def stream(self, amt: int | None = ..., decode_content: bool | None = ...) -> Iterator[bytes]: ...

    def release_conn(self) -> None: ...

    def shutdown(self) -> None: ...


def segment(value: str) -> str:
    """A path segment (a name or namespace), escaped."""
    return urllib.parse.quote(value, safe="")


def unread(response: object) -> RawResponse:
    """The answer of one of the client's typed calls made with `_preload_content=False`: the
    raw response, unread (the call's annotation names the model it would have built)."""
    return cast(RawResponse, response)


def json_object(response: RawResponse) -> dict[str, object]:
    """The JSON object a response of the client holds."""
    data = json.loads(response.data)
    if not isinstance(data, dict):
        raise ValueError("the API answered with something other than a JSON object")
    return data


def request(api: client.ApiClient, call: Call) -> RawResponse:
    """One API request through the client; returns the raw urllib3 response (unread) of a 2xx
    answer."""
    headers = {"Accept": "application/json"}
    if call.body is not None:
        headers["Content-Type"] = call.content_type
    try:
        method, url, headers, body, _ = api.param_serialize(
            method=call.method,
            resource_path=call.path,
            query_params=call.query or None,
            header_params=headers,
            body=call.body,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(method, url, header_params=headers, body=body,
                                _request_timeout=call.timeout).response
    except ApiException as exc:
        raise ApiError(exc.status, str(exc.reason or ""), str(exc.body or "")[:500]) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ApiError(None, type(exc).__name__, str(exc)) from exc
    if not 200 <= response.status <= 299:
        try:
            raw = response.data
        except (urllib3.exceptions.HTTPError, OSError):
            raw = b""
        finally:
            response.release_conn()
        raise error_of(response.status, str(response.reason or ""), raw)
    return response


def request_json(
    api: client.ApiClient, method: str, path: str, *, body: object = None,
    content_type: str = "application/json", timeout: float | None = 10.0,
) -> dict[str, object]:
    """One API request (`Call`'s fields); the JSON object of its 2xx answer."""
    return _json(api, Call(method, path, body=body, content_type=content_type, timeout=timeout))


def _json(api: client.ApiClient, call: Call) -> dict[str, object]:
    transport = transport_of(api)
    if transport is not None:
        data = msgspec.json.decode(lean_request(transport, call))
        if not isinstance(data, dict):
            raise ApiError(None, "ValueError", "the API answered with something other than a JSON object")
        return data
    response = request(api, call)
    try:
        return json_object(response)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ApiError(None, type(exc).__name__, str(exc)) from exc
    finally:
        response.release_conn()


def get_or_none(api: client.ApiClient, path: str, timeout_seconds: float) -> dict[str, object] | None:
    """GET one object; None when it does not exist (404)."""
    try:
        return request_json(api, "GET", path, timeout=timeout_seconds)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


def send(api: client.ApiClient, method: str, path: str, body: object, timeout_seconds: float) -> None:
    """A request whose answer is not needed (it is not parsed, the connection goes back)."""
    call = Call(method, path, body=body, timeout=timeout_seconds)
    transport = transport_of(api)
    if transport is not None:
        lean_request(transport, call)
        return
    request(api, call).release_conn()


def list_items(
    api: client.ApiClient, path: str, query: Query, timeout_seconds: float
) -> tuple[list[dict[str, object]], str | None]:
    """A list's items and its resourceVersion."""
    data = _json(api, Call("GET", path, query=query, timeout=timeout_seconds))
    version = subobject(data, "metadata").get("resourceVersion")
    return subobjects(data, "items"), version if isinstance(version, str) else None


def merge_patch(api: client.ApiClient, path: str, body: Mapping[str, object], timeout_seconds: float) -> dict[str, object]:
    """A strategic-merge patch; the object patched."""
    return request_json(api, "PATCH", path, body=body, content_type=STRATEGIC_MERGE_PATCH,
                        timeout=timeout_seconds)


class WatchStream:
    """One watch request: iterate `{"type": …, "object": {…}}` events; `close()` from another
    thread ends the iteration. A read timeout or a dropped connection ends it too (the caller
    watches again); an ERROR event raises ApiError (410 Gone: list again)."""

    def __init__(self, response: RawResponse) -> None:
        self._response = response
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, object]]:
        pending = b""
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                pending += chunk
                start = 0
                while (end := pending.find(b"\n", start)) != -1:
                    line = pending[start:end].strip()
                    start = end + 1
                    if line:
                        event = msgspec.json.decode(line)  # twice json's speed; a ValueError too
                        if event.get("type") == "ERROR":
                            status = event.get("object") or {}
                            raise ApiError(
                                int(status.get("code") or 500),
                                str(status.get("reason") or "Error"),
                                str(status.get("message") or ""),
                            )
                        yield event
                pending = pending[start:]
        except (urllib3.exceptions.HTTPError, OSError, ValueError):
            return  # timeout, broken stream or closed by us: the caller watches again
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # closing a dead stream must never raise
            self._response.shutdown()
        with contextlib.suppress(Exception):
            self._response.release_conn()


def watch(
    api: client.ApiClient,
    path: str,
    query: Query,
    resource_version: str | None,
    timeout_seconds: int,
    read_timeout_seconds: float,
) -> WatchStream:
    query = [*query, ("watch", "true"), ("allowWatchBookmarks", "true"),
             ("timeoutSeconds", str(timeout_seconds))]
    if resource_version:
        query.append(("resourceVersion", resource_version))
    return WatchStream(
        request(api, Call("GET", path, query=query, timeout=(10.0, read_timeout_seconds)))
    )
