"""agent/kube/podmeta.py: pod JSON → metadata, the cache's deleted-pod grace, naming a Snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from agent.kube.podmeta import PodMetadataCache, pod_meta, with_pod_names
from agent.monitor.snapshot import PodPower, Snapshot


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(uid: str, name: str, namespace: str = "shop", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": name, "namespace": namespace}, "spec": {"nodeName": "n1", **spec}}


@pytest.mark.parametrize(
    ("owners", "kind"),
    [
        ([], None),
        ([{"kind": "ReplicaSet", "controller": True}], "ReplicaSet"),
        ([{"kind": "ConfigMap"}, {"kind": "DaemonSet", "controller": True}], "DaemonSet"),
        ([{"kind": "Node"}], "Node"),  # static pods: owned by their Node, no controller flag
    ],
)
def test_owner_kind_is_the_controllers(owners: list[dict[str, Any]], kind: str | None) -> None:
    obj = pod("u1", "p")
    obj["metadata"]["ownerReferences"] = owners
    meta = pod_meta(obj)
    assert meta is not None and meta.owner_kind == kind


def test_pod_json_without_uid_is_ignored_and_host_network_is_read() -> None:
    assert pod_meta({"metadata": {"name": "x"}}) is None
    meta = pod_meta(pod("u2", "p", hostNetwork=True))
    assert meta is not None and meta.host_network and meta.node == "n1"


def test_deleted_pods_keep_their_names_for_the_grace_period() -> None:
    clock = FakeClock()
    cache = PodMetadataCache(deleted_ttl_seconds=60, clock=clock)
    cache.replace([pod("a", "alpha"), pod("b", "beta")])
    cache.apply("DELETED", pod("a", "alpha"))
    assert [m.uid for m in cache.pods()] == ["b"]
    meta = cache.get("a")
    assert meta is not None and meta.name == "alpha"
    clock.now += 61
    assert cache.get("a") is None
    assert cache.get("b") is not None


def test_a_relist_retires_pods_that_vanished_and_revives_recreated_ones() -> None:
    clock = FakeClock()
    cache = PodMetadataCache(deleted_ttl_seconds=60, clock=clock)
    cache.replace([pod("a", "alpha"), pod("b", "beta")])
    cache.replace([pod("b", "beta-renamed")])
    assert [m.uid for m in cache.pods()] == ["b"]
    meta_b = cache.get("b")
    assert meta_b is not None and meta_b.name == "beta-renamed"
    assert cache.get("a") is not None  # retired, still named
    cache.apply("ADDED", pod("a", "alpha"))
    clock.now += 120
    assert cache.get("a") is not None  # alive again: no expiry
    assert cache.synced


def test_snapshot_pods_get_names_and_unknown_uids_stay_unnamed() -> None:
    cache = PodMetadataCache()
    cache.replace([pod("known", "cart", "shop")])
    snapshot = Snapshot(
        node="n1", interval_seconds=5.0, timestamp=0.0, source="rapl", node_watts=10.0, idle_watts=4.0,
        active_watts=6.0, idle_source="utilization", cpu_utilization=0.5, busy_cpu_seconds=1.0,
        pods=(
            PodPower(uid="known", qos="burstable", cpu_seconds=1.0, watts=3.0),
            PodPower(uid="stranger", qos="besteffort", cpu_seconds=1.0, watts=3.0),
        ),
    )
    named = with_pod_names(snapshot, cache)
    records = {p["uid"]: p for p in named.to_record()["pods"]}
    assert (records["known"]["namespace"], records["known"]["name"]) == ("shop", "cart")
    assert (records["stranger"]["namespace"], records["stranger"]["name"]) == (None, None)
    assert records["known"]["watts"] == 3.0
    # Without a cache (no API), the snapshot is untouched.
    assert with_pod_names(snapshot, None) is snapshot
