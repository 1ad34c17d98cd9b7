"""The scheduler's only door to the Kubernetes API (the one module that imports `kubernetes`).

Thin on purpose: each function makes one API call and returns plain JSON dicts (camelCase, as the
API serves them), so everything above this module is plain data and tested without a cluster.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import msgspec
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.kube_http import ApiError, lean_request, transport_of

# -- client --------------------------------------------------------------------------------------


def make_api_client(host: str | None = None, kubeconfig: str | None = None) -> client.ApiClient:
    """An API client: to `host` without credentials (tests, `kubectl proxy`), else in-cluster
    service-account credentials, else the kubeconfig file (`kubeconfig` or $KUBECONFIG)."""
    if host:
        configuration = client.Configuration()
        configuration.host = host.rstrip("/")
        return client.ApiClient(configuration)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config(config_file=kubeconfig)
    return client.ApiClient()


def _json(response: Any) -> dict[str, Any]:
    data = json.loads(response.data)
    if not isinstance(data, dict):
        raise ValueError("the API answered with something other than a JSON object")
    return data


# -- telemetry reads (issue 6: TelemetryStore) ---------------------------------------------------


def list_endpoint_slices(
    api: client.ApiClient, namespace: str, service: str, timeout_seconds: float = 10.0
) -> list[dict[str, Any]]:
    """The EndpointSlices of a Service (discovery.k8s.io/v1), as JSON dicts."""
    response = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        namespace,
        label_selector=f"kubernetes.io/service-name={service}",
        _preload_content=False,
        _request_timeout=timeout_seconds,
    )
    return list(_json(response).get("items") or [])


def list_node_metrics(api: client.ApiClient, timeout_seconds: float = 10.0) -> list[dict[str, Any]]:
    """Node usage from the Metrics Server (metrics.k8s.io/v1beta1 NodeMetrics), as JSON dicts."""
    response = client.CustomObjectsApi(api).list_cluster_custom_object(
        "metrics.k8s.io", "v1beta1", "nodes", _preload_content=False, _request_timeout=timeout_seconds
    )
    return list(_json(response).get("items") or [])


def list_nodes_json(api: client.ApiClient, timeout_seconds: float = 10.0) -> list[dict[str, Any]]:
    """All Nodes (v1), as JSON dicts (for their capacity and allocatable)."""
    response = client.CoreV1Api(api).list_node(
        _preload_content=False, _request_timeout=timeout_seconds
    )
    return list(_json(response).get("items") or [])


# -- standalone scheduler (issue 7): pods, nodes, binding, events, leases ------------------------
#
# These go through the client's own request path (its configuration: host, credentials, TLS,
# proxy) but skip its typed wrappers: the wrappers validate every call with pydantic (the first
# call of each costs seconds while the validator is built) and deserialize answers into models,
# which for a Binding fails outright — the API answers a Status, the client expects a
# V1Binding with a `target`. Raw JSON in, raw JSON out.

COORDINATION = "/apis/coordination.k8s.io/v1"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _request(
    api: client.ApiClient,
    method: str,
    path: str,
    query: list[tuple[str, Any]] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: float | tuple[float, float] | None = 10.0,
) -> Any:
    """One API request; returns the raw urllib3 response (unread) of a 2xx answer."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    try:
        method, url, headers, body, _ = api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(method, url, header_params=headers, body=body,
                                _request_timeout=timeout).response
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
        message = ""
        try:
            message = str(json.loads(raw).get("message") or "")
        except (ValueError, AttributeError):
            message = raw[:500].decode(errors="replace")
        raise ApiError(response.status, str(response.reason or ""), message)
    return response


def _request_json(api: client.ApiClient, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    transport = transport_of(api)
    if transport is not None:
        data = msgspec.json.decode(lean_request(transport, method, path, **kwargs))
        if not isinstance(data, dict):
            raise ApiError(None, "ValueError", "the API answered with something other than a JSON object")
        return data
    response = _request(api, method, path, **kwargs)
    try:
        return _json(response)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ApiError(None, type(exc).__name__, str(exc)) from exc
    finally:
        response.release_conn()


def _get_or_none(api: client.ApiClient, path: str, timeout_seconds: float) -> dict[str, Any] | None:
    """GET one object; None when it does not exist (404)."""
    try:
        return _request_json(api, "GET", path, timeout=timeout_seconds)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


def _send(api: client.ApiClient, method: str, path: str, body: Any, timeout_seconds: float) -> None:
    """A request whose answer is not needed (it is not parsed, the connection goes back)."""
    transport = transport_of(api)
    if transport is not None:
        lean_request(transport, method, path, body=body, timeout=timeout_seconds)
        return
    _request(api, method, path, body=body, timeout=timeout_seconds).release_conn()


def _list(
    api: client.ApiClient, path: str, query: list[tuple[str, Any]], timeout_seconds: float
) -> tuple[list[dict[str, Any]], str | None]:
    data = _request_json(api, "GET", path, query=query, timeout=timeout_seconds)
    return list(data.get("items") or []), (data.get("metadata") or {}).get("resourceVersion")


def list_pods(
    api: client.ApiClient, field_selector: str | None = None, timeout_seconds: float = 60.0
) -> tuple[list[dict[str, Any]], str | None]:
    """All pods (optionally by field selector) and the list's resourceVersion."""
    query = [("fieldSelector", field_selector)] if field_selector else []
    return _list(api, "/api/v1/pods", query, timeout_seconds)


def list_nodes(
    api: client.ApiClient, timeout_seconds: float = 60.0
) -> tuple[list[dict[str, Any]], str | None]:
    """All nodes and the list's resourceVersion."""
    return _list(api, "/api/v1/nodes", [], timeout_seconds)


class WatchStream:
    """One watch request: iterate `{"type": …, "object": {…}}` events; `close()` from another
    thread ends the iteration. A read timeout or a dropped connection ends it too (the caller
    watches again); an ERROR event raises ApiError (410 Gone: list again)."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
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


def _watch(
    api: client.ApiClient,
    path: str,
    query: list[tuple[str, Any]],
    resource_version: str | None,
    timeout_seconds: int,
    read_timeout_seconds: float,
) -> WatchStream:
    query = [*query, ("watch", "true"), ("allowWatchBookmarks", "true"),
             ("timeoutSeconds", str(timeout_seconds))]
    if resource_version:
        query.append(("resourceVersion", resource_version))
    return WatchStream(
        _request(api, "GET", path, query=query, timeout=(10.0, read_timeout_seconds))
    )


def watch_pods(
    api: client.ApiClient,
    resource_version: str | None = None,
    field_selector: str | None = None,
    timeout_seconds: int = 300,
    read_timeout_seconds: float = 330.0,
) -> WatchStream:
    query = [("fieldSelector", field_selector)] if field_selector else []
    return _watch(api, "/api/v1/pods", query, resource_version, timeout_seconds,
                  read_timeout_seconds)


def watch_nodes(
    api: client.ApiClient,
    resource_version: str | None = None,
    timeout_seconds: int = 300,
    read_timeout_seconds: float = 330.0,
) -> WatchStream:
    return _watch(api, "/api/v1/nodes", [], resource_version, timeout_seconds,
                  read_timeout_seconds)


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}"


def get_pod(
    api: client.ApiClient, namespace: str, name: str, timeout_seconds: float = 10.0
) -> dict[str, Any] | None:
    return _get_or_none(api, _pod_path(namespace, name), timeout_seconds)


def bind_pod(
    api: client.ApiClient,
    namespace: str,
    name: str,
    uid: str,
    node: str,
    timeout_seconds: float = 10.0,
) -> None:
    """POST the Binding subresource (pods/NAME/binding), as kube-scheduler does. 409 when the
    pod is already bound; the uid precondition makes a binding meant for a deleted and
    recreated pod fail instead of placing the new one. The answer (a Status) is not parsed."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    _send(api, "POST", _pod_path(namespace, name) + "/binding", body, timeout_seconds)


def _patch(api: client.ApiClient, path: str, patch: dict[str, Any], timeout_seconds: float) -> dict[str, Any]:
    return _request_json(api, "PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH,
                         timeout=timeout_seconds)


def patch_pod(
    api: client.ApiClient,
    namespace: str,
    name: str,
    patch: dict[str, Any],
    timeout_seconds: float = 10.0,
) -> dict[str, Any]:
    """Strategic-merge-patch a pod (metadata such as annotations): RBAC `pods` patch."""
    return _patch(api, _pod_path(namespace, name), patch, timeout_seconds)


def patch_pod_status(
    api: client.ApiClient,
    namespace: str,
    name: str,
    patch: dict[str, Any],
    timeout_seconds: float = 10.0,
) -> dict[str, Any]:
    """Strategic-merge-patch a pod's status (conditions merge by their `type`): RBAC
    `pods/status` patch."""
    return _patch(api, _pod_path(namespace, name) + "/status", patch, timeout_seconds)


def create_event(
    api: client.ApiClient, namespace: str, event: dict[str, Any], timeout_seconds: float = 10.0
) -> None:
    """Create a core/v1 Event (what `kubectl describe pod` shows)."""
    _send(api, "POST", f"/api/v1/namespaces/{_segment(namespace)}/events", event, timeout_seconds)


def patch_event(
    api: client.ApiClient, namespace: str, name: str, patch: dict[str, Any], timeout_seconds: float = 10.0
) -> None:
    """Strategic-merge-patch an Event (a repeat: its count and lastTimestamp)."""
    _request_json(api, "PATCH", f"/api/v1/namespaces/{_segment(namespace)}/events/{_segment(name)}",
                  body=patch, content_type=STRATEGIC_MERGE_PATCH, timeout=timeout_seconds)


def _lease_path(namespace: str, name: str | None = None) -> str:
    path = f"{COORDINATION}/namespaces/{_segment(namespace)}/leases"
    return f"{path}/{_segment(name)}" if name else path


def get_lease(
    api: client.ApiClient, namespace: str, name: str, timeout_seconds: float = 5.0
) -> dict[str, Any] | None:
    return _get_or_none(api, _lease_path(namespace, name), timeout_seconds)


def create_lease(
    api: client.ApiClient, namespace: str, lease: dict[str, Any], timeout_seconds: float = 5.0
) -> dict[str, Any]:
    return _request_json(api, "POST", _lease_path(namespace), body=lease, timeout=timeout_seconds)


def replace_lease(
    api: client.ApiClient,
    namespace: str,
    name: str,
    lease: dict[str, Any],
    timeout_seconds: float = 5.0,
) -> dict[str, Any]:
    """PUT the lease; its metadata.resourceVersion makes a concurrent change a 409 Conflict."""
    return _request_json(api, "PUT", _lease_path(namespace, name), body=lease,
                         timeout=timeout_seconds)


# -- the energy rebalancer (issue 23): evictions, PodDisruptionBudgets, node annotations --------


def evict_pod(
    api: client.ApiClient, namespace: str, name: str, uid: str, timeout_seconds: float = 10.0
) -> None:
    """POST the Eviction subresource (pods/NAME/eviction, policy/v1), as `kubectl drain` and
    cluster-autoscaler do: the API server checks the pod's PodDisruptionBudget and answers 429
    when it allows no disruption now, 404 when the pod is gone; the uid precondition makes an
    eviction meant for a deleted and recreated pod fail (409) instead of taking the new one."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    _send(api, "POST", _pod_path(namespace, name) + "/eviction", body, timeout_seconds)


def list_pod_disruption_budgets(
    api: client.ApiClient, timeout_seconds: float = 10.0
) -> list[dict[str, Any]]:
    """Every PodDisruptionBudget (policy/v1), as JSON dicts."""
    items, _ = _list(api, "/apis/policy/v1/poddisruptionbudgets", [], timeout_seconds)
    return items


def patch_node(
    api: client.ApiClient, name: str, patch: dict[str, Any], timeout_seconds: float = 10.0
) -> dict[str, Any]:
    """Strategic-merge-patch a node (metadata such as annotations): RBAC `nodes` patch."""
    return _patch(api, f"/api/v1/nodes/{_segment(name)}", patch, timeout_seconds)


def get_node(api: client.ApiClient, name: str, timeout_seconds: float = 10.0) -> dict[str, Any] | None:
    return _get_or_none(api, f"/api/v1/nodes/{_segment(name)}", timeout_seconds)
