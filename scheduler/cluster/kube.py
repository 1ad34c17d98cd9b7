"""The scheduler's only door to the Kubernetes API: every call it makes, one function each (the
deployment's RBAC is checked against this list, tests/deploy).

Thin on purpose: each function makes one API call and returns plain JSON dicts (camelCase, as the
API serves them), so everything above this module is plain data and tested without a cluster.
How a request reaches the API server (the `kubernetes` client's path or the lean transport, a
watch's stream) is `kube_request.py`'s; only these two modules import `kubernetes`.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubernetes import client, config

from common.jsonvalue import subobjects
from scheduler.cluster.kube_http import ApiError
from scheduler.cluster.kube_request import (
    WatchStream,
    get_or_none,
    json_object,
    list_items,
    merge_patch,
    request_json,
    segment,
    send,
    unread,
    watch,
)

__all__ = ["PERMISSIONS", "ApiClient", "ApiError", "WatchStream"]  # with the calls below

# The client every call below takes: the type the modules above name it by (they import no
# `kubernetes`).
ApiClient = client.ApiClient

# The RBAC rule each call below needs: (API group, resource, verb, scope), scope "cluster" (a
# ClusterRole) or "namespace" (a Role where the object lives: the Lease, the agents'
# EndpointSlices). tests/deploy derives from each component's code which of these calls it can
# make and checks that its Roles grant exactly their rules, no more, no fewer.
Permission = tuple[str, str, str, str]
PERMISSIONS: dict[str, tuple[Permission, ...]] = {
    "make_api_client": (),
    "list_endpoint_slices": (("discovery.k8s.io", "endpointslices", "list", "namespace"),),
    "list_node_metrics": (("metrics.k8s.io", "nodes", "list", "cluster"),),
    "list_nodes_json": (("", "nodes", "list", "cluster"),),
    "list_pods": (("", "pods", "list", "cluster"),),
    "list_nodes": (("", "nodes", "list", "cluster"),),
    "watch_pods": (("", "pods", "watch", "cluster"),),
    "watch_nodes": (("", "nodes", "watch", "cluster"),),
    "get_pod": (("", "pods", "get", "cluster"),),
    "bind_pod": (("", "pods/binding", "create", "cluster"),),
    "patch_pod_status": (("", "pods/status", "patch", "cluster"),),
    "create_event": (("", "events", "create", "cluster"),),
    "patch_event": (("", "events", "patch", "cluster"),),
    "get_lease": (("coordination.k8s.io", "leases", "get", "namespace"),),
    "create_lease": (("coordination.k8s.io", "leases", "create", "namespace"),),
    "replace_lease": (("coordination.k8s.io", "leases", "update", "namespace"),),
    "evict_pod": (("", "pods/eviction", "create", "cluster"),),
    "list_pod_disruption_budgets": (("policy", "poddisruptionbudgets", "list", "cluster"),),
    "get_node": (("", "nodes", "get", "cluster"),),
    "patch_node": (("", "nodes", "patch", "cluster"),),
    "delete_node_object": (("", "nodes", "delete", "cluster"),),
    "create_node_object": (("", "nodes", "create", "cluster"),),
}

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


# -- telemetry reads (issue 6: TelemetryStore) ---------------------------------------------------


def list_endpoint_slices(
    api: client.ApiClient, namespace: str, service: str, timeout_seconds: float = 10.0
) -> list[dict[str, object]]:
    """The EndpointSlices of a Service (discovery.k8s.io/v1), as JSON dicts."""
    response = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        namespace,
        label_selector=f"kubernetes.io/service-name={service}",
        _preload_content=False,
        _request_timeout=timeout_seconds,
    )
    return subobjects(json_object(unread(response)), "items")


def list_node_metrics(api: client.ApiClient, timeout_seconds: float = 10.0) -> list[dict[str, object]]:
    """Node usage from the Metrics Server (metrics.k8s.io/v1beta1 NodeMetrics), as JSON dicts."""
    response = client.CustomObjectsApi(api).list_cluster_custom_object(
        "metrics.k8s.io", "v1beta1", "nodes", _preload_content=False, _request_timeout=timeout_seconds
    )
    return subobjects(json_object(unread(response)), "items")


def list_nodes_json(api: client.ApiClient, timeout_seconds: float = 10.0) -> list[dict[str, object]]:
    """All Nodes (v1), as JSON dicts (for their capacity and allocatable)."""
    response = client.CoreV1Api(api).list_node(
        _preload_content=False, _request_timeout=timeout_seconds
    )
    return subobjects(json_object(unread(response)), "items")


# -- standalone scheduler (issue 7): pods, nodes, binding, events, leases ------------------------
#
# Raw JSON in, raw JSON out, through kube_request.py (the client's typed wrappers are skipped).

COORDINATION = "/apis/coordination.k8s.io/v1"


def list_pods(
    api: client.ApiClient, field_selector: str | None = None, timeout_seconds: float = 60.0
) -> tuple[list[dict[str, object]], str | None]:
    """All pods (optionally by field selector) and the list's resourceVersion."""
    query = [("fieldSelector", field_selector)] if field_selector else []
    return list_items(api, "/api/v1/pods", query, timeout_seconds)


def list_nodes(
    api: client.ApiClient, timeout_seconds: float = 60.0
) -> tuple[list[dict[str, object]], str | None]:
    """All nodes and the list's resourceVersion."""
    return list_items(api, "/api/v1/nodes", [], timeout_seconds)


def watch_pods(
    api: client.ApiClient,
    resource_version: str | None = None,
    field_selector: str | None = None,
    timeout_seconds: int = 300,
    read_timeout_seconds: float = 330.0,
) -> WatchStream:
    query = [("fieldSelector", field_selector)] if field_selector else []
    return watch(api, "/api/v1/pods", query, resource_version, timeout_seconds,
                 read_timeout_seconds)


def watch_nodes(
    api: client.ApiClient,
    resource_version: str | None = None,
    timeout_seconds: int = 300,
    read_timeout_seconds: float = 330.0,
) -> WatchStream:
    return watch(api, "/api/v1/nodes", [], resource_version, timeout_seconds,
                 read_timeout_seconds)


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{segment(namespace)}/pods/{segment(name)}"


def get_pod(
    api: client.ApiClient, namespace: str, name: str, timeout_seconds: float = 10.0
) -> dict[str, object] | None:
    return get_or_none(api, _pod_path(namespace, name), timeout_seconds)


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
    metadata: dict[str, object] = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    send(api, "POST", _pod_path(namespace, name) + "/binding", body, timeout_seconds)


def patch_pod_status(
    api: client.ApiClient,
    namespace: str,
    name: str,
    patch: Mapping[str, object],
    timeout_seconds: float = 10.0,
) -> dict[str, object]:
    """Strategic-merge-patch a pod's status (conditions merge by their `type`): RBAC
    `pods/status` patch."""
    return merge_patch(api, _pod_path(namespace, name) + "/status", patch, timeout_seconds)


def create_event(
    api: client.ApiClient, namespace: str, event: Mapping[str, object], timeout_seconds: float = 10.0
) -> None:
    """Create a core/v1 Event (what `kubectl describe pod` shows)."""
    send(api, "POST", f"/api/v1/namespaces/{segment(namespace)}/events", event, timeout_seconds)


def patch_event(
    api: client.ApiClient, namespace: str, name: str, patch: Mapping[str, object], timeout_seconds: float = 10.0
) -> None:
    """Strategic-merge-patch an Event (a repeat: its count and lastTimestamp)."""
    merge_patch(api, f"/api/v1/namespaces/{segment(namespace)}/events/{segment(name)}", patch,
                timeout_seconds)


def _lease_path(namespace: str, name: str | None = None) -> str:
    path = f"{COORDINATION}/namespaces/{segment(namespace)}/leases"
    return f"{path}/{segment(name)}" if name else path


def get_lease(
    api: client.ApiClient, namespace: str, name: str, timeout_seconds: float = 5.0
) -> dict[str, object] | None:
    return get_or_none(api, _lease_path(namespace, name), timeout_seconds)


def create_lease(
    api: client.ApiClient, namespace: str, lease: Mapping[str, object], timeout_seconds: float = 5.0
) -> dict[str, object]:
    return request_json(api, "POST", _lease_path(namespace), body=lease, timeout=timeout_seconds)


def replace_lease(
    api: client.ApiClient,
    namespace: str,
    name: str,
    lease: Mapping[str, object],
    timeout_seconds: float = 5.0,
) -> dict[str, object]:
    """PUT the lease; its metadata.resourceVersion makes a concurrent change a 409 Conflict."""
    return request_json(api, "PUT", _lease_path(namespace, name), body=lease,
                        timeout=timeout_seconds)


# -- the energy rebalancer (issue 23): evictions, PodDisruptionBudgets, node annotations --------


def evict_pod(
    api: client.ApiClient, namespace: str, name: str, uid: str, timeout_seconds: float = 10.0
) -> None:
    """POST the Eviction subresource (pods/NAME/eviction, policy/v1), as `kubectl drain` and
    cluster-autoscaler do: the API server checks the pod's PodDisruptionBudget and answers 429
    when it allows no disruption now, 404 when the pod is gone; the uid precondition makes an
    eviction meant for a deleted and recreated pod fail (409) instead of taking the new one."""
    body: dict[str, object] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    send(api, "POST", _pod_path(namespace, name) + "/eviction", body, timeout_seconds)


def list_pod_disruption_budgets(
    api: client.ApiClient, timeout_seconds: float = 10.0
) -> list[dict[str, object]]:
    """Every PodDisruptionBudget (policy/v1), as JSON dicts."""
    items, _ = list_items(api, "/apis/policy/v1/poddisruptionbudgets", [], timeout_seconds)
    return items


def patch_node(
    api: client.ApiClient, name: str, patch: Mapping[str, object], timeout_seconds: float = 10.0
) -> dict[str, object]:
    """Strategic-merge-patch a node (metadata such as annotations): RBAC `nodes` patch."""
    return merge_patch(api, f"/api/v1/nodes/{segment(name)}", patch, timeout_seconds)


def get_node(api: client.ApiClient, name: str, timeout_seconds: float = 10.0) -> dict[str, object] | None:
    return get_or_none(api, f"/api/v1/nodes/{segment(name)}", timeout_seconds)


# -- the bare-metal cloud provider (issue 39): Nodes of machines switched on and off --------------


def create_node_object(api: client.ApiClient, node: dict[str, object], timeout_seconds: float = 10.0) -> dict[str, object]:
    """Create a Node (the simulated power backend's KWOK Node): RBAC `nodes` create."""
    return request_json(api, "POST", "/api/v1/nodes", body=node, timeout=timeout_seconds)


def delete_node_object(api: client.ApiClient, name: str, timeout_seconds: float = 10.0) -> None:
    """Delete a Node object (a machine switched off): RBAC `nodes` delete. A Node already gone is
    not an error."""
    try:
        send(api, "DELETE", f"/api/v1/nodes/{segment(name)}", None, timeout_seconds)
    except ApiError as exc:
        if exc.status != 404:
            raise
