"""agent/kube/metrics_server.py: quantities, and reads from the emulator's metrics.k8s.io.

kmock's emulated metrics.k8s.io stays here for fast unit tests with answers on demand (404s,
malformed items, outages, lists mostly of other nodes' pods); the same reader runs against the
real metrics-server behind kube-apiserver's aggregation layer in
tests/e2e/test_e2e_metrics_server.py."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import pytest

from agent.kube.client import KubeClient
from agent.kube.metrics_server import (
    LIST_WASTE_FACTOR,
    LIST_WASTE_SLACK,
    PER_POD_SECONDS,
    MetricsServerReader,
    parse_duration_seconds,
    parse_quantity,
    with_metrics_server,
)
from agent.kube.podmeta import PodMeta
from agent.monitor.snapshot import Snapshot
from benchmarks.harness.agent_kube_emulator import EmulatedCluster

NODE = "node-a"
T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC).timestamp()
T0_TEXT = "2025-03-01T12:00:00Z"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", 0.25),
        ("2", 2.0),
        ("1500000000n", 1.5),
        ("750u", 0.00075),
        ("0", 0.0),
        ("128Ki", 131072.0),
        ("1.5Gi", 1.5 * 2**30),
        ("3M", 3e6),
        ("1e3", 1000.0),
        ("2.5E-3", 0.0025),
        (".5", 0.5),
    ],
)
def test_quantities(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "1Xi", "--1", "1.2.3", "m"])
def test_garbage_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("1m0.5s", 60.5), ("20.5ms", 0.0205), ("1h", 3600.0), ("", None), ("15", None), ("x15s", None)],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration_seconds(text) == (pytest.approx(seconds) if seconds is not None else None)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


PODS = [
    PodMeta(uid="uid-cart", namespace="shop", name="cart"),
    PodMeta(uid="uid-new", namespace="shop", name="new"),  # not scraped by Metrics Server yet
]


def test_node_and_pod_usage_with_their_age(cluster: EmulatedCluster, client: KubeClient) -> None:
    cluster.set_node_metrics(NODE, "1250m", "3Gi", T0_TEXT, window="20s")
    cluster.set_pod_metrics("shop", "cart", {"app": ("200m", "100Mi"), "sidecar": ("50000000n", "28Mi")}, T0_TEXT)
    clock = Clock(T0 + 7.0)
    reader = MetricsServerReader(client, NODE, lambda: PODS, clock=clock)
    assert reader.read_once()

    data = reader.latest()
    assert data is not None and data.node is not None
    assert data.node.cpu_cores == pytest.approx(1.25)
    assert data.node.memory_working_set_bytes == 3 * 2**30
    assert data.node.window_seconds == 20.0
    assert data.age_seconds(clock.now) == pytest.approx(7.0)
    [cart] = data.pods  # the pod without metrics is left out, not zero
    assert cart.uid == "uid-cart"
    assert cart.usage.cpu_cores == pytest.approx(0.25)
    assert cart.usage.memory_working_set_bytes == 128 * 2**20
    assert reader.errors == 0

    snapshot = Snapshot(
        node=NODE, interval_seconds=5.0, timestamp=T0 + 9.0, source="none", node_watts=None, idle_watts=None,
        active_watts=None, idle_source="utilization", cpu_utilization=None, busy_cpu_seconds=None,
    )
    section = with_metrics_server(snapshot, data).to_record()["metrics_server"]
    assert section["age_seconds"] == pytest.approx(9.0)
    assert section["node"]["cpu_cores"] == pytest.approx(1.25)
    assert section["pods"] == [
        {"uid": "uid-cart", "namespace": "shop", "name": "cart", "cpu_cores": pytest.approx(0.25),
         "memory_working_set_bytes": 128 * 2**20}
    ]
    # Requests went to this node's object and, its two pods being in one namespace, to that
    # namespace's list — not to other namespaces, not cluster-wide.
    paths = [str(r.url.path) for r in cluster.requests_for("nodes") + cluster.requests_for("pods")]
    assert "/apis/metrics.k8s.io/v1beta1/nodes/node-a" in paths
    assert [p for p in paths if "metrics.k8s.io" in p and "/pods" in p] == ["/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods"]


def metrics_paths(cluster: EmulatedCluster) -> list[str]:
    return [str(r.url.path) for r in cluster.requests_for("pods") if "metrics.k8s.io" in str(r.url.path)]


def test_a_namespace_with_several_of_our_pods_is_one_list_a_lone_pod_one_get(
    cluster: EmulatedCluster, client: KubeClient
) -> None:
    cluster.set_node_metrics(NODE, "1", "1Gi", T0_TEXT)
    ours = [PodMeta(f"uid-{i}", "shop", f"web-{i}") for i in range(5)] + [PodMeta("uid-db", "data", "db")]
    for meta in ours:
        cluster.set_pod_metrics(meta.namespace, meta.name, {"app": ("100m", "10Mi")}, T0_TEXT)
    cluster.set_pod_metrics("shop", "elsewhere", {"app": ("900m", "10Mi")}, T0_TEXT)  # another node's pod
    reader = MetricsServerReader(client, NODE, lambda: ours, clock=Clock(T0))
    assert reader.read_once()
    data = reader.latest()
    assert data is not None
    assert sorted(p.name for p in data.pods) == ["db", "web-0", "web-1", "web-2", "web-3", "web-4"]
    assert all(p.usage.cpu_cores == pytest.approx(0.1) for p in data.pods)  # never the other node's pod
    assert metrics_paths(cluster) == [
        "/apis/metrics.k8s.io/v1beta1/namespaces/data/pods/db",
        "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods",
    ]


def test_a_namespace_mostly_of_other_nodes_pods_is_read_pod_by_pod_for_a_while(
    cluster: EmulatedCluster, client: KubeClient
) -> None:
    cluster.set_node_metrics(NODE, "1", "1Gi", T0_TEXT)
    ours = [PodMeta("uid-a", "big", "a"), PodMeta("uid-b", "big", "b")]
    for name in ["a", "b"] + [f"other-{i}" for i in range(LIST_WASTE_FACTOR * 2 + LIST_WASTE_SLACK + 1)]:
        cluster.set_pod_metrics("big", name, {"app": ("100m", "10Mi")}, T0_TEXT)
    clock = Clock(T0)
    reader = MetricsServerReader(client, NODE, lambda: ours, clock=clock)
    for _ in range(2):
        assert reader.read_once()
        assert sorted(p.name for p in reader.latest().pods) == ["a", "b"]  # type: ignore[union-attr]
    assert metrics_paths(cluster) == ["/apis/metrics.k8s.io/v1beta1/namespaces/big/pods",
                                      "/apis/metrics.k8s.io/v1beta1/namespaces/big/pods/a",
                                      "/apis/metrics.k8s.io/v1beta1/namespaces/big/pods/b"]
    clock.now = T0 + PER_POD_SECONDS + 1  # later, the list is tried again
    assert reader.read_once()
    assert metrics_paths(cluster)[-1] == "/apis/metrics.k8s.io/v1beta1/namespaces/big/pods"


def test_without_metrics_server_the_series_are_absent_counted_and_logged_once(
    cluster: EmulatedCluster, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.delete_metrics()
    reader = MetricsServerReader(client, NODE, lambda: PODS, clock=Clock(T0))
    with caplog.at_level(logging.WARNING, logger="agent.metrics_server"):
        for _ in range(4):
            assert not reader.read_once()
    assert reader.latest() is None
    assert reader.errors == 4
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "Metrics Server" in lines[0] and "404" in lines[0]

    with caplog.at_level(logging.WARNING, logger="agent.metrics_server"):
        cluster.set_node_metrics(NODE, "1", "1Gi", T0_TEXT)
        assert reader.read_once()
    assert reader.latest() is not None
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_old_data_is_kept_with_its_age_then_dropped(cluster: EmulatedCluster, client: KubeClient) -> None:
    cluster.set_node_metrics(NODE, "1", "1Gi", T0_TEXT)
    clock = Clock(T0 + 1)
    reader = MetricsServerReader(client, NODE, lambda: [], max_age_seconds=60, clock=clock)
    assert reader.read_once()
    cluster.stop()  # the API goes away
    clock.now = T0 + 50
    assert not reader.read_once()
    data = reader.latest()
    assert data is not None and data.age_seconds(clock.now) == pytest.approx(50)
    clock.now = T0 + 61
    assert reader.latest() is None
    assert reader.errors == 1


def test_the_background_thread_reads_and_stops(cluster: EmulatedCluster, client: KubeClient) -> None:
    cluster.set_node_metrics(NODE, "2", "1Gi", T0_TEXT)
    reader = MetricsServerReader(client, NODE, lambda: [], period_seconds=0.05, clock=Clock(T0))
    reader.start()
    try:
        deadline = time.monotonic() + 5
        while reader.latest() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        reader.stop()
    assert reader._thread is not None and not reader._thread.is_alive()
    data = reader.latest()
    assert data is not None and data.node is not None and data.node.cpu_cores == 2.0
