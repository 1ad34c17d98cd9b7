"""The scheduler's only door to the Kubernetes API (the one module that imports `kubernetes`).

Thin on purpose: each function makes one API call and returns plain JSON dicts (camelCase, as the
API serves them), so everything above this module is plain data and tested without a cluster.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client, config

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
