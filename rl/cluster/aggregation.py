"""The API aggregation layer on loopback, and metrics-server behind it (metrics.k8s.io).

kube-apiserver proxies an aggregated group to the server its APIService names, presenting the
front-proxy client certificate and the caller's identity in X-Remote-* headers; the extension
server trusts those headers only from a certificate the front-proxy CA signed with an allowed
name (the `--requestheader-*` flags, published in kube-system's extension-apiserver-authentication
ConfigMap, which metrics-server reads). These flags are always on: every real cluster has them,
and they cost nothing until an APIService exists.

metrics-server runs as a process of the harness, with a client certificate of its own
(`system:metrics-server`, given the RBAC its upstream manifests give its ServiceAccount). There is
no cluster network: the APIService names a Service of type ExternalName `127.0.0.1`, which the
aggregator dials at the APIService's port as it is (kwokctl's binary runtime does the same), and
checks the serving certificate against the APIService's caBundle for the name
`metrics-server.kube-system.svc`. metrics-server scrapes each node's "kubelet" — KWOK's server on
127.0.0.1 (the nodes' InternalIP), over TLS checked against the cluster CA — at the path in the
node's `metrics.k8s.io/resource-metrics-path` annotation, where KWOK serves the resource metrics
its Metric resource describes (rl/cluster/kwok.py)."""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.jsonvalue import JsonObject, subobject, subobjects
from rl.cluster import pki
from rl.cluster.api import Api, ApiError

FRONT_PROXY_CLIENT = "front-proxy-client"
METRICS_SERVER_USER = "system:metrics-server"
NAMESPACE = "kube-system"
SERVICE = "metrics-server"
API_SERVICE = "v1beta1.metrics.k8s.io"
# metrics-server's floor: a CPU rate needs two scrapes, so readings appear 10–20 s after a pod runs.
METRIC_RESOLUTION = "10s"
KUBELET_TIMEOUT = "5s"  # below 9/10 of the resolution, as metrics-server requires


@dataclass(frozen=True)
class FrontProxy:
    ca: Path
    client: pki.KeyPair


def front_proxy(directory: Path) -> FrontProxy:
    """A CA of its own for the front proxy (as kubeadm makes) and the client certificate the
    aggregator presents to extension servers."""
    authority = pki.Authority(directory, common="kubejoule-front-proxy-ca")
    return FrontProxy(authority.cert, authority.issue("front-proxy-client", FRONT_PROXY_CLIENT))


def apiserver_flags(proxy: FrontProxy) -> list[str]:
    """kube-apiserver's aggregation-layer flags (kubeadm's values)."""
    return [
        f"--requestheader-client-ca-file={proxy.ca}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={proxy.client.cert}",
        f"--proxy-client-key-file={proxy.client.key}",
    ]


def metrics_server_certificates(authority: pki.Authority) -> tuple[pki.KeyPair, pki.KeyPair]:
    """(serving, client): the name the aggregator checks, and the identity RBAC sees."""
    serving = authority.issue(
        "metrics-server-serving", SERVICE, server=True,
        hosts=(f"{SERVICE}.{NAMESPACE}.svc", f"{SERVICE}.{NAMESPACE}.svc.cluster.local", "127.0.0.1", "localhost"),
    )
    client = authority.issue("metrics-server", METRICS_SERVER_USER)
    return serving, client


def metrics_server_argv(
    port: int, kubeconfig: Path, serving: pki.KeyPair, ca: Path, kubelet_port: int
) -> list[str]:
    """metrics-server's flags: serve on 127.0.0.1:PORT, scrape KWOK at the nodes' InternalIP."""
    return [
        "--bind-address=127.0.0.1", f"--secure-port={port}",
        f"--tls-cert-file={serving.cert}", f"--tls-private-key-file={serving.key}",
        f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--kubelet-preferred-address-types=InternalIP", f"--kubelet-port={kubelet_port}",
        f"--kubelet-certificate-authority={ca}", f"--kubelet-request-timeout={KUBELET_TIMEOUT}",
        f"--metric-resolution={METRIC_RESOLUTION}", "--v=1",
    ]


def _binding(kind: str, name: str, role_kind: str, role: str, namespace: str | None = None) -> JsonObject:
    metadata: dict[str, object] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": METRICS_SERVER_USER}],
    }


def metrics_server_rbac() -> list[tuple[str, JsonObject]]:
    """(collection path, object) for what its upstream manifests grant metrics-server: read nodes,
    pods and nodes/metrics; delegate authentication and authorization; read the requestheader
    ConfigMap in kube-system (without it metrics-server cannot trust the aggregator)."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    role: dict[str, object] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": METRICS_SERVER_USER},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]},
        ],
    }
    return [
        (f"{rbac}/clusterroles", role),
        (f"{rbac}/clusterrolebindings", _binding("ClusterRoleBinding", METRICS_SERVER_USER, "ClusterRole",
                                                 METRICS_SERVER_USER)),
        (f"{rbac}/clusterrolebindings", _binding("ClusterRoleBinding", "metrics-server:system:auth-delegator",
                                                 "ClusterRole", "system:auth-delegator")),
        (f"{rbac}/namespaces/{NAMESPACE}/rolebindings", _binding(
            "RoleBinding", "metrics-server-auth-reader", "Role", "extension-apiserver-authentication-reader",
            NAMESPACE)),
    ]


def metrics_server_route(port: int, ca: Path) -> list[tuple[str, JsonObject]]:
    """The Service (ExternalName 127.0.0.1) and the APIService that send metrics.k8s.io to PORT."""
    service: dict[str, object] = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        "spec": {"type": "ExternalName", "externalName": "127.0.0.1", "ports": [{"name": "https", "port": port}]},
    }
    api_service: dict[str, object] = {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": API_SERVICE},
        "spec": {
            "group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "service": {"name": SERVICE, "namespace": NAMESPACE, "port": port},
            "caBundle": base64.b64encode(ca.read_bytes()).decode(),
        },
    }
    return [(f"/api/v1/namespaces/{NAMESPACE}/services", service),
            ("/apis/apiregistration.k8s.io/v1/apiservices", api_service)]


def install(api: Api, objects: list[tuple[str, JsonObject]]) -> None:
    """Create each object, or replace the one already there (a metrics-server started again)."""
    for collection, obj in objects:
        try:
            api.request("POST", collection, obj)
        except ApiError as exc:
            if exc.status != 409:
                raise
            metadata = subobject(obj, "metadata")
            path = f"{collection}/{metadata.get('name')}"
            current = api.request("GET", path)
            obj = {**obj, "metadata": {**metadata, "resourceVersion": current["metadata"]["resourceVersion"]}}
            api.request("PUT", path, obj)


def uninstall(api: Api) -> None:
    """Remove the route to metrics-server (its RBAC stays, harmless): an APIService whose server
    is gone would make every discovery of the API report metrics.k8s.io unavailable."""
    for path in (f"/apis/apiregistration.k8s.io/v1/apiservices/{API_SERVICE}",
                 f"/api/v1/namespaces/{NAMESPACE}/services/{SERVICE}"):
        try:
            api.request("DELETE", path)
        except ApiError as exc:
            if exc.status != 404:
                raise


def wait_available(api: Api, timeout: float) -> None:
    """Until the aggregator has reached metrics-server through the APIService (TimeoutError with
    the aggregator's last reason otherwise)."""
    deadline = time.monotonic() + timeout
    reason = "not read yet"
    while time.monotonic() < deadline:
        try:
            ok, reason = available(api.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{API_SERVICE}"))
        except (ApiError, OSError) as exc:
            ok, reason = False, str(exc)
        if ok:
            return
        time.sleep(0.5)
    raise TimeoutError(f"APIService {API_SERVICE} not Available within {timeout:g} s ({reason})")


def available(api_service: Mapping[str, object]) -> tuple[bool, str]:
    """Whether an APIService is Available, and the aggregator's reason when it is not."""
    for condition in subobjects(subobject(api_service, "status"), "conditions"):
        if condition.get("type") == "Available":
            return condition.get("status") == "True", f"{condition.get('reason')}: {condition.get('message')}"
    return False, "no Available condition yet"
