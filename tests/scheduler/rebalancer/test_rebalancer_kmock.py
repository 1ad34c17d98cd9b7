"""The live rebalancer against kmock's KubernetesEmulator (benchmarks/harness/standalone_kmock.py, with
its Eviction subresource), through the real `kubernetes` client and scheduler/cluster/kube.py.

The cluster: `old` (4 cores, linear 100–200 W) runs `web-1` (1 core, a ReplicaSet's, app=web);
`new` (8 cores, linear 50–150 W) runs four 1-core pods. Moving web-1 saves energy (the
decision's own tests price it). Telemetry is fixed samples; the lifetime predictor answers
3600 s from its controller's history (or, where a test says so, from priors only).

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import generate_latest

from benchmarks.harness.standalone_kmock import EmulatedCluster
from benchmarks.harness.standalone_objects import node, pod
from common.curves import PowerCurve
from scheduler.config.rebalancer import RebalancerConfig
from scheduler.domain.model import NodeTelemetry, PodInfo
from scheduler.lifetimes import LEVEL_CONTROLLER, LEVEL_PRIOR, LifetimePredictor, Prediction
from scheduler.rebalancer.api import KubeRebalancerApi
from scheduler.rebalancer.cluster import REBALANCING_TAINT
from scheduler.rebalancer.loop import ANNOTATION, Rebalancer
from tests.helpers.standalone_harness import api_client, wait_for

OLD, NEW = PowerCurve.linear(100.0, 200.0), PowerCurve.linear(50.0, 150.0)
NOW = 1_800_000_000.0


class Predictor(LifetimePredictor):
    def __init__(self, level: str = LEVEL_CONTROLLER) -> None:
        super().__init__()
        self.level = level

    def predict(self, pod: PodInfo, age_s: float) -> Prediction:
        return Prediction(3600.0, self.level, 10)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def bound(name: str, node_name: str, cpu: str = "1", *, owner: str | None = "ReplicaSet",
          labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    obj = pod(name, requests={"cpu": cpu, "memory": "1Gi"}, node_name=node_name,
              scheduler_name="default-scheduler")
    meta = obj["metadata"]
    meta["labels"] = labels or {}
    meta["annotations"] = extra.pop("annotations", {})
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-rs",
                                    "uid": f"{name}-owner", "controller": True}]
    obj["spec"].update(extra)
    obj["status"] = {"phase": "Running", "startTime": "2027-01-15T08:00:00Z"}
    return obj


def budget(allowed: int, app: str = "web") -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": f"{app}-pdb", "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": allowed}}


def samples(missing: tuple[str, ...] = ()) -> dict[str, NodeTelemetry]:
    out = {
        "old": NodeTelemetry("old", NOW, 125.0, "rapl", 0.25, 4, OLD.as_points()),
        "new": NodeTelemetry("new", NOW, 100.0, "rapl", 0.5, 8, NEW.as_points()),
    }
    return {k: v for k, v in out.items() if k not in missing}


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    with EmulatedCluster() as emulated:
        emulated.create_node(node("old", cpu="4", memory="16Gi"))
        emulated.create_node(node("new", cpu="8", memory="16Gi"))
        for i in range(4):
            emulated.create_pod(bound(f"n{i}", "new", labels={"app": "backend"}))
        yield emulated


class Setup:
    def __init__(self, cluster: EmulatedCluster, *, mode: str = "active", level: str = LEVEL_CONTROLLER,
                 missing: tuple[str, ...] = ()) -> None:
        self.cluster = cluster
        self.wall = Clock(NOW + 5.0)
        self.mono = Clock(100.0)
        self.telemetry = samples(missing)
        config = RebalancerConfig(mode=mode, scale_down_utilization_threshold=None)
        self.api = KubeRebalancerApi(api_client(cluster.url))
        self.rebalancer = Rebalancer(
            self.api, config, self.telemetry.get, lambda: True, predictor=Predictor(level),
            clock=self.mono, wall_clock=self.wall,
        )
        self.stop = threading.Event()
        self.threads = self.rebalancer.watch.start(self.stop)

    def sync(self, pods: int) -> None:
        wait_for(lambda: self.rebalancer.watch.synced
                 and len(self.rebalancer.tracker.snapshot()) == pods, what="the watch")

    def close(self) -> None:
        self.stop.set()
        self.rebalancer.watch.close()
        for thread in self.threads:
            thread.join(10)

    def metrics(self) -> str:
        return generate_latest(self.rebalancer.metrics.registry).decode()


@pytest.fixture
def setup(cluster: EmulatedCluster) -> Iterator[Any]:
    made: list[Setup] = []

    def make(**kwargs: Any) -> Setup:
        made.append(Setup(cluster, **kwargs))
        return made[-1]

    yield make
    for s in made:
        s.close()


def taints(cluster: EmulatedCluster, name: str) -> list[str]:
    obj = cluster.call("GET", f"/api/v1/nodes/{name}")
    return [t["key"] for t in (obj.get("spec") or {}).get("taints") or ()]


def reasons(cluster: EmulatedCluster) -> list[str]:
    return [e.get("reason") for e in cluster.list_events()]


def test_active_taints_the_node_and_evicts_through_the_eviction_api(cluster: EmulatedCluster, setup: Any) -> None:
    cluster.create_pod(bound("web-1", "old", labels={"app": "web"}))
    cluster.create("/apis/policy/v1/namespaces/default/poddisruptionbudgets", budget(1))
    s = setup()
    s.sync(5)
    result = s.rebalancer.round()
    assert result is not None and [m.node for m in result.moves] == ["old"]
    assert [(e.pod, e.status) for e in cluster.evictions()] == [("web-1", 201)]
    assert "web-1" not in [p["metadata"]["name"] for p in cluster.list_pods()]
    assert taints(cluster, "old") == [REBALANCING_TAINT]
    pdb = cluster.call("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web-pdb")
    assert pdb["status"]["disruptionsAllowed"] == 0
    assert "Rebalancing" in reasons(cluster)
    assert 'kubejoule_rebalancer_evictions_total{result="evicted"} 1.0' in s.metrics()
    # no node is deleted: the autoscaler's job
    assert {n["metadata"]["name"] for n in cluster.call("GET", "/api/v1/nodes")["items"]} == {"old", "new"}


def test_the_taint_comes_off_after_the_cool_down(cluster: EmulatedCluster, setup: Any) -> None:
    cluster.create_pod(bound("web-1", "old"))
    s = setup()
    s.sync(5)
    s.rebalancer.round()
    assert taints(cluster, "old") == [REBALANCING_TAINT]
    wait_for(lambda: any(t.key == REBALANCING_TAINT
                         for st in s.rebalancer.cache.node_states() for t in st.info.taints),
             what="the taint in the cache")
    s.mono.now += 1800.0
    s.wall.now += 1800.0
    s.telemetry.update({k: NodeTelemetry(v.node, s.wall.now - 1, v.watts, v.source, v.utilization,
                                         v.cores, v.curve_points) for k, v in s.telemetry.items()})
    s.rebalancer.round()
    assert taints(cluster, "old") == []


def test_shadow_annotates_and_evicts_nothing(cluster: EmulatedCluster, setup: Any) -> None:
    cluster.create_pod(bound("web-1", "old"))
    s = setup(mode="shadow")
    s.sync(5)
    result = s.rebalancer.round()
    assert result is not None and len(result.moves) == 1
    assert cluster.evictions() == [] and taints(cluster, "old") == []
    note = cluster.call("GET", "/api/v1/nodes/old")["metadata"]["annotations"][ANNOTATION]
    assert '"pods":{"default/web-1":"new"}' in note and '"saving_joules":' in note
    assert "RebalanceRecommended" in reasons(cluster)
    text = s.metrics()
    assert 'kubejoule_rebalancer_moves_total{mode="shadow"} 1.0' in text
    assert "kubejoule_rebalancer_recommended_saving_joules 0.0" not in text
    # the node rests: the next round recommends nothing new
    again = s.rebalancer.round()
    assert again is not None and not again.moves


def test_a_budget_that_refuses_at_eviction_time_stops_the_node(cluster: EmulatedCluster, setup: Any) -> None:
    """The budget allowed one disruption when listed, none when the eviction came (another
    eviction took it): the API server's 429 leaves the rest of the node alone."""
    cluster.create_pod(bound("web-1", "old", "0.5", labels={"app": "web"}))
    cluster.create_pod(bound("web-2", "old", "0.5", labels={"app": "web"}))
    path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    cluster.create(path, budget(2))
    s = setup()
    s.sync(6)
    listed = s.api.list_pdbs

    def list_then_spend() -> list[dict[str, Any]]:
        items = listed()
        cluster.call("PATCH", f"{path}/web-pdb", {"status": {"disruptionsAllowed": 0}})
        return items

    s.api.list_pdbs = list_then_spend  # type: ignore[method-assign]
    s.rebalancer.round()
    assert [e.status for e in cluster.evictions()] == [429]
    assert len(cluster.list_pods()) == 6
    assert 'kubejoule_rebalancer_evictions_total{result="refused"} 1.0' in s.metrics()


@pytest.mark.parametrize(
    "extra,reason",
    [
        ({"owner": None}, "bare"),
        ({"volumes": [{"name": "scratch", "emptyDir": {}}]}, "local_storage"),
        ({"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
         "not_safe_to_evict"),
    ],
)
def test_protected_pods_keep_their_node(cluster: EmulatedCluster, setup: Any,
                                        extra: dict[str, Any], reason: str) -> None:
    cluster.create_pod(bound("web-1", "old"))
    cluster.create_pod(bound("keep", "old", "0.5", **extra))
    s = setup()
    s.sync(6)
    result = s.rebalancer.round()
    assert result is not None and not result.moves
    assert next(x.reason for x in result.skipped if x.node == "old") == reason
    assert cluster.evictions() == [] and taints(cluster, "old") == []


def test_daemonset_and_mirror_pods_stay_and_never_block(cluster: EmulatedCluster, setup: Any) -> None:
    cluster.create_pod(bound("web-1", "old"))
    cluster.create_pod(bound("agent", "old", "0.1", owner="DaemonSet"))
    cluster.create_pod(bound("etcd", "old", "0.1", owner="Node",
                             annotations={"kubernetes.io/config.mirror": "x"}))
    s = setup()
    s.sync(7)
    s.rebalancer.round()
    assert [e.pod for e in cluster.evictions()] == ["web-1"]


@pytest.mark.parametrize(
    "kwargs,reason",
    [({"missing": ("old",)}, "telemetry"), ({"level": LEVEL_PRIOR}, "prediction_fallback")],
)
def test_in_doubt_about_a_node_it_evicts_nothing(cluster: EmulatedCluster, setup: Any,
                                                 kwargs: dict[str, Any], reason: str) -> None:
    cluster.create_pod(bound("web-1", "old"))
    s = setup(**kwargs)
    s.sync(5)
    result = s.rebalancer.round()
    assert result is not None and not result.moves
    assert next(x.reason for x in result.skipped if x.node == "old") == reason
    assert cluster.evictions() == []


def test_in_doubt_about_the_round_it_does_nothing(cluster: EmulatedCluster, setup: Any) -> None:
    cluster.create_pod(bound("web-1", "old"))
    s = setup()
    s.sync(5)
    s.rebalancer.round()  # the clocks' reference
    cluster.create_pod(bound("web-2", "new", "0.1"))
    s.wall.now += 3600.0  # the wall clock jumped an hour; the monotonic one did not move
    assert s.rebalancer.round() is None
    ready = s.rebalancer.telemetry_ready
    s.rebalancer.telemetry_ready = lambda: False
    assert s.rebalancer.round() is None
    s.rebalancer.telemetry_ready = ready

    def broken() -> list[dict[str, Any]]:
        from scheduler.cluster import kube

        raise kube.ApiError(503, "ServiceUnavailable")

    s.api.list_pdbs = broken  # type: ignore[method-assign]
    assert s.rebalancer.round() is None
    text = s.metrics()
    for result in ("clock_jump", "telemetry_not_ready", "pdbs_unavailable"):
        assert f'kubejoule_rebalancer_rounds_total{{result="{result}"}} 1.0' in text


def test_only_the_leader_acts(cluster: EmulatedCluster, setup: Any) -> None:
    cluster.create_pod(bound("web-1", "old"))
    s = setup()
    s.sync(5)
    s.rebalancer.is_leader = lambda: False
    s.rebalancer.round()
    assert cluster.evictions() == [] and taints(cluster, "old") == []


def test_two_replicas_one_lease_one_rebalancer(cluster: EmulatedCluster) -> None:
    """Two replicas with leader election on one Lease, rounds every 0.2 s: only the leader
    evicts, and the pod is evicted once."""
    from scheduler.service.leader import KubeLeaseStore, LeaderElectionConfig, LeaderElector

    cluster.create_pod(bound("web-1", "old"))
    stop = threading.Event()
    threads = []
    for identity in ("replica-a", "replica-b"):
        client = api_client(cluster.url, user_agent=identity)
        config = RebalancerConfig(mode="active", interval_seconds=0.2,
                                  scale_down_utilization_threshold=None)
        fresh = {k: NodeTelemetry(v.node, 0.0, v.watts, v.source, v.utilization, v.cores,
                                  v.curve_points) for k, v in samples().items()}
        rebalancer = Rebalancer(
            KubeRebalancerApi(client), config,
            lambda name, fresh=fresh: fresh.get(name) and NodeTelemetry(  # type: ignore[misc]
                name, time.time(), fresh[name].watts, "rapl", fresh[name].utilization,
                fresh[name].cores, fresh[name].curve_points),
            lambda: True, predictor=Predictor(), identity=identity,
        )
        lease = LeaderElectionConfig(namespace="default", name="kubejoule-rebalancer",
                                     identity=identity, lease_duration_seconds=4.0,
                                     renew_deadline_seconds=3.0, retry_period_seconds=0.5)
        elector = LeaderElector(KubeLeaseStore(client, "default", "kubejoule-rebalancer"), lease,
                                on_change=rebalancer.on_leadership)
        rebalancer.is_leader = elector.is_leader
        threads += [threading.Thread(target=elector.run, args=(stop,), daemon=True),
                    threading.Thread(target=rebalancer.run, args=(stop,), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: cluster.evictions(), what="an eviction")
        time.sleep(1.0)  # time for a second one, were it to come
    finally:
        stop.set()
        for thread in threads:
            thread.join(15)
    evictions = cluster.evictions()
    assert [(e.pod, e.status) for e in evictions] == [("web-1", 201)]
    lease_obj = cluster.call("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/"
                             "kubejoule-rebalancer")
    assert evictions[0].agent in ("replica-a", "replica-b")
    assert lease_obj["spec"].get("holderIdentity", "") in ("", evictions[0].agent)


def test_an_unreadable_pod_keeps_its_node(cluster: EmulatedCluster, setup: Any) -> None:
    cluster.create_pod(bound("web-1", "old"))
    cluster.create_pod(bound("odd", "old", "0.5", priority="high"))
    s = setup()
    wait_for(lambda: s.rebalancer.watch.synced and len(s.rebalancer.tracker.snapshot()) == 6,
             what="the watch")
    result = s.rebalancer.round()
    assert result is not None and not result.moves
    assert next(x.reason for x in result.skipped if x.node == "old") == "unreadable_pod"
    assert cluster.evictions() == []
