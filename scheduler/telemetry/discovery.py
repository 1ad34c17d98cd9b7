"""Where the agents are (static `node=url` targets, the agent Service's EndpointSlices) and
how many cores each node has (the Node objects)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from common.jsonvalue import subobject, subobjects
from common.quantity import parse_quantity

if TYPE_CHECKING:
    from scheduler.cluster.kube import ApiClient


class StaticTargets:
    """A fixed `node → URL` map, e.g. from `--agent node1=http://10.0.0.1:9102`."""

    def __init__(self, targets: Mapping[str, str]) -> None:
        self._targets = {node: metrics_url(url) for node, url in targets.items()}

    def __call__(self) -> dict[str, str]:
        return dict(self._targets)


def metrics_url(url: str) -> str:
    """`http://host:port` → `http://host:port/metrics`; a URL with a path is kept."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    rest = url.split("://", 1)[1]
    return url if "/" in rest else url + "/metrics"


def parse_static_targets(items: Iterable[str]) -> dict[str, str]:
    """`["node1=http://10.0.0.1:9102", ...]` → `{"node1": "http://10.0.0.1:9102/metrics"}`."""
    targets = {}
    for item in items:
        node, sep, url = item.partition("=")
        if not sep or not node.strip() or not url.strip():
            raise ValueError(f"expected node=url, got {item!r}")
        targets[node.strip()] = metrics_url(url)
    return targets


def targets_from_endpoint_slices(
    slices: Iterable[Mapping[str, object]], port_name: str | None = None, scheme: str = "http"
) -> dict[str, str]:
    """`node → URL` from a Service's EndpointSlices (discovery.k8s.io/v1 JSON).

    Endpoints that are not ready, or carry no nodeName, are skipped. The port is the one named
    `port_name`, else the slice's first port.
    """
    targets: dict[str, str] = {}
    for eps in slices:
        ports = subobjects(eps, "ports")
        port = next(
            (p.get("port") for p in ports if port_name is None or p.get("name") == port_name), None
        )
        if port is None:
            continue
        ipv6 = eps.get("addressType") == "IPv6"
        for endpoint in subobjects(eps, "endpoints"):
            if subobject(endpoint, "conditions").get("ready") is False:
                continue
            node = endpoint.get("nodeName")
            addresses = endpoint.get("addresses")
            if not isinstance(node, str) or not node or not isinstance(addresses, list) or not addresses:
                continue
            host = f"[{addresses[0]}]" if ipv6 else addresses[0]
            targets[node] = f"{scheme}://{host}:{port}/metrics"
    return targets


class EndpointSliceTargets:
    """Agent targets from the agent Service's EndpointSlices, read through scheduler/cluster/kube.py."""

    def __init__(
        self, api: ApiClient, namespace: str, service: str, port_name: str | None = None
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._service = service
        self._port_name = port_name

    def __call__(self) -> dict[str, str]:
        from scheduler.cluster import kube

        slices = kube.list_endpoint_slices(self._api, self._namespace, self._service)
        # Some API servers (and test emulators) ignore the label selector: check it again.
        own = [
            s
            for s in slices
            if subobject(subobject(s, "metadata"), "labels").get("kubernetes.io/service-name")
            == self._service
        ]
        return targets_from_endpoint_slices(own, self._port_name)


def cores_from_nodes(nodes: Iterable[Mapping[str, object]]) -> dict[str, float]:
    """CPU capacity (cores) of each Node, from v1 Node JSON."""
    cores: dict[str, float] = {}
    for node in nodes:
        name = subobject(node, "metadata").get("name")
        capacity = subobject(subobject(node, "status"), "capacity").get("cpu")
        if isinstance(name, str) and name and isinstance(capacity, str | int | float):
            try:
                cores[name] = parse_quantity(capacity)
            except ValueError:
                continue
    return cores


class NodeCoresFromKubernetes:
    """Node CPU capacity from the Node objects, re-listed at most every `refresh_seconds`."""

    def __init__(self, api: ApiClient, refresh_seconds: float = 60.0) -> None:
        self._api = api
        self._refresh_seconds = refresh_seconds
        self._cores: dict[str, float] = {}
        self._listed_at: float | None = None

    def __call__(self) -> dict[str, float]:
        from scheduler.cluster import kube

        now = time.monotonic()
        if self._listed_at is None or now - self._listed_at >= self._refresh_seconds:
            self._cores = cores_from_nodes(kube.list_nodes_json(self._api))
            self._listed_at = now
        return self._cores
