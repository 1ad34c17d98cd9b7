"""A node that runs only DaemonSet and mirror (static) pods is empty — in the cluster cache,
the telemetry store and the energy scorer alike — so the consolidation price's empty-node
branch fires on a real cluster, where every node runs at least our agent (issue 14).

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from benchmarks.harness.standalone_kmock import EmulatedCluster
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.cluster.watch import ClusterWatch
from scheduler.cmd.cli import build_extender
from scheduler.config.parse import config_from_dict
from scheduler.domain.model import MIRROR_POD_ANNOTATION, NodeState, is_node_daemon_pod
from scheduler.extender.app import create_app
from scheduler.framework import CandidateBatch
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.exposition import parse_agent_metrics
from tests.helpers.energy_results import results
from tests.helpers.sched_http import agent_exposition, text_server
from tests.helpers.standalone_harness import wait_for

# SPECpower curves of the bundled heterogeneous cluster: x3250 M3 (8 CPUs, cheap to keep on,
# dear per unit of load) and x3550 M3 X5675 (24 CPUs, efficient once loaded).
SMALL = (41.6, 46.7, 52.3, 57.9, 65.4, 73, 80.7, 89.5, 99.6, 105, 113)
BIG = (58.4, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222)


def node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(name: str, node_name: str | None, cpu: str = "100m", owner: str | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "kube-system"}
    if owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "x",
                                        "uid": f"uid-{name}", "controller": True}]
    if annotations:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x",
                                            "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def test_which_pods_belong_to_their_node():
    assert is_node_daemon_pod(pod_info_from_k8s(pod("a", "n", owner="DaemonSet")))
    # A static pod's mirror: owned by its Node and annotated by the kubelet.
    assert is_node_daemon_pod(pod_info_from_k8s(pod("b", "n", owner="Node")))
    assert is_node_daemon_pod(pod_info_from_k8s(pod("c", "n", annotations={MIRROR_POD_ANNOTATION: "h"})))
    for owner in ("ReplicaSet", "Job", "StatefulSet", None):
        assert not is_node_daemon_pod(pod_info_from_k8s(pod("d", "n", owner=owner)))


def test_only_daemonset_and_mirror_pods_leave_a_node_empty_and_the_efficient_node_wins() -> None:
    with EmulatedCluster() as cluster, text_server() as agents:
        cluster.create_node(node("small", "8"))
        cluster.create_node(node("big", "24"))
        for name in ("small", "big"):
            cluster.create_pod(pod(f"agent-{name}", name, "20m", owner="DaemonSet"))
            cluster.create_pod(pod(f"proxy-{name}", name, "100m", owner="DaemonSet"))
        cluster.create_pod(pod("etcd-big", "big", annotations={MIRROR_POD_ANNOTATION: "h"}))
        sample_time = time.time() + 3600  # bound pods are older than the sample
        for name, curve in (("small", SMALL), ("big", BIG)):
            agents.pages[f"/{name}"] = agent_exposition(
                name, sample_time, utilization=0.0, curve=curve, pods=(f"agent-{name}",)
            )
        config = config_from_dict({
            "mode": "active",
            "refresh_seconds": 0.2,
            "max_staleness_seconds": 7200,
            "scorer": {"delta_p_ref_watts": 100, "consolidation": True},
            "telemetry": {"agents": {"static": {n: agents.url(f"/{n}") for n in ("small", "big")}}},
            "kubernetes": {"host": cluster.url},
        })
        extender = build_extender(config)
        watch = extender.cluster
        assert isinstance(watch, ClusterWatch)
        with TestClient(create_app(extender)) as client:
            wait_for(lambda: extender.ready and watch.synced, 15, "telemetry and watches")
            wait_for(lambda: len(watch.node_states(extender.store.telemetry)) == 2, 10, "nodes")
            states = {s.info.name: s for s in watch.node_states(extender.store.telemetry)}
            assert (states["small"].pod_count, states["small"].daemon_pod_count) == (2, 2)
            assert (states["big"].pod_count, states["big"].daemon_pod_count) == (3, 3)
            assert states["small"].empty and states["big"].empty
            # A 1-CPU pod, consolidation on. Empty, each node is priced at its share of its
            # best watts per unit of load up to u = 0.5: small 0.125 × 73 / 0.5 = 18.25 W, big
            # 1/24 × 140 / 0.5 = 11.67 W. Counting the DaemonSet pods as workload would price
            # small at its marginal 6.5 W (41.6 → 48.1 W) and send the pod there.
            incoming = pod_info_from_k8s(pod("incoming", None, "1"))
            scorer = EnergyPlugin(delta_p_ref_watts=100, consolidation=True,
                                     max_staleness_seconds=7200)
            deltas = {r.node: r.delta_watts for r in results(scorer, incoming, list(states.values()), sample_time)}
            assert deltas["small"] is not None and abs(deltas["small"] - 18.25) < 1e-6
            assert deltas["big"] is not None and abs(deltas["big"] - 280 / 24) < 1e-6
            busy = NodeState(states["small"].info, states["small"].requested,
                             states["small"].telemetry, pod_count=2)  # no owners known
            (busy_result,) = results(scorer, incoming, [busy], sample_time)
            assert busy_result.delta_watts is not None and abs(busy_result.delta_watts - 6.5) < 1e-6
            # The energy plugin (scheduler/plugins) prices them the same way.
            plugin = EnergyPlugin(delta_p_ref_watts=100, consolidation=True,
                                  max_staleness_seconds=7200)
            ordered = [states["small"], states["big"], busy]
            scores_by_plugin = plugin.score(incoming, CandidateBatch.of(ordered, sample_time))
            expected = [100 * (1 - 18.25 / 100), 100 * (1 - 280 / 24 / 100), 100 * (1 - 6.5 / 100)]
            assert [round(float(v), 6) for v in scores_by_plugin] == [round(v, 6) for v in expected]
            response = client.post("/prioritize", json={
                "Pod": pod("incoming", None, "1"), "NodeNames": ["small", "big"]})
            assert response.status_code == 200, response.text
            scores = {e["Host"]: e["Score"] for e in response.json()}
            assert scores["big"] > scores["small"]

            # A workload pod makes small non-empty.
            cluster.create_pod(pod("web", "small", "100m", owner="ReplicaSet"))
            wait_for(lambda: not {s.info.name: s for s in watch.node_states(
                extender.store.telemetry)}["small"].empty, 10, "the workload pod")


def test_the_telemetry_store_counts_daemon_pods_by_their_owner_kind_label() -> None:
    text = agent_exposition("n1", 1000.0, pods=("a", "b", "c"))
    text = text.replace('pod_uid="a"}', 'pod_uid="a",owner_kind="DaemonSet"}')
    text = text.replace('pod_uid="b"}', 'pod_uid="b",owner_kind="Node"}')
    sample = parse_agent_metrics(text).samples["n1"]
    assert (sample.pod_count, sample.daemon_pod_count) == (3, 2)
    # Series without the label (agents that do not export it): every pod is workload.
    sample = parse_agent_metrics(agent_exposition("n1", 1000.0, pods=("a",))).samples["n1"]
    assert (sample.pod_count, sample.daemon_pod_count) == (1, 0)
