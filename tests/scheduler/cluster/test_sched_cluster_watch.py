"""The extender's cluster watch: pods bound by kube-scheduler since a node's telemetry sample
count in that node's utilization (issue 6), through the same ClusterWatch the standalone
scheduler runs, against kmock's emulator and a scraped agent exposition.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from benchmarks.harness.standalone_kmock import EmulatedCluster
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.watch import ClusterWatch
from scheduler.cmd.cli import build_extender, build_parser
from scheduler.config.build import kubernetes_configured
from scheduler.config.parse import (
    Config,
    ConfigError,
    ExtenderConfig,
    KubernetesConfig,
    config_from_dict,
)
from scheduler.extender.app import create_app
from tests.helpers.sched_http import agent_exposition, text_server
from tests.helpers.standalone_harness import wait_for

# Flat to 60 %, then 2,000 W per unit of utilization: ΔP grows with u past 0.6.
STEEP = (100.0,) * 6 + (100.0, 300.0, 500.0, 700.0, 900.0)


def node(name: str, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, cpu: str, node_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def prioritize(client: TestClient, cpu: str, names: list[str]) -> dict[str, int]:
    response = client.post("/prioritize", json={"Pod": pod("incoming", cpu), "NodeNames": names})
    assert response.status_code == 200, response.text
    return {entry["Host"]: entry["Score"] for entry in response.json()}


def test_a_pod_bound_after_the_sample_lowers_that_nodes_next_score() -> None:
    with EmulatedCluster() as cluster, text_server() as agents:
        for name in ("n1", "n2"):
            cluster.create_node(node(name))
        cluster.create_pod(pod("old", "2", node_name="n1"))  # bound before the sample
        time.sleep(1.05)  # creation times have one-second resolution
        sample_time = time.time()
        for name in ("n1", "n2"):
            agents.pages[f"/{name}"] = agent_exposition(name, sample_time, utilization=0.4, curve=STEEP)
        config = config_from_dict({
            "mode": "active",
            "refresh_seconds": 0.2,
            "scorer": {"delta_p_ref_watts": 1000},
            "telemetry": {"agents": {"static": {n: agents.url(f"/{n}") for n in ("n1", "n2")}}},
            "kubernetes": {"host": cluster.url},
        })
        extender = build_extender(config)  # watch_cluster: auto, and a host is configured
        watch = extender.cluster
        assert isinstance(watch, ClusterWatch)
        with TestClient(create_app(extender)) as client:
            wait_for(lambda: extender.ready and watch.synced, 15, "telemetry and watches")
            # The old pod is in the sample already: u 0.4 → 0.65 with a 2-core pod, ΔP 100 W.
            assert prioritize(client, "2", ["n1", "n2"]) == {"n1": 9, "n2": 9}
            assert 'kubejoule_extender_cluster_synced 1.0' in client.get("/metrics").text

            # kube-scheduler binds a waiting pod to n1 after the sample was taken.
            cluster.create_pod(pod("new", "2"))
            wait_for(lambda: "default/new" in watch.cache._unbound, 10, "the waiting pod")
            cluster.call("POST", "/api/v1/namespaces/default/pods/new/binding", {
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "new", "namespace": "default"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
            })
            wait_for(lambda: watch.cache.placement("default/new") == ("n1", False), 10, "the binding")
            # Node states are reused for CLUSTER_STATES_TTL_SECONDS; a call after that sees
            # u = 0.4 + 2/8 on n1: 0.65 → 0.9, ΔP 500 W → 5. n2 is unchanged.
            wait_for(lambda: prioritize(client, "2", ["n1", "n2"]) == {"n1": 5, "n2": 9}, 10,
                     "the pod bound since the sample counted on n1")
            (state,) = [s for s in watch.node_states(extender.store.telemetry) if s.info.name == "n1"]
            assert (state.pod_count, state.cpu_since_sample_cores) == (2, 2.0)


def test_the_switch_turns_the_watch_off() -> None:
    """`watch_cluster: false` builds no watch even with an API configured: scores come from
    telemetry alone (the sample's u), and no synced gauge is exported."""
    with text_server() as agents:
        agents.pages["/n1"] = agent_exposition("n1", time.time(), utilization=0.4, curve=STEEP)
        config = config_from_dict({
            "mode": "active",
            "refresh_seconds": 0.2,
            "scorer": {"delta_p_ref_watts": 1000},
            "telemetry": {"agents": {"static": {"n1": agents.url("/n1")}}, "node_cores": {"n1": 8}},
            "extender": {"watch_cluster": False},
            "kubernetes": {"host": "http://127.0.0.1:9"},  # configured, but not to be used
        })
        extender = build_extender(config)
        assert extender.cluster is None
        with TestClient(create_app(extender)) as client:
            wait_for(lambda: extender.ready, 15, "telemetry")
            assert prioritize(client, "2", ["n1"]) == {"n1": 9}
            assert "kubejoule_extender_cluster_synced" not in client.get("/metrics").text


def test_the_watch_reports_nothing_until_both_kinds_are_listed() -> None:
    """A node list without its pods would make every node look empty (and, with
    consolidation, charge them idle power): until synced the extender gets no states."""

    class Api:
        def list_nodes(self) -> tuple[list[dict[str, Any]], str | None]:
            return [node("n1")], "1"

        def list_pods(self) -> tuple[list[dict[str, Any]], str | None]:
            return [pod("a", "1", node_name="n1")], "1"

    cache = ClusterCache(None)
    watch = ClusterWatch(Api(), cache)  # type: ignore[arg-type]
    watch.relist_nodes()
    watch.nodes_synced.set()
    assert watch.node_states() == [] and not watch.synced
    watch.relist_pods()
    watch.pods_synced.set()
    [state] = watch.node_states()
    assert (state.info.name, state.pod_count, state.requested.cpu_millicores) == ("n1", 1, 1000)
    assert cache.pending_keys() == []  # no scheduler name: nothing waits for the extender


def test_placement_time_of_pods_bound_by_someone_else() -> None:
    now = [5000.0]
    cache = ClusterCache(None, clock=lambda: now[0])
    cache.upsert_node(node("n"))
    waiting = pod("w", "1")
    waiting["metadata"]["uid"] = "u-w"
    cache.upsert_pod(waiting)
    assert cache.pending_keys() == []
    now[0] = 5010.0
    bound = {**waiting, "spec": {**waiting["spec"], "nodeName": "n"}}
    cache.upsert_pod(bound)  # seen waiting, then bound: the time we learnt it
    listed = pod("l", "0.5", node_name="n")
    listed["metadata"]["creationTimestamp"] = "1970-01-01T01:23:20Z"  # 5000 s
    cache.upsert_pod(listed)  # first seen bound: its own timestamps
    sample = lambda name: _telemetry(name, sample_time=5005.0)  # noqa: E731
    [state] = cache.node_states(sample)
    assert state.cpu_since_sample_cores == 1.0  # w (5010) counts, l (5000) does not
    # A re-created pod with the same name but a new uid is not "seen waiting".
    cache.delete_pod(bound)
    again = pod("w", "1", node_name="n")
    again["metadata"].update(uid="u-w2", creationTimestamp="1970-01-01T01:23:20Z")
    cache.upsert_pod(again)
    [state] = cache.node_states(sample)
    assert state.cpu_since_sample_cores == 0.0


def _telemetry(name: str, sample_time: float) -> Any:
    from scheduler.domain.model import NodeTelemetry

    return NodeTelemetry(name, sample_time, 100.0, "rapl", 0.2, 8.0)


@pytest.mark.parametrize(
    ("kubernetes", "env", "token", "kubeconfig_file", "expected"),
    [
        (KubernetesConfig(host="http://127.0.0.1:8001"), {}, False, False, True),
        (KubernetesConfig(kubeconfig="/nowhere/config"), {}, False, False, True),
        (KubernetesConfig(), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, True, False, True),
        (KubernetesConfig(), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, False, False, False),
        (KubernetesConfig(), {}, False, True, True),
        (KubernetesConfig(), {}, False, False, False),
    ],
)
def test_kubernetes_configured(
    tmp_path: Path,
    kubernetes: KubernetesConfig,
    env: dict[str, str],
    token: bool,
    kubeconfig_file: bool,
    expected: bool,
) -> None:
    token_path = tmp_path / "token"
    if token:
        token_path.write_text("t")
    home = tmp_path / "home"
    if kubeconfig_file:
        (home / ".kube").mkdir(parents=True)
        (home / ".kube" / "config").write_text("apiVersion: v1\n")
    environ = {"HOME": str(home), **env}
    config = Config(kubernetes=kubernetes)
    assert kubernetes_configured(config, environ, str(token_path)) is expected
    # $KUBECONFIG, a path list, is looked at instead of ~/.kube/config.
    if kubeconfig_file:
        other = str(tmp_path / "missing") + ":" + str(home / ".kube" / "config")
        assert kubernetes_configured(Config(), {"KUBECONFIG": other}, str(token_path))


def test_watch_cluster_switch() -> None:
    assert config_from_dict({}).extender.watch_cluster is None
    assert config_from_dict({"extender": {"watch_cluster": "auto"}}).extender == ExtenderConfig()
    assert config_from_dict({"extender": {"watch_cluster": False}}).extender.watch_cluster is False
    with pytest.raises(ConfigError, match="extender.watch_cluster"):
        config_from_dict({"extender": {"watch_cluster": "sometimes"}})
    parser = build_parser()
    assert parser.parse_args(["extender"]).watch_cluster is None
    assert parser.parse_args(["extender", "--no-watch-cluster"]).watch_cluster is False
    assert parser.parse_args(["extender", "--watch-cluster"]).watch_cluster is True


def test_the_extender_logs_feature_schema_v3_with_the_watchs_workloads(tmp_path: Path) -> None:
    """Issue 24: the extender's decision log writes v3 — the features the standalone scheduler
    and the simulator log, one implementation — with each node's workload, lifetimes and
    autoscaler marks from its cluster watch (the deletion-candidate taint's Unix time)."""
    from scheduler.decisionlog.logfile import read_records
    from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3

    marked = time.time() - 120
    with EmulatedCluster() as cluster, text_server() as agents:
        cluster.create_node(node("n1"))
        tainted = node("n2")
        tainted["spec"] = {"taints": [{"key": "DeletionCandidateOfClusterAutoscaler",
                                       "value": str(int(marked)), "effect": "PreferNoSchedule"}]}
        cluster.create_node(tainted)
        job = pod("job-a", "1", node_name="n1")
        job["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "j", "controller": True}
        ]
        cluster.create_pod(job)
        for name in ("n1", "n2"):
            agents.pages[f"/{name}"] = agent_exposition(name, time.time(), utilization=0.4, curve=STEEP)
        config = config_from_dict({
            "mode": "active",
            "refresh_seconds": 0.2,
            "telemetry": {"agents": {"static": {n: agents.url(f"/{n}") for n in ("n1", "n2")}}},
            "kubernetes": {"host": cluster.url},
        })
        extender = build_extender(config, str(tmp_path / "decisions.jsonl"))
        watch = extender.cluster
        assert isinstance(watch, ClusterWatch)
        with TestClient(create_app(extender)) as client:
            wait_for(lambda: extender.ready and watch.synced, 15, "telemetry and watches")
            prioritize(client, "1", ["n1", "n2"])
    records, broken = read_records(tmp_path / "decisions.jsonl")
    assert broken == 0
    [decision] = [r for r in records if r["type"] == "decision"]
    assert decision["feature_schema"] == FEATURE_SCHEMA_V3.version
    features = {c["node"]: c["features"] for c in decision["candidates"]}
    names = list(FEATURE_SCHEMA_V3.node_features + FEATURE_SCHEMA_V3.pod_features)
    assert all(list(f) == names for f in features.values())
    n1, n2 = features["n1"], features["n2"]
    assert n1["workload_known"] == n2["workload_known"] == 1.0
    assert n1["job_pod_share"] == 1.0 and n2["job_pod_share"] is None
    # the Job's pod, from the Job prior: the Lomax's mean residual life is 30 min + its age
    assert n1["lifetimes_known"] == 1.0 and 1790 < n1["predicted_seconds_until_pods_end"] < 1810
    assert 0.0 <= n2["predicted_seconds_until_pods_end"] < 1.0  # nothing runs there
    assert (n1["deletion_candidate"], n2["deletion_candidate"]) == (0.0, 1.0)
    assert n1["unneeded_seconds"] == 0.0 and 100 <= n2["unneeded_seconds"] <= 200
    assert n1["autoscaler_known"] == 1.0
    assert n1["predicted_lifetime_seconds"] == 3600.0  # the incoming bare pod: the 1 h prior
    assert n1["lifetime_from_history"] == 0.0
