"""Lease-based leader election: the protocol on a fake clock, then two real replicas.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import pytest

from benchmarks.harness.standalone_kmock import EmulatedCluster
from benchmarks.harness.standalone_objects import node, pod
from scheduler.cluster import kube
from scheduler.plugins.energy import EnergyPlugin
from scheduler.service.leader import KubeLeaseStore, LeaderElectionConfig, LeaderElector
from scheduler.standalone.settings import MODE_ACTIVE, StandaloneConfig
from tests.helpers.standalone_harness import api_client, make_scheduler, running, wait_for

CONFIG = {
    "lease_duration_seconds": 15.0,
    "renew_deadline_seconds": 10.0,
    "retry_period_seconds": 2.0,
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class MemoryLeaseStore:
    """A Lease with resourceVersion preconditions, as the API server keeps it."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.broken: set[str] = set()  # identities cut off from the API
        self.before_replace: Any = None  # hook: runs between a replica's read and its write
        self.during_get: dict[str, Any] = {}  # identity → hook run while its read is in flight

    def view(self, identity: str) -> MemoryLeaseStore:
        store = self

        class View:
            def get(self) -> dict[str, Any] | None:
                store._check(identity)
                hook = store.during_get.pop(identity, None)
                if hook is not None:
                    hook()
                return copy.deepcopy(store.lease)

            def create(self, lease: dict[str, Any]) -> dict[str, Any]:
                store._check(identity)
                if store.lease is not None:
                    raise kube.ApiError(409, "AlreadyExists")
                return store._write(lease)

            def replace(self, lease: dict[str, Any]) -> dict[str, Any]:
                store._check(identity)
                if store.before_replace is not None:
                    hook, store.before_replace = store.before_replace, None
                    hook()
                assert store.lease is not None
                if (
                    lease["metadata"].get("resourceVersion")
                    != store.lease["metadata"]["resourceVersion"]
                ):
                    raise kube.ApiError(409, "Conflict")
                return store._write(lease)

        return View()  # type: ignore[return-value]

    def _check(self, identity: str) -> None:
        if identity in self.broken:
            raise kube.ApiError(None, "ConnectionRefusedError")

    def _write(self, lease: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.lease = stored
        return copy.deepcopy(stored)

    @property
    def holder(self) -> str | None:
        return None if self.lease is None else self.lease["spec"]["holderIdentity"]


def _pair(store: MemoryLeaseStore, clock: FakeClock) -> tuple[LeaderElector, LeaderElector]:
    a = LeaderElector(store.view("a"), LeaderElectionConfig(identity="a", **CONFIG), clock=clock)
    b = LeaderElector(store.view("b"), LeaderElectionConfig(identity="b", **CONFIG), clock=clock)
    return a, b


def test_first_candidate_leads_and_the_other_waits_while_it_renews() -> None:
    store, clock = MemoryLeaseStore(), FakeClock()
    a, b = _pair(store, clock)
    assert a.try_acquire_or_renew() and a.is_leader()
    for _ in range(20):  # 40 s of renewals: b never gets in
        clock.now += 2.0
        assert not b.try_acquire_or_renew()
        assert a.try_acquire_or_renew()
        assert a.is_leader() and not b.is_leader()
    assert store.holder == "a"
    assert store.lease is not None and store.lease["spec"]["leaseDurationSeconds"] == 15


def test_a_cut_off_leader_stops_before_the_standby_takes_over() -> None:
    store, clock = MemoryLeaseStore(), FakeClock()
    a, b = _pair(store, clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()  # b observes a's record now
    last_renewal = clock.now
    store.broken.add("a")
    a_lost_at = b_won_at = None
    while b_won_at is None:
        clock.now += 0.5
        a.try_acquire_or_renew()
        if a_lost_at is None and not a.is_leader():
            a_lost_at = clock.now
        if b.try_acquire_or_renew():
            b_won_at = clock.now
        assert not (a.is_leader() and b.is_leader())
    assert a_lost_at == last_renewal + 10.0  # the renew deadline
    assert b_won_at == last_renewal + 15.0  # the lease duration, by b's own observation
    assert store.holder == "b"
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1


def test_a_slow_read_does_not_make_the_lease_look_older() -> None:
    """b's read is sent, a renews while it is in flight, the read returns a's fresh record 6 s
    after it was sent. b must count the lease duration from when it *saw* the record: counted
    from when it asked, b would take over at 1015 while a leads until 1015.5."""
    store, clock = MemoryLeaseStore(), FakeClock()
    a, b = _pair(store, clock)
    a.try_acquire_or_renew()

    def slow_read() -> None:
        clock.now += 5.5
        assert a.try_acquire_or_renew()  # renewed at 1005.5: a leads until 1015.5
        clock.now += 0.5
        store.broken.add("a")  # and is cut off: that renewal is its last

    store.during_get["b"] = slow_read
    assert not b.try_acquire_or_renew()
    while not b.is_leader():
        clock.now += 0.5
        a.try_acquire_or_renew()
        b.try_acquire_or_renew()
        assert not (a.is_leader() and b.is_leader()), clock.now
    assert clock.now == 1006.0 + 15.0


def test_release_hands_over_at_the_next_try() -> None:
    store, clock = MemoryLeaseStore(), FakeClock()
    a, b = _pair(store, clock)
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert not a.is_leader() and store.holder == ""
    clock.now += 0.1
    assert b.try_acquire_or_renew() and store.holder == "b"


def test_a_concurrent_write_makes_the_slower_candidate_lose() -> None:
    store, clock = MemoryLeaseStore(), FakeClock()
    a, b = _pair(store, clock)
    a.try_acquire_or_renew()
    a.release()
    # Both see the released lease; b writes between a's read and a's write.
    store.before_replace = b.try_acquire_or_renew
    assert not a.try_acquire_or_renew()
    assert b.is_leader() and not a.is_leader() and store.holder == "b"


@pytest.mark.parametrize(
    ("lease", "renew", "retry"), [(10.0, 10.0, 2.0), (10.0, 5.0, 5.0), (10.0, 0.0, 1.0)]
)
def test_inconsistent_timings_are_refused(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig(
            lease_duration_seconds=lease, renew_deadline_seconds=renew, retry_period_seconds=retry
        )


# -- two replicas against the emulated API -------------------------------------------------------

FAST = {"lease_duration_seconds": 2.0, "renew_deadline_seconds": 1.5, "retry_period_seconds": 0.2}


class Replica:
    def __init__(self, url: str, identity: str) -> None:
        self.identity = identity
        store = KubeLeaseStore(api_client(url, identity), "kube-system", "kubejoule-scheduler")
        self.store = _Breakable(store)
        self.scheduler = make_scheduler(
            url,
            EnergyPlugin(),
            StandaloneConfig(mode=MODE_ACTIVE, seed=1, initial_backoff_seconds=0.05),
            user_agent=identity,
        )
        self.elector = LeaderElector(
            self.store,
            LeaderElectionConfig(identity=identity, **FAST),
            on_change=self.scheduler.on_leadership,
        )
        self.scheduler.is_leader = self.elector.is_leader
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)


class _Breakable:
    def __init__(self, store: KubeLeaseStore) -> None:
        self.inner = store
        self.broken = False

    def _check(self) -> None:
        if self.broken:
            raise kube.ApiError(None, "ConnectionRefusedError", "cut off")

    def get(self) -> dict[str, Any] | None:
        self._check()
        return self.inner.get()

    def create(self, lease: dict[str, Any]) -> dict[str, Any]:
        self._check()
        return self.inner.create(lease)

    def replace(self, lease: dict[str, Any]) -> dict[str, Any]:
        self._check()
        return self.inner.replace(lease)


def _bound(cluster: EmulatedCluster, names: list[str]) -> bool:
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in cluster.list_pods()}
    return all(placed.get(n) for n in names)


def test_two_replicas_bind_every_pod_exactly_once_across_takeovers() -> None:
    with EmulatedCluster() as cluster:
        for i in range(4):
            cluster.create_node(node(f"n{i}", cpu="32", memory="64Gi"))
        a, b = Replica(cluster.url, "replica-a"), Replica(cluster.url, "replica-b")
        with running(a.scheduler), running(b.scheduler):
            a.thread.start()
            wait_for(a.elector.is_leader, what="a leads")
            b.thread.start()
            first = [f"first-{i}" for i in range(20)]
            for name in first:
                cluster.create_pod(pod(name, requests={"cpu": "100m"}))
            wait_for(lambda: _bound(cluster, first), what="first batch bound")
            assert not b.elector.is_leader()

            # A replica cut off from the API stops binding before the other takes over.
            a.store.broken = True
            cut_at = time.monotonic()
            wait_for(b.elector.is_leader, timeout_seconds=10, what="b takes over")
            takeover_seconds = time.monotonic() - cut_at
            assert not a.elector.is_leader()
            second = [f"second-{i}" for i in range(20)]
            for name in second:
                cluster.create_pod(pod(name, requests={"cpu": "100m"}))
            wait_for(lambda: _bound(cluster, second), what="second batch bound")

            # A clean stop releases the lease: a (reconnected) takes over at once.
            a.store.broken = False
            b.stop.set()
            b.thread.join(5)
            released_at = time.monotonic()
            wait_for(a.elector.is_leader, timeout_seconds=10, what="a takes over again")
            handover_seconds = time.monotonic() - released_at
            third = [f"third-{i}" for i in range(10)]
            for name in third:
                cluster.create_pod(pod(name, requests={"cpu": "100m"}))
            wait_for(lambda: _bound(cluster, third), what="third batch bound")
            a.stop.set()
            a.thread.join(5)
        bindings = cluster.bindings()

    by_pod: dict[str, list[Any]] = {}
    for attempt in bindings:
        by_pod.setdefault(attempt.pod, []).append(attempt)
    assert set(by_pod) == set(first + second + third)
    # Exactly once: one binding request per pod, accepted — no replica ever raced the other.
    assert all(len(v) == 1 and v[0].accepted for v in by_pod.values())
    assert {by_pod[n][0].agent for n in first} == {"replica-a"}
    assert {by_pod[n][0].agent for n in second} == {"replica-b"}
    assert {by_pod[n][0].agent for n in third} == {"replica-a"}
    # Taking over needs a lease duration after the leader's last renewal, plus a retry and the
    # API's latency (generous here: the suite runs on two loaded cores). The exact timing —
    # the old leader stops at its renew deadline, the new one starts at the lease duration —
    # is held on a fake clock by test_a_cut_off_leader_stops_before_the_standby_takes_over.
    assert takeover_seconds <= FAST["lease_duration_seconds"] + 2.0
    # After a release, a takes over at its next try. Without one it would have to wait a lease
    # duration from when it first saw b's renewal (at most one retry before the release): at
    # least 2.0 − 0.2 = 1.8 s. Below that, the release is what let it in.
    assert handover_seconds < FAST["lease_duration_seconds"] - FAST["retry_period_seconds"]
