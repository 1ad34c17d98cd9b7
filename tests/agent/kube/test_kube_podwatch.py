"""agent/kube/client.py against kmock's KubernetesEmulator: this node's pods only, events, outages.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import json
import logging
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent.kube.client import Backoff, KubeClient, KubeConfigError, KubeError, NodePodWatch
from agent.kube.podmeta import PodMetadataCache
from benchmarks.harness.agent_kube_emulator import PODS, EmulatedCluster, unreachable_kubeconfig
from benchmarks.harness.components import require_binary

NODE = "node-a"


def wait_until(predicate: Callable[[], bool], timeout_seconds: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


@pytest.fixture
def watched(client: KubeClient) -> Iterator[tuple[NodePodWatch, PodMetadataCache]]:
    cache = PodMetadataCache()
    watch = NodePodWatch(client, NODE, cache, resync_seconds=30, backoff=Backoff(initial_seconds=0.1, max_seconds=0.5))
    watch.start()
    try:
        yield watch, cache
    finally:
        watch.stop()


def test_list_asks_for_this_node_only(cluster: EmulatedCluster, client: KubeClient) -> None:
    ours = cluster.add_pod("shop", "cart-1", NODE, owner_kind="ReplicaSet")
    cluster.add_pod("shop", "cart-2", "node-b")
    listing = client.list_node_pods(NODE)
    assert [p["metadata"]["uid"] for p in listing.items] == [ours]
    [request] = [r for r in cluster.requests_for("pods") if r.method == "GET"]
    assert request.params["fieldSelector"] == "spec.nodeName=node-a"


def test_watch_follows_pods_added_and_deleted_on_this_node(
    cluster: EmulatedCluster, watched: tuple[NodePodWatch, PodMetadataCache]
) -> None:
    watch, cache = watched
    first = cluster.add_pod("shop", "cart-1", NODE, owner_kind="StatefulSet")
    wait_until(lambda: cache.get(first) is not None)
    meta = cache.get(first)
    assert meta is not None
    assert (meta.namespace, meta.name, meta.owner_kind, meta.node) == ("shop", "cart-1", "StatefulSet", NODE)

    elsewhere = cluster.add_pod("shop", "cart-9", "node-b")
    second = cluster.add_pod("batch", "job-1", NODE, owner_kind="Job", host_network=True)
    wait_until(lambda: cache.get(second) is not None)
    assert cache.get(elsewhere) is None
    assert {m.uid for m in cache.pods()} == {first, second}
    second_meta = cache.get(second)
    assert second_meta is not None and second_meta.host_network

    cluster.delete_pod("shop", "cart-1")
    wait_until(lambda: len(cache) == 1)
    assert {m.uid for m in cache.pods()} == {second}
    # Recently deleted pods keep their names, for their last interval of energy.
    assert cache.get(first) is not None

    watches = [r for r in cluster.requests_for("pods") if r.params.get("watch") == "true"]
    assert watches and all(r.params["fieldSelector"] == "spec.nodeName=node-a" for r in watches)
    assert watch.failures == 0


def test_the_watch_survives_an_api_outage_and_relists(
    cluster: EmulatedCluster, watched: tuple[NodePodWatch, PodMetadataCache], caplog: pytest.LogCaptureFixture
) -> None:
    watch, cache = watched
    kept = cluster.add_pod("shop", "kept", NODE)
    gone = cluster.add_pod("shop", "gone", NODE)
    wait_until(lambda: len(cache) == 2)
    lists_before = watch.lists

    with caplog.at_level(logging.WARNING, logger="agent.kube"):
        cluster.stop()
        wait_until(lambda: watch.failures >= 3)
        assert not watch.connected
        # Deleted while the agent could not watch: no DELETED event will ever come.
        del cluster.handler.objects[PODS, "shop", "gone"]
        cluster.start()
        added = cluster.add_pod("shop", "added", NODE)
        wait_until(lambda: cache.get(added) is not None and watch.connected)

    assert {m.uid for m in cache.pods()} == {kept, added}
    assert cache.get(gone) is not None  # still named for a while, but no longer on the node
    assert watch.lists > lists_before
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 1, [r.getMessage() for r in caplog.records]
    assert any("connected again" in r.getMessage() for r in caplog.records)


def test_the_server_ends_each_watch_and_the_resync_repairs_a_lost_event(
    cluster: EmulatedCluster, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    kept = cluster.add_pod("shop", "kept", NODE)
    cluster.add_pod("shop", "lost", NODE)
    cache = PodMetadataCache()
    watch = NodePodWatch(client, NODE, cache, resync_seconds=1, backoff=Backoff(initial_seconds=0.1, max_seconds=0.5))
    with caplog.at_level(logging.WARNING, logger="agent.kube"):
        watch.start()
        try:
            wait_until(lambda: len(cache) == 2)
            # The pod goes, and its DELETED event never reaches the agent.
            del cluster.handler.objects[PODS, "shop", "lost"]
            wait_until(lambda: len(cache) == 1)
        finally:
            watch.stop()
    assert [m.uid for m in cache.pods()] == [kept]
    # A watch the server ends at its timeoutSeconds is a resync, not an outage.
    assert watch.lists >= 2 and watch.failures == 0
    assert not [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    watches = [r for r in cluster.requests_for("pods") if r.params.get("watch") == "true"]
    assert len(watches) >= 2 and {r.params["timeoutSeconds"] for r in watches} == {"1"}


class FailingOnce(PodMetadataCache):
    """A sink whose first full list fails, as a bug or a surprise in the data would."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def replace(self, pods: list[dict[str, Any]]) -> None:
        self.calls += 1
        if self.calls == 1:
            raise TypeError("unexpected pod JSON")
        super().replace(pods)


def test_an_unexpected_error_does_not_end_the_watch(
    cluster: EmulatedCluster, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    uid = cluster.add_pod("shop", "cart", NODE)
    cache = FailingOnce()
    errors: list[KubeError] = []
    watch = NodePodWatch(client, NODE, cache, backoff=Backoff(0.05, 0.1), on_error=errors.append)
    with caplog.at_level(logging.WARNING, logger="agent.kube"):
        watch.start()
        try:
            wait_until(lambda: cache.get(uid) is not None)
        finally:
            watch.stop()
    assert watch.failures == 1 and len(errors) == 1 and "TypeError" in str(errors[0])
    [failed] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert failed.exc_info is not None  # the traceback of what went wrong, once


def test_an_api_that_is_never_there_costs_retries_not_a_crash(tmp_path: Path) -> None:
    client = KubeClient.connect(unreachable_kubeconfig(tmp_path / "kubeconfig"), request_timeout_seconds=1)
    cache = PodMetadataCache()
    errors: list[KubeError] = []
    watch = NodePodWatch(client, NODE, cache, backoff=Backoff(0.05, 0.1), on_error=errors.append)
    watch.start()
    wait_until(lambda: watch.failures >= 2)
    started = time.monotonic()
    watch.stop()
    assert time.monotonic() - started < 2
    assert errors and all(e.status is None for e in errors)
    assert not cache.synced and cache.pods() == []


def test_metrics_reads_return_plain_json_and_404_as_status(cluster: EmulatedCluster, client: KubeClient) -> None:
    cluster.set_node_metrics(NODE, "1500m", "2Gi", "2025-01-01T00:00:00Z")
    node = client.get_node_metrics(NODE)
    assert node["usage"] == {"cpu": "1500m", "memory": "2Gi"}
    with pytest.raises(KubeError) as missing:
        client.get_pod_metrics("shop", "nope")
    assert missing.value.status == 404


def test_an_error_event_carries_its_code() -> None:
    line = b'{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}'
    with pytest.raises(KubeError) as gone:
        KubeClient._watch_event(line, "watching")
    assert gone.value.status == 410
    assert KubeClient._watch_event(b'{"type": "ADDED", "object": {"metadata": {}}}', "w") == ("ADDED", {"metadata": {}})


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[tuple[int, Path, list[tuple[str, str | None]]]]:
    """An HTTPS API server on 127.0.0.1 that answers every GET with an empty pod list:
    (port, its CA certificate, the (path, Authorization header) of each request)."""
    require_binary("openssl", "needs openssl to make the API server's certificate")
    key, cert = tmp_path / "tls.key", tmp_path / "ca.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    seen: list[tuple[str, str | None]] = []

    class Api(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            seen.append((self.path, self.headers.get("Authorization")))
            body = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], cert, seen
    finally:
        server.shutdown()
        server.server_close()


def test_in_a_pod_the_service_account_is_used(
    tls_api: tuple[int, Path, list[tuple[str, str | None]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, ca_cert, seen = tls_api
    token = tmp_path / "token"
    token.write_text("service-account-token")
    # What the kubelet mounts in every pod, at these paths in the test instead of /var/run/secrets.
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_CERT_FILENAME", str(ca_cert))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    # A kubeconfig lying around does not win over the pod's own service account.
    monkeypatch.setenv("KUBECONFIG", str(unreachable_kubeconfig(tmp_path / "kubeconfig")))
    client = KubeClient.connect(request_timeout_seconds=3)
    try:
        listing = client.list_node_pods(NODE)
    finally:
        client.close()
    assert client.server == f"https://127.0.0.1:{port}"
    assert listing.resource_version == "7" and listing.items == []
    [(path, authorization)] = seen
    assert path == "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a"
    assert authorization is not None and authorization.lower() == "bearer service-account-token"


def test_no_configuration_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(KubeConfigError, match="no kubeconfig"):
        KubeClient.connect()
    broken = tmp_path / "broken"
    broken.write_text("clusters: [", encoding="utf-8")
    with pytest.raises(KubeConfigError):
        KubeClient.connect(broken)


def test_backoff_doubles_up_to_its_cap_and_resets() -> None:
    backoff = Backoff(initial_seconds=1.0, max_seconds=8.0, jitter=0.0)
    assert [backoff.next_delay() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    backoff.reset()
    assert backoff.next_delay() == 1.0
    jittery = Backoff(initial_seconds=10.0, jitter=0.2)
    assert jittery.next_delay(lambda: 0.0) == pytest.approx(8.0)
    assert jittery.next_delay(lambda: 1.0) == pytest.approx(24.0)
