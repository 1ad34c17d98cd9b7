"""Node updates in the standalone scheduler's cache (scheduler/cluster/cache.py): a known node is
updated in place — its row of the node table, not the table — as kube-scheduler's cache updates
its NodeInfo (k8s.io/kubernetes v1.36 pkg/scheduler/backend/cache/cache.go `UpdateNode`, the
snapshot then brought up to date incrementally by `UpdateSnapshot`), and the parked pods move only
when kube-scheduler's classification of the update finds an event (pkg/scheduler/eventhandlers.go
`updateNodeInCache`; scheduler/cluster/node_events.py): a heartbeat moves none. At 5,000 KWOK
nodes heartbeating once a minute, the cache rebuilt its table and retried every parked pod ~80
times a second."""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np
import pytest

from benchmarks.harness.standalone_objects import node, pod
from common.kubetime import parse_timestamp
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.decisions.placement import MODE_ACTIVE, ProfileDecider
from scheduler.plugins.defaults import default_profile
from scheduler.standalone.loop import StandaloneScheduler
from scheduler.standalone.queue import ACTIVE, BACKOFF, UNSCHEDULABLE
from scheduler.standalone.staging import Stager
from tests.helpers.standalone_harness import StaticTelemetry

BOOTED = "2026-12-06T01:00:00Z"


def _timed(obj: dict[str, Any], at: str = BOOTED) -> dict[str, Any]:
    """`obj` with its conditions timed as a kubelet (or KWOK) writes them."""
    for condition in obj["status"]["conditions"]:
        condition.update(lastHeartbeatTime=at, lastTransitionTime=at, reason="KubeletReady")
    return obj


def _heartbeat(obj: dict[str, Any], at: str, transition: bool) -> dict[str, Any]:
    """The node after a status heartbeat at `at`: a kubelet's renews each condition's
    lastHeartbeatTime; KWOK's (rl/cluster/kwok.py's heartbeat stage) its lastTransitionTime too."""
    beat = copy.deepcopy(obj)
    for condition in beat["status"]["conditions"]:
        condition["lastHeartbeatTime"] = at
        if transition:
            condition["lastTransitionTime"] = at
    return beat


def _parked(node_obj: dict[str, Any], waiting: dict[str, Any]) -> StandaloneScheduler:
    """A scheduler whose one node is full and whose pod `waiting` is parked (unschedulable)."""
    sched = StandaloneScheduler(object(), default_profile())  # type: ignore[arg-type]  # no API call made
    sched.on_node_event("ADDED", node_obj)
    sched.on_pod_event("ADDED", pod("running", node_name="n", requests={"cpu": "1"}))
    sched.on_pod_event("ADDED", waiting)
    key = f"default/{waiting['metadata']['name']}"
    assert sched.queue.pop(0) == key
    decision = sched.decide(sched.cache.pending(key))  # type: ignore[arg-type]
    assert decision.chosen is None
    sched.queue.unschedulable(key)
    assert sched.queue.where(key) == UNSCHEDULABLE
    return sched


@pytest.mark.parametrize("transition", [False, True], ids=["kubelet", "kwok"])
def test_a_heartbeat_moves_no_parked_pod(transition: bool) -> None:
    n = _timed(node("n", cpu="2"))
    sched = _parked(n, pod("waiting", requests={"cpu": "2"}))
    generation = sched.cache.generation
    for minute in range(1, 4):
        sched.on_node_event("MODIFIED", _heartbeat(n, f"2026-12-06T01:0{minute}:00Z", transition))
    assert sched.queue.where("default/waiting") == UNSCHEDULABLE
    assert sched.cache.generation == generation


def test_a_heartbeat_updates_the_nodes_row_in_place() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    objs = [_timed(node(f"n{i}")) for i in range(3)]
    for obj in objs:
        cache.upsert_node(obj)
    table = cache.table()
    assert cache.upsert_node(_heartbeat(objs[1], "2026-12-06T01:05:00Z", transition=True)) is False
    again = cache.table()
    assert again is table and again.layout_version == table.layout_version  # not rebuilt
    ready = parse_timestamp("2026-12-06T01:05:00Z")
    assert again.infos[1].ready_since == ready and again.states[1].info.ready_since == ready
    assert cache.workload("n0").last_scale_up == ready  # the newest ready time follows


def test_relisting_the_same_nodes_renews_them_in_place() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    objs = [_timed(node(f"n{i}")) for i in range(3)]
    cache.replace_nodes(objs)
    table, generation = cache.table(), cache.generation
    cache.replace_nodes([_heartbeat(obj, "2026-12-06T01:05:00Z", transition=True) for obj in objs])
    assert cache.table() is table and cache.generation == generation
    assert cache.table().infos[2].ready_since == parse_timestamp("2026-12-06T01:05:00Z")
    cache.replace_nodes(objs[:2])  # one gone: a new table
    assert cache.table() is not table and cache.node_names() == ["n0", "n1"]


def test_cordoning_moves_no_parked_pod_and_uncordoning_does() -> None:
    n = _timed(node("n", cpu="2"))
    sched = _parked(n, pod("waiting", requests={"cpu": "2"}))
    cordoned = copy.deepcopy(n)
    cordoned["spec"]["unschedulable"] = True
    sched.on_node_event("MODIFIED", cordoned)  # nothing fits because of it
    assert sched.queue.where("default/waiting") == UNSCHEDULABLE
    assert sched.cache.table().states[0].info.unschedulable
    sched.on_node_event("MODIFIED", n)  # kube-scheduler: UpdateNodeTaint
    assert sched.queue.where("default/waiting") in (ACTIVE, BACKOFF)


def test_a_label_change_moves_the_parked_pod_and_it_fits_at_once() -> None:
    n = _timed(node("n", cpu="4", labels={"zone": "b"}))
    sched = _parked(n, pod("waiting", requests={"cpu": "1"}, node_selector={"zone": "a"}))
    relabelled = copy.deepcopy(n)
    relabelled["metadata"]["labels"]["zone"] = "a"
    sched.on_node_event("MODIFIED", relabelled)
    assert sched.queue.where("default/waiting") in (ACTIVE, BACKOFF)
    assert sched.decide(sched.cache.pending("default/waiting")).chosen == "n"  # type: ignore[arg-type]


def _update(rng: random.Random, obj: dict[str, Any], minute: int) -> dict[str, Any]:
    """`obj` after one random update: a heartbeat, a cordon or uncordon, a taint, a label, a
    new allocatable, or Ready flipping."""
    new = _heartbeat(obj, f"2026-12-06T02:{minute % 60:02d}:00Z", transition=rng.random() < 0.5)
    roll = rng.random()
    if roll < 0.2:
        new["spec"]["unschedulable"] = not new["spec"].get("unschedulable", False)
    elif roll < 0.35:
        new["spec"]["taints"] = [] if new["spec"].get("taints") else [
            {"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    elif roll < 0.5:
        new["metadata"]["labels"]["zone"] = rng.choice("abc")
    elif roll < 0.6:
        new["status"]["allocatable"]["cpu"] = rng.choice(["1", "2", "8"])
    elif roll < 0.7:
        ready = new["status"]["conditions"][0]
        ready["status"] = "False" if ready["status"] == "True" else "True"
    return new


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_decisions_after_in_place_updates_equal_a_fresh_caches(seed: int) -> None:
    """Nodes updated in place between decisions, telemetry refreshes staged in between (their
    batches carry the spec-only columns of the batch before: scheduler/decisions/placement.py
    rebuilds the rows of the nodes changed under it): every decision is the one a fresh cache
    and a fresh decider make of the same objects."""
    rng = random.Random(seed)
    now = 1.8e9
    objs = {f"n{i:02d}": _timed(node(f"n{i:02d}", cpu="4", labels={"zone": rng.choice("abc")}))
            for i in range(24)}
    cache = ClusterCache("kubejoule-scheduler")
    for obj in objs.values():
        cache.upsert_node(obj)
    telemetry = StaticTelemetry({})
    decider = ProfileDecider(default_profile())
    stager = Stager(cache, decider, telemetry.snapshot, lambda: now)
    placed: list[tuple[Any, str]] = []
    decided = 0
    for i in range(150):
        for _ in range(rng.randint(0, 3)):
            name = rng.choice(sorted(objs))
            objs[name] = _update(rng, objs[name], i)
            cache.upsert_node(objs[name])
        if i % 5 == 0:
            telemetry.samples = {}  # a refresh: a new view, staged before the next decision
            stager.stage_once()
        assert stager.current is not None
        token, view = stager.current
        raw = pod(f"p{i}", requests={"cpu": rng.choice(["100m", "500m", "1"])},
                  node_selector={"zone": rng.choice("abc")} if rng.random() < 0.3 else None,
                  tolerations=[{"key": "dedicated", "operator": "Exists"}] if rng.random() < 0.3 else ())
        info = pod_info_from_k8s(raw)
        got = decider.decide(info, cache.table(view, token), MODE_ACTIVE, random.Random(i), now)
        fresh = ClusterCache("kubejoule-scheduler")
        for obj in objs.values():
            fresh.upsert_node(obj)
        for placed_info, where in placed:
            fresh.assume(placed_info, where, now)
        want = ProfileDecider(default_profile()).decide(info, fresh.table(), MODE_ACTIVE, random.Random(i), now)
        assert got.names == want.names, i
        np.testing.assert_array_equal(got.total, want.total)
        assert got.chosen == want.chosen
        if got.chosen is not None:
            cache.assume(info, got.chosen, now)
            placed.append((info, got.chosen))
            decided += 1
    assert 0 < decided < 150  # both outcomes covered
