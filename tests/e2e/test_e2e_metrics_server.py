"""The agent's Metrics Server path on a real metrics-server (issue 32 item 3): metrics-server
v0.8.0 behind kube-apiserver 1.36's aggregation layer (APIService v1beta1.metrics.k8s.io),
scraping KWOK's emulated kubelets (rl/cluster/aggregation.py, rl/cluster/kwok.py), added to the
session's plane for this module (`kubejoule-rl cluster up --metrics-server` runs the same code).

Two KWOK nodes of our own (tainted, so no other test's pods land there) and pods whose usage
KWOK reports from their annotations: `web` and `db` in one namespace and `solo` in another, bound
to the agent's node; `far` on the other node. What is shown, with values that a wrong unit, a
wrong sum or a wrong pod would break: the real metrics.k8s.io answers (CPU as the rate
metrics-server takes between two scrapes, memory as working set; the node's usage the sum of its
pods'); the agent's reader (agent/kube/metrics_server.py through agent/kube/client.py, the same calls the
agent makes: a namespace listed, a lone pod read by name), with a token of the agent's own
ServiceAccount holding the shipped RBAC's rules, gets those numbers for its node's pods only;
`kubejoule-agent run` exports them as kubejoule_pod_cpu_usage_cores and the rest; and the
manifests' narrow grant holds on the real API: listing all nodes' metrics is refused, and an
account without the rule is refused and counted as the agent's metrics_server error. kmock still
runs the reader's unit tests (tests/agent): outages and malformed answers on demand."""

from __future__ import annotations

import logging
import ssl
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.kube.client import KubeClient, KubeError
from agent.kube.metrics_server import MetricsServerReader
from agent.kube.podmeta import PodMeta, pod_meta
from benchmarks.harness.components import component_missing
from rl.cluster import kwok
from rl.cluster.api import Api, ApiError
from rl.cluster.controlplane import (
    METRICS_SERVER,
    Cluster,
    start_metrics_server,
    stop_metrics_server,
)
from rl.simulation.traces.scenario import parse_node_groups
from tests.helpers.agent_proc import WORKLOADS, AgentProcess, wait_until
from tests.helpers.e2e_cluster import eventually
from tests.helpers.e2e_components import create_tainted_nodes, delete_quietly, ensure_namespace
from tests.helpers.e2e_sched import delete_paths, service_account_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
AGENT_RBAC = ROOT / "daemonset/base/agent-rbac.yaml"
NAMESPACE, OTHER_NAMESPACE = "e2e-metrics", "e2e-metrics-other"
TAINT = {"key": "kubejoule.io/e2e", "value": "metrics", "effect": "NoSchedule"}
GROUPS = [{"name": "e2e-metrics", "count": 2, "cpu_cores": 8, "memory_gib": 16,
           "power": {"idle_watts": 40, "max_watts": 120}}]
MINE, FAR = "e2e-metrics-0", "e2e-metrics-1"
MI = 1024 * 1024
# name → (namespace, node, CPU cores, memory bytes): what KWOK is told each pod uses.
PODS = {
    "web": (NAMESPACE, MINE, 0.25, 64 * MI),
    "db": (NAMESPACE, MINE, 1.5, 512 * MI),
    "solo": (OTHER_NAMESPACE, MINE, 0.75, 96 * MI),
    "far": (NAMESPACE, FAR, 2.0, 1024 * MI),
}
CPU_TOLERANCE = 0.05  # a rate over two scrapes of KWOK's integrated counter
METRICS = "/apis/metrics.k8s.io/v1beta1"


@dataclass
class Setup:
    cluster: Cluster
    uids: dict[str, str]
    agent_kubeconfig: Path


def _pod(name: str) -> dict[str, Any]:
    _namespace, node, cores, memory = PODS[name]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {kwok.USAGE_CPU_ANNOTATION: f"{round(cores * 1000)}m",
                                                    kwok.USAGE_MEMORY_ANNOTATION: str(memory)}},
        "spec": {"nodeName": node, "tolerations": [{"key": TAINT["key"], "operator": "Exists"}],
                 "containers": [{"name": "c", "image": "registry.invalid/none"}]},
    }


# Kubernetes quantity suffixes, read here independently of the agent's parser (common/quantity.py).
_SUFFIXES = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}


def _quantity(text: str) -> float:
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(text)


def api_pod_metrics(api: Api) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) → PodMetrics, from the cluster-wide list (`kubectl get --raw …/pods`)."""
    return {(i["metadata"]["namespace"], i["metadata"]["name"]): i
            for i in api.request("GET", f"{METRICS}/pods")["items"]}


def _all_scraped(api: Api) -> bool:
    found = api_pod_metrics(api)
    return all((namespace, name) in found for name, (namespace, *_rest) in PODS.items())


def _all_running(api: Api) -> bool:
    return all(api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")["status"].get("phase") == "Running"
               for name, (namespace, *_rest) in PODS.items())


def _kubelet_metrics(cluster: Cluster, node: str) -> str:
    """NODE's resource metrics as KWOK serves them to metrics-server (TLS, the cluster's CA)."""
    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    url = f"https://{kwok.NODE_IP}:{cluster.kwok_port}/metrics/nodes/{node}/metrics/resource"
    with urllib.request.urlopen(url, context=context, timeout=10) as answer:
        return str(answer.read().decode())


def _start_kwoks_counters(cluster: Cluster) -> None:
    """Read each node's resource metrics from KWOK, as a kubelet scrape, until every test pod is
    in them: KWOK integrates a pod's CPU from the first read that includes it, and metrics-server
    drops a container whose counter is still 0, so without this its first scrape of the pods would
    be wasted (10 s more to wait)."""
    for name, (_namespace, node, *_rest) in PODS.items():
        eventually(lambda node=node, name=name: f'pod="{name}"' in _kubelet_metrics(cluster, node), 30,
                   f"KWOK serving {name}'s usage on {node}")


@pytest.fixture(scope="module")
def setup(plane: Any, k8s_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    if not (k8s_bin / METRICS_SERVER).is_file():
        component_missing(f"metrics-server is not built in {k8s_bin}: run `make k8s-tools`")
    cluster = plane.get()
    started = METRICS_SERVER not in cluster.processes
    if started:
        start_metrics_server(cluster, k8s_bin)
    api = cluster.admin()
    specs = parse_node_groups(GROUPS)
    made: list[str] = []
    uids: dict[str, str] = {}
    try:
        create_tainted_nodes(api, specs, TAINT)
        for namespace in (NAMESPACE, OTHER_NAMESPACE):
            ensure_namespace(api, namespace)
        for name, (namespace, *_rest) in PODS.items():
            uids[name] = api.request("POST", f"/api/v1/namespaces/{namespace}/pods", _pod(name))["metadata"]["uid"]
        kubeconfig = tmp_path_factory.mktemp("agent-sa") / "kubeconfig"
        made, _token = service_account_kubeconfig(cluster, NAMESPACE, "kubejoule-agent", AGENT_RBAC, kubeconfig)
        eventually(lambda: _all_running(api), 60, "KWOK running the test pods")
        _start_kwoks_counters(cluster)
        # Two scrapes after that (CPU is a rate), 10 s apart: well within a minute.
        eventually(lambda: _all_scraped(api), 60, "metrics-server serving every test pod's metrics", interval=1.0)
        yield Setup(cluster, uids, kubeconfig)
    finally:
        delete_paths(api, made)
        for name, (namespace, *_rest) in PODS.items():
            delete_quietly(api, f"/api/v1/namespaces/{namespace}/pods/{name}", now=True)
        for spec in specs:
            delete_quietly(api, f"/api/v1/nodes/{spec.name}")
        if started:
            stop_metrics_server(cluster)


def test_metrics_server_serves_kwoks_usage_through_the_aggregator(setup: Setup, cluster: Cluster) -> None:
    api = setup.cluster.admin()
    found = api_pod_metrics(api)
    for name, (namespace, _node, cores, memory) in PODS.items():
        [container] = found[(namespace, name)]["containers"]
        assert container["name"] == "c"
        assert _quantity(container["usage"]["cpu"]) == pytest.approx(cores, rel=CPU_TOLERANCE), name
        assert _quantity(container["usage"]["memory"]) == memory, name
    node = api.request("GET", f"{METRICS}/nodes/{MINE}")
    mine = [p for p in PODS.values() if p[1] == MINE]
    assert _quantity(node["usage"]["cpu"]) == pytest.approx(sum(p[2] for p in mine), rel=CPU_TOLERANCE)
    assert _quantity(node["usage"]["memory"]) == sum(p[3] for p in mine)


def _metas(client: KubeClient, node: str) -> list[PodMeta]:
    """This node's pods as the agent knows them: from its own list of the node's pods."""
    return [m for m in (pod_meta(p) for p in client.list_node_pods(node).items) if m is not None]


def test_the_agents_reader_gets_its_nodes_pods_with_its_own_token(setup: Setup, cluster: Cluster) -> None:
    client = KubeClient.connect(setup.agent_kubeconfig)
    try:
        metas = _metas(client, MINE)
        assert sorted(m.name for m in metas) == ["db", "solo", "web"]
        reader = MetricsServerReader(client, MINE, lambda: metas)
        assert reader.read_once(), "the reader's calls with the agent's token"
        data = reader.latest()
    finally:
        client.close()
    assert data is not None and reader.errors == 0
    got = {p.name: p for p in data.pods}
    assert set(got) == {"web", "db", "solo"}  # `far` runs on the other node: never asked for
    for name, pod in got.items():
        namespace, _node, cores, memory = PODS[name]
        assert (pod.namespace, pod.uid) == (namespace, setup.uids[name])
        assert pod.usage.cpu_cores == pytest.approx(cores, rel=CPU_TOLERANCE), name
        assert pod.usage.memory_working_set_bytes == memory, name
    assert data.node is not None
    assert data.node.cpu_cores == pytest.approx(0.25 + 1.5 + 0.75, rel=CPU_TOLERANCE)
    assert data.node.memory_working_set_bytes == (64 + 512 + 96) * MI
    assert data.node.window_seconds is not None and data.node.window_seconds > 0


def test_agent_run_exports_the_real_metrics_server_data(setup: Setup, cluster: Cluster) -> None:
    agent = AgentProcess(WORKLOADS / "v2-systemd-containerd" / "before", interval=0.25, node=MINE,
                         args=["--kubeconfig", str(setup.agent_kubeconfig), "--metrics-server-interval", "1",
                               "--no-network"])
    with agent:
        agent.drive(node_watts=40.0)
        wait_until(lambda: len(agent.samples("kubejoule_pod_cpu_usage_cores")) == 3, timeout_seconds=30,
                   what="the three pods' Metrics Server series")
        cpu = {(labels["namespace"], labels["pod"], labels["pod_uid"]): value
               for labels, value in agent.samples("kubejoule_pod_cpu_usage_cores")}
        memory = {labels["pod"]: value for labels, value in agent.samples("kubejoule_pod_memory_working_set_bytes")}
        node_cpu = agent.value("kubejoule_node_cpu_usage_cores", node=MINE)
        errors = agent.value("kubejoule_agent_errors_total", kind="metrics_server")
    assert agent.returncode == 0
    for name in ("web", "db", "solo"):
        namespace, _node, cores, bytes_ = PODS[name]
        assert cpu[(namespace, name, setup.uids[name])] == pytest.approx(cores, rel=CPU_TOLERANCE)
        assert memory[name] == bytes_
    assert node_cpu == pytest.approx(2.5, rel=CPU_TOLERANCE)
    assert errors == 0


def _token(api: Api, account: str) -> str:
    return str(api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": 600}})["status"]["token"])


def test_the_real_api_refuses_what_the_agents_rbac_does_not_grant(
    setup: Setup, cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    admin = setup.cluster.admin()
    agent = setup.cluster.api_as(_token(admin, "kubejoule-agent"))
    agent.request("GET", f"{METRICS}/nodes/{MINE}")  # its own node, by name: granted
    with pytest.raises(ApiError) as refused:  # the list of every node's usage: not granted
        agent.request("GET", f"{METRICS}/nodes")
    assert refused.value.status == 403
    assert 'cannot list resource "nodes" in API group "metrics.k8s.io"' in str(refused.value)
    # An account without the rule (the namespace's default one): the agent's reader is refused,
    # counts it, says which permission to check, and has nothing to export.
    config = yaml.safe_load(setup.agent_kubeconfig.read_text())
    config["users"][0]["user"]["token"] = _token(admin, "default")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    client = KubeClient.connect(kubeconfig)
    try:
        with pytest.raises(KubeError) as denied:
            client.get_node_metrics(MINE)
        assert denied.value.status == 403
        reader = MetricsServerReader(client, MINE, lambda: [])
        with caplog.at_level(logging.WARNING, logger="agent.metrics_server"):
            assert not reader.read_once()
    finally:
        client.close()
    assert reader.errors == 1 and reader.latest() is None
    assert "get on metrics.k8s.io nodes and pods" in caplog.text
