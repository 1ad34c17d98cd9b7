"""The scheduling queue (backoff, parking, never dropping) and the cluster cache (assumed pods)."""

from __future__ import annotations

from benchmarks.harness.standalone_objects import node, pod
from scheduler.cluster.cache import ClusterCache
from scheduler.domain.model import NodeTelemetry, PodInfo
from scheduler.standalone.queue import ACTIVE, BACKOFF, IN_FLIGHT, UNSCHEDULABLE, SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _queue() -> tuple[SchedulingQueue, Clock]:
    clock = Clock()
    return SchedulingQueue(1.0, 10.0, 60.0, clock=clock), clock


def test_fifo_and_no_duplicates() -> None:
    q, _ = _queue()
    for key in ("a", "b", "a", "c"):
        q.add(key)
    assert [q.pop(0), q.pop(0), q.pop(0), q.pop(0)] == ["a", "b", "c", None]
    assert q.lengths()[IN_FLIGHT] == 3


def _backoff_wait(q: SchedulingQueue, clock: Clock, key: str) -> float:
    q.backoff(key)
    assert q.where(key) == BACKOFF
    start = clock.now
    while q.pop(0) is None:
        clock.now += 0.25
    return clock.now - start


def test_backoff_doubles_up_to_the_cap_and_restarts_for_a_new_pod() -> None:
    q, clock = _queue()
    q.add("a")
    assert q.pop(0) == "a"
    waits = [_backoff_wait(q, clock, "a") for _ in range(6)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert q.attempts("a") == 7
    q.remove("a")  # bound (or deleted): its history goes
    q.add("a")
    assert q.pop(0) == "a"
    assert _backoff_wait(q, clock, "a") == 1.0


def test_unschedulable_pods_wait_for_a_change_or_the_timeout() -> None:
    q, clock = _queue()
    q.add("a")
    assert q.pop(0) == "a"
    q.unschedulable("a")
    assert q.where("a") == UNSCHEDULABLE
    clock.now += 30
    assert q.pop(0) is None  # parked pods are not retried on their own …
    q.cluster_changed()  # … until something changes
    assert q.pop(0) == "a"
    q.unschedulable("a")
    clock.now += 59
    assert q.pop(0) is None
    clock.now += 2  # … or the parking timeout passes
    assert q.pop(0) == "a"


# kube-scheduler v1.36.3, pkg/scheduler/backend/queue/scheduling_queue_test.go,
# TestPriorityQueue_MoveAllToActiveOrBackoffQueue: pods parked just now go to the backoff queue on
# a move; once the clock has passed their backoff ("Move clock by podMaxBackoffDuration, so that
# pods in the unschedulablePods would pass the backing off, and the pods will be moved into
# activeQ") the same move sends them to the active queue.
def test_a_move_sends_a_parked_pod_to_backoff_only_for_what_is_left_of_its_backoff() -> None:
    q, clock = _queue()
    for key in ("a", "b", "c"):
        q.add(key)
    for key in ("a", "b"):
        assert q.pop(0) == key
        q.unschedulable(key)
    q.cluster_changed()
    assert q.where("a") == BACKOFF and q.where("b") == BACKOFF
    assert q.lengths()[ACTIVE] == 1  # only "c"
    assert q.pop(0) == "c"
    q.unschedulable("c")
    for key in ("a", "b"):  # tried early (nothing active), and parked again
        assert q.pop(0) == key
        q.unschedulable(key)
    clock.now += 10.0  # the maximum backoff: every parked pod is past its own
    q.cluster_changed()
    assert q.lengths() == {ACTIVE: 3, BACKOFF: 0, UNSCHEDULABLE: 0, IN_FLIGHT: 0}


# kube-scheduler v1.36.3, scheduling_queue_test.go TestBackOffFlow: the backoff of a pod that keeps
# failing is 1, 2, 4, 8, 10, 10 s, counted from its failed attempt (the pod's Timestamp).
def test_the_backoff_is_counted_from_the_failed_attempt_not_from_the_move() -> None:
    q, clock = _queue()
    q.add("a")
    assert q.pop(0) == "a"
    for attempt, want in enumerate((1.0, 2.0, 4.0, 8.0, 10.0, 10.0), 1):
        failed_at = clock.now
        q.unschedulable("a")
        clock.now += want / 2  # half its backoff later, the cluster changes
        q.cluster_changed()
        assert q.where("a") == BACKOFF
        while True:  # another pod is always active, so "a" is not tried early
            q.add("x")
            popped = q.pop(0)
            if popped == "a":  # its backoff is over, and its timestamp is older than x's
                break
            assert popped == "x" and q.where("a") == BACKOFF
            q.remove("x")  # bound
            clock.now += 0.25
        assert clock.now - failed_at == want  # its backoff ran from the attempt, not the move
        assert q.attempts("a") == attempt + 1
        q.remove("x")


# kube-scheduler v1.36.3, pkg/scheduler/backend/queue/active_queue.go `pop` with the feature
# SchedulerPopFromBackoffQ (beta, on by default since 1.33: pkg/features/kube_features.go): when the
# active queue is empty, the pod whose backoff ends first is popped from the backoff queue; pods
# backing off after an error are in podErrorBackoffQ (backoff_queue.go `popBackoff` pops only
# podBackoffQ) and wait their backoff out.
def test_with_nothing_active_the_backoff_queue_is_tried_early_but_not_after_errors() -> None:
    q, clock = _queue()
    for key in ("a", "b", "e"):
        q.add(key)
    for key in ("a", "b"):
        assert q.pop(0) == key
        q.unschedulable(key)
        clock.now += 0.25
    assert q.pop(0) == "e"
    q.backoff("e")  # a transient error
    q.cluster_changed()
    assert q.lengths()[BACKOFF] == 3 and q.lengths()[ACTIVE] == 0
    assert [q.pop(0), q.pop(0)] == ["a", "b"]  # the earliest backoff end first
    assert q.pop(0) is None and q.where("e") == BACKOFF
    clock.now += 0.99
    assert q.pop(0) is None
    clock.now += 0.01
    assert q.pop(0) == "e"


# kube-scheduler v1.36.3, pkg/scheduler/backend/queue/scheduling_queue_test.go
# `TestPriorityQueue_Add`: pods added at medium, low and high priority pop high, medium, low.
def test_the_highest_priority_is_tried_first() -> None:
    q, _ = _queue()
    q.add("mpp", 500)
    q.add("up", 0)
    q.add("hpp", 1000)
    assert [q.pop(0), q.pop(0), q.pop(0)] == ["hpp", "mpp", "up"]


# kube-scheduler v1.36.3, pkg/scheduler/framework/plugins/queuesort/priority_sort_test.go
# `TestLess` ("equal priority. p1 is added to schedulingQ earlier than p2", and the reverse): of
# two pods of one priority the earlier timestamp goes first; a failed attempt refreshes a pod's
# timestamp (backend/queue/scheduling_queue.go `AddUnschedulableIfNotPresent`).
def test_equal_priorities_go_by_timestamp_refreshed_by_each_failed_attempt() -> None:
    q, clock = _queue()
    q.add("a")
    assert q.pop(0) == "a"
    clock.now = 2.0
    q.unschedulable("a")  # timestamp 2
    q.cluster_changed()  # back to backoff until 3
    clock.now = 2.5
    q.add("b")  # timestamp 2.5, active
    clock.now = 3.0  # a's backoff is over: it joins the active queue after b…
    assert q.pop(0) == "a"  # …and goes first, its timestamp being the earlier
    assert q.pop(0) == "b"
    clock.now = 4.0
    q.unschedulable("a")  # timestamp 4: now behind a pod added at 3.5
    clock.now = 3.5
    q.add("c")
    clock.now = 10.0
    q.cluster_changed()
    assert [q.pop(0), q.pop(0)] == ["c", "a"]


def test_the_scheduler_queues_each_pod_at_its_spec_priority() -> None:
    from scheduler.plugins.defaults import default_profile
    from scheduler.standalone.loop import StandaloneScheduler

    sched = StandaloneScheduler(object(), default_profile())  # type: ignore[arg-type]  # no API call made
    for name, priority in (("low", 0), ("high", 1000), ("mid", 500)):
        obj = pod(name)
        obj["spec"]["priority"] = priority
        sched.on_pod_event("ADDED", obj)
    assert [sched.queue.pop(0) for _ in range(3)] == ["default/high", "default/mid", "default/low"]


# kube-scheduler v1.36.3, pkg/scheduler/eventhandlers.go `deletePodFromCache`: the informer's
# handler of a pod that leaves (its pod informer sees only non-terminal pods, so one that ends is
# a delete) moves the unschedulable pods itself (MoveAllToActiveOrBackoffQueue).
def test_a_pod_that_ends_readies_the_parked_pods_from_the_watch_not_at_the_next_poll() -> None:
    from scheduler.plugins.defaults import default_profile
    from scheduler.standalone.loop import StandaloneScheduler

    sched = StandaloneScheduler(object(), default_profile())  # type: ignore[arg-type]  # no API call made
    sched.on_node_event("ADDED", node("n", cpu="2"))
    running = pod("running", node_name="n", requests={"cpu": "2"})
    sched.on_pod_event("ADDED", running)
    sched.on_pod_event("ADDED", pod("waiting", requests={"cpu": "2"}))
    assert sched.queue.pop(0) == "default/waiting"
    sched.queue.unschedulable("default/waiting")
    sched.on_pod_event("MODIFIED", running)  # no room freed: it stays parked
    assert sched.queue.where("default/waiting") == UNSCHEDULABLE
    running["status"] = {"phase": "Succeeded"}
    sched.on_pod_event("MODIFIED", running)
    assert sched.queue.where("default/waiting") in (ACTIVE, BACKOFF)


def test_a_change_during_the_attempt_means_retry_not_park() -> None:
    q, clock = _queue()
    q.add("a")
    assert q.pop(0) == "a"
    q.cluster_changed()  # e.g. a node was added while "a" was being filtered
    q.unschedulable("a")
    assert q.where("a") == BACKOFF


def test_removed_pods_leave_every_sub_queue() -> None:
    q, _ = _queue()
    for key in ("a", "b", "c", "d"):
        q.add(key)
    q.pop(0)
    q.pop(0)
    q.backoff("a")
    q.unschedulable("b")
    q.pop(0)  # c in flight, d active
    for key in ("a", "b", "c", "d"):
        q.remove(key)
    assert len(q) == 0 and all(v == 0 for v in q.lengths().values())
    assert q.where("d") is None and ACTIVE in q.lengths()


# -- the cache -------------------------------------------------------------------------------------


def test_assumed_pods_count_until_confirmed_and_are_not_counted_twice() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    cache.upsert_node(node("n", cpu="4"))
    p = pod("a", requests={"cpu": "1"})
    assert cache.upsert_pod(p) == "default/a"
    info = cache.pending("default/a")
    assert info is not None
    cache.assume(info, "n", now=100.0)
    assert cache.pending("default/a") is None
    (state,) = cache.node_states()
    assert state.requested.cpu_millicores == 1000 and state.pod_count == 1
    assert cache.placement("default/a") == ("n", True)
    cache.upsert_pod(p)  # the watch has not seen our binding yet: still assumed, not pending
    assert cache.pending("default/a") is None
    cache.upsert_pod({**p, "spec": {**p["spec"], "nodeName": "n"}})  # now it has
    assert cache.placement("default/a") == ("n", False)
    (state,) = cache.node_states()
    assert state.requested.cpu_millicores == 1000 and state.pod_count == 1


def test_forget_returns_the_pod_to_pending_and_frees_the_node() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    cache.upsert_node(node("n"))
    cache.upsert_pod(pod("a", requests={"cpu": "1"}))
    info = cache.pending("default/a")
    assert info is not None
    cache.assume(info, "n", now=1.0)
    generation = cache.generation
    cache.forget(info)
    assert cache.pending("default/a") == info
    assert cache.node_states()[0].requested.cpu_millicores == 0
    assert cache.generation > generation  # freed resources: parked pods get another try


def test_terminal_and_deleted_pods_free_their_node() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    cache.upsert_node(node("n"))
    done = pod("done", requests={"cpu": "2"}, node_name="n")
    cache.upsert_pod(done)
    cache.upsert_pod(pod("other", requests={"cpu": "1"}, node_name="n"))
    assert cache.node_states()[0].requested.cpu_millicores == 3000
    cache.upsert_pod({**done, "status": {"phase": "Succeeded"}})
    assert cache.node_states()[0].requested.cpu_millicores == 1000
    cache.delete_pod(pod("other"))
    state = cache.node_states()[0]
    assert state.requested.cpu_millicores == 0 and state.pod_count == 0


def test_only_our_pods_wait_and_deleting_ones_do_not() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    assert cache.upsert_pod(pod("theirs", scheduler_name="default-scheduler")) is None
    leaving = pod("leaving")
    leaving["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert cache.upsert_pod(leaving) is None
    assert cache.pending_keys() == []


def test_cpu_requested_since_the_telemetry_sample() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    cache.upsert_node(node("n", cpu="8"))
    before = pod("before", requests={"cpu": "1"}, node_name="n")
    before["metadata"]["creationTimestamp"] = "1970-01-01T00:01:40Z"  # t = 100 s
    cache.upsert_pod(before)
    cache.upsert_pod(pod("new", requests={"cpu": "500m"}))
    info = cache.pending("default/new")
    assert info is not None
    cache.assume(info, "n", now=300.0)
    sample = NodeTelemetry(node="n", sample_time=200.0, watts=100.0, source="rapl", utilization=0.2)
    (state,) = cache.node_states(lambda name: sample)
    assert state.telemetry is sample
    assert state.cpu_since_sample_cores == 0.5  # only the pod placed after the sample
    assert state.nonzero_requested is not None
    assert state.nonzero_requested.memory_bytes == 2 * 200 * 1024 * 1024  # defaults, 2 pods


def test_replacing_the_pod_list_keeps_assumptions_and_drops_vanished_pods() -> None:
    cache = ClusterCache("kubejoule-scheduler")
    cache.upsert_node(node("n"))
    cache.upsert_pod(pod("bound", requests={"cpu": "1"}, node_name="n"))
    cache.upsert_pod(pod("mine", requests={"cpu": "1"}))
    info = cache.pending("default/mine")
    assert isinstance(info, PodInfo)
    cache.assume(info, "n", now=1.0)
    pending = cache.replace_pods([pod("mine", requests={"cpu": "1"}), pod("next")])
    assert pending == ["default/next"]
    assert cache.placement("default/bound") is None  # gone from the listing
    assert cache.placement("default/mine") == ("n", True)
    assert cache.node_states()[0].requested.cpu_millicores == 1000


def test_an_unreadable_object_is_skipped_not_fatal() -> None:
    """The API server validates what it stores, but one object the cache cannot read (a field
    of the wrong type) must not fail a whole listing: the scheduler would never sync."""
    cache = ClusterCache("kubejoule-scheduler")
    bad_node = node("broken")
    bad_node["status"]["allocatable"]["cpu"] = "lots"
    cache.replace_nodes([node("n"), bad_node])
    assert cache.node_names() == ["n"]
    bad_pod = pod("bad")
    bad_pod["spec"]["containers"] = "app"
    pending = cache.replace_pods([pod("good", requests={"cpu": "1"}), bad_pod])
    assert pending == ["default/good"]
    assert cache.upsert_pod(bad_pod) is None
    # A node that turns unreadable is dropped: nothing can be placed on what cannot be read.
    cache.upsert_node(node("m"))
    broken_m = node("m")
    broken_m["spec"]["taints"] = "NoSchedule"
    assert cache.upsert_node(broken_m) is True
    assert cache.node_names() == ["n"]
