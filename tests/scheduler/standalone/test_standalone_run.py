"""The standalone scheduler end to end: the real `kubernetes` client against kmock's emulator.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.harness.standalone_kmock import EmulatedCluster
from benchmarks.harness.standalone_objects import node, pod
from common.curves import PowerCurve
from scheduler.decisionlog.logfile import DecisionLog, DecisionLogConfig, read_records
from scheduler.decisionlog.outcomes import OutcomeTracker
from scheduler.domain.model import NodeTelemetry, PodInfo
from scheduler.plugins.energy import EnergyPlugin
from scheduler.standalone.binding import KubeClusterApi
from scheduler.standalone.loop import StandaloneScheduler
from scheduler.standalone.settings import (
    EVENT_RECOMMENDATION,
    MODE_ACTIVE,
    MODE_SHADOW,
    StandaloneConfig,
)
from tests.helpers.standalone_harness import (
    StaticTelemetry,
    api_client,
    placements,
    running,
    running_scheduler,
    wait_for,
)

NODES = 10
PODS = 50
# Linear curves, 10 W of slope apart: n0 is the most efficient. With a linear curve ΔP does not
# depend on load, so the energy-best node is the flattest one that still has room.
SLOPES_WATTS = {f"n{i}": 100.0 + 10.0 * i for i in range(NODES)}
IDLE_WATTS = 60.0


def _scorer() -> EnergyPlugin:
    curves = {n: PowerCurve.linear(IDLE_WATTS, IDLE_WATTS + s) for n, s in SLOPES_WATTS.items()}
    return EnergyPlugin(delta_p_ref_watts=100.0, curves=curves)


def _telemetry() -> StaticTelemetry:
    now = time.time()
    return StaticTelemetry(
        {
            n: NodeTelemetry(
                node=n, sample_time=now, watts=IDLE_WATTS, source="rapl", utilization=0.0, cores=4.0
            )
            for n in SLOPES_WATTS
        }
    )


def _populate(cluster: EmulatedCluster) -> None:
    for name in SLOPES_WATTS:
        cluster.create_node(node(name, cpu="4", memory="16Gi"))
    for i in range(PODS):
        cluster.create_pod(pod(f"p{i:02d}", requests={"cpu": "500m", "memory": "512Mi"}))


def _all_bound(cluster: EmulatedCluster) -> dict[str, str | None] | None:
    placed = placements(cluster.list_pods())
    return placed if len(placed) == PODS and all(placed.values()) else None


@pytest.mark.parametrize("mode", [MODE_ACTIVE, MODE_SHADOW])
def test_fifty_pods_on_ten_nodes(mode: str, tmp_path: Path) -> None:
    decision_log = DecisionLog(DecisionLogConfig(str(tmp_path / "decisions.jsonl")))
    config = StandaloneConfig(mode=mode, seed=1, initial_backoff_seconds=0.1)
    with EmulatedCluster() as cluster:
        _populate(cluster)
        with running_scheduler(cluster.url, _scorer(), config, _telemetry(), decision_log) as sched:
            placed = wait_for(lambda: _all_bound(cluster), what="all pods bound")
            sched.drain()
            pods = cluster.list_pods()
            bindings = cluster.bindings()
            events = cluster.list_events()
    per_node = Counter(placed.values())
    assert all(b.accepted for b in bindings) and len(bindings) == PODS  # each bound once

    if mode == MODE_ACTIVE:
        # Greedy by efficiency: 8 pods of 0.5 CPU fill a 4-CPU node, so n0…n5 are full and
        # n6 takes the last 2; the steeper nodes stay empty.
        assert per_node == Counter({f"n{i}": 8 for i in range(6)} | {"n6": 2})
        assert not [e for e in events if e["reason"] == EVENT_RECOMMENDATION]
    else:
        # The default scoring spreads identical pods evenly over identical nodes …
        assert per_node == Counter({f"n{i}": 5 for i in range(NODES)})
        # … while every pod gets the energy recommendation, n0 (never full in shadow mode), in
        # an Event: the pods themselves are never patched.
        recommended = [e for e in events if e["reason"] == EVENT_RECOMMENDATION]
        assert {e["involvedObject"]["name"] for e in recommended} == {p["metadata"]["name"] for p in pods}
        for event in recommended:
            assert event["type"] == "Normal" and len(event["message"]) <= 1024
            pick, _, scores_text = event["message"].removeprefix("energy recommendation: ").partition("; scores: ")
            scores = json.loads(scores_text)
            assert pick == "n0" and len(scores) == NODES and max(scores, key=scores.get) == "n0"
        assert all(not (p["metadata"].get("annotations") or {}) for p in pods)

    decisions = [
        r for r in read_records(tmp_path / "decisions.jsonl")[0] if r["type"] == "decision"
    ]
    assert len(decisions) == PODS
    for record in decisions:
        assert record["mode"] == mode
        assert record["chosen"] == placed[record["pod"]["name"]]
        best = max(c["score"] for c in record["candidates"])
        recommended = next(c for c in record["candidates"] if c["node"] == record["recommended"])
        assert recommended["score"] == best
        expected = record["recommended"] if mode == MODE_ACTIVE else record["default_choice"]
        assert record["chosen"] == expected
    scheduled = [e for e in events if e["reason"] == "Scheduled"]
    assert len(scheduled) == PODS
    assert {e["involvedObject"]["name"] for e in scheduled} == set(placed)
    assert all(
        e["message"] == f"Successfully assigned default/{e['involvedObject']['name']} to "
        f"{placed[e['involvedObject']['name']]}"
        for e in scheduled
    )


def test_pod_that_fits_nowhere_waits_then_lands_on_a_new_node() -> None:
    config = StandaloneConfig(
        mode=MODE_ACTIVE, seed=1, initial_backoff_seconds=0.05, unschedulable_retry_seconds=300
    )
    with EmulatedCluster() as cluster:
        cluster.create_node(node("small-a", cpu="1"))
        cluster.create_node(node("small-b", cpu="1"))
        cluster.create_node(
            node("tainted", cpu="8", taints=[{"key": "gpu", "effect": "NoSchedule"}])
        )
        cluster.create_pod(pod("big", requests={"cpu": "2"}))
        with running_scheduler(cluster.url, _scorer(), config, StaticTelemetry()) as sched:
            expected = (
                "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: }, "
                "2 Insufficient cpu."
            )

            def condition() -> dict | None:
                conditions = cluster.get_pod("default", "big")["status"].get("conditions") or []
                return next((c for c in conditions if c["type"] == "PodScheduled"), None)

            found = wait_for(condition, what="PodScheduled condition")
            assert found["status"] == "False" and found["reason"] == "Unschedulable"
            assert found["message"] == expected
            failed = wait_for(
                lambda: [e for e in cluster.list_events() if e["reason"] == "FailedScheduling"],
                what="FailedScheduling event",
            )
            assert failed[0]["type"] == "Warning" and failed[0]["message"] == expected
            assert failed[0]["involvedObject"]["name"] == "big"
            time.sleep(0.5)  # parked, not spinning: no retry without a change
            assert sched.queue.where("default/big") == "unschedulable"
            attempts = sched.metrics.value(
                "kubejoule_scheduler_schedule_attempts_total", {"result": "unschedulable"}
            )
            assert attempts == 1.0
            assert (
                sched.metrics.value("kubejoule_scheduler_pending_pods", {"queue": "unschedulable"})
                == 1
            )

            cluster.create_node(node("big-node", cpu="4"))
            bound = wait_for(
                lambda: cluster.get_pod("default", "big")["spec"].get("nodeName"), what="binding"
            )
            assert bound == "big-node"
            assert len(sched.queue) == 0
    assert [b.node for b in cluster.bindings()] == ["big-node"]


def test_binding_errors_back_off_and_retry_until_bound() -> None:
    config = StandaloneConfig(mode=MODE_ACTIVE, seed=1, initial_backoff_seconds=0.05)
    with EmulatedCluster() as cluster:
        cluster.create_node(node("n0"))
        cluster.fail_next_bindings(2)
        cluster.create_pod(pod("p", requests={"cpu": "1"}))
        with running_scheduler(cluster.url, _scorer(), config, StaticTelemetry()) as sched:
            wait_for(lambda: cluster.get_pod("default", "p")["spec"].get("nodeName"), what="bound")
            sched.drain()
            errors = sched.metrics.value(
                "kubejoule_scheduler_binding_errors_total", {"kind": "api"}
            )
            scheduled = sched.metrics.value(
                "kubejoule_scheduler_schedule_attempts_total", {"result": "scheduled"}
            )
            e2e = sched.metrics.value("kubejoule_scheduler_e2e_scheduling_duration_seconds_count")
    assert [b.accepted for b in cluster.bindings()] == [False, False, True]
    assert errors == 2.0 and scheduled == 1.0 and e2e == 1.0


def test_pods_of_other_schedulers_and_bound_pods_are_left_alone_but_counted() -> None:
    config = StandaloneConfig(mode=MODE_ACTIVE, seed=1)
    with EmulatedCluster() as cluster:
        cluster.create_node(node("n0", cpu="4"))
        cluster.create_node(node("n1", cpu="2"))
        cluster.create_pod(pod("theirs", requests={"cpu": "1"}, scheduler_name="default-scheduler"))
        cluster.create_pod(pod("running", requests={"cpu": "3500m"}, node_name="n0"))
        cluster.create_pod(pod("mine", requests={"cpu": "1"}))
        with running_scheduler(cluster.url, _scorer(), config, StaticTelemetry()):
            wait_for(lambda: cluster.get_pod("default", "mine")["spec"].get("nodeName"), what="bound")
        theirs = cluster.get_pod("default", "theirs")
    # Were the running pod ignored, the bigger n0 would win the default scoring; it has only
    # 0.5 CPU left, so the pod goes to n1. The other scheduler's pod is not touched.
    assert cluster_bindings_summary(cluster) == {"mine": "n1"}
    assert "nodeName" not in theirs["spec"]


def cluster_bindings_summary(cluster: EmulatedCluster) -> dict[str, str]:
    return {b.pod: b.node for b in cluster.bindings() if b.accepted}


def test_a_parked_pod_lands_when_a_bound_pod_leaves() -> None:
    """Unschedulable is re-tried on any cluster change, not only on a new node: here a
    running pod is deleted and frees the CPU the waiting pod needs."""
    config = StandaloneConfig(
        mode=MODE_ACTIVE, seed=1, initial_backoff_seconds=0.05, unschedulable_retry_seconds=300
    )
    with EmulatedCluster() as cluster:
        cluster.create_node(node("n0", cpu="2"))
        cluster.create_pod(pod("running", requests={"cpu": "1500m"}, node_name="n0"))
        cluster.create_pod(pod("waiting", requests={"cpu": "1"}))
        with running_scheduler(cluster.url, _scorer(), config, StaticTelemetry()) as sched:
            wait_for(lambda: sched.queue.where("default/waiting") == "unschedulable", what="parked")
            cluster.call("DELETE", "/api/v1/namespaces/default/pods/running")
            wait_for(
                lambda: cluster.get_pod("default", "waiting")["spec"].get("nodeName"), what="bound"
            )
    assert cluster_bindings_summary(cluster) == {"waiting": "n0"}


class RacingApi(KubeClusterApi):
    """The real API, with `before_bind(pod)` run once just before the scheduler's first binding:
    what another actor does between the decision and the binding."""

    def __init__(self, url: str, before_bind: Callable[[str], None]) -> None:
        super().__init__(api_client(url), timeout_seconds=5.0, watch_timeout_seconds=60)
        self._before_bind: Callable[[str], None] | None = before_bind

    def bind(self, pod: PodInfo, node: str) -> None:
        action, self._before_bind = self._before_bind, None
        if action is not None:
            action(pod.name)
        super().bind(pod, node)


def _race(cluster: EmulatedCluster, before_bind: Callable[[str], None]) -> StandaloneScheduler:
    """One node, one pod, and a scheduler whose first binding is raced by `before_bind`."""
    cluster.create_node(node("n0"))
    cluster.create_node(node("other"))
    cluster.create_pod(pod("p", requests={"cpu": "1"}, uid=None))
    config = StandaloneConfig(mode=MODE_ACTIVE, seed=1, initial_backoff_seconds=0.05)
    # n0: ΔP 12.5 W → 87.5, over the neutral 50 of "other" (no telemetry): the energy pick.
    scorer = EnergyPlugin(delta_p_ref_watts=100.0, curves={"n0": PowerCurve.linear(50, 100)})
    telemetry = StaticTelemetry(
        {"n0": NodeTelemetry("n0", time.time(), 60.0, "rapl", 0.1, 4.0)}
    )
    return StandaloneScheduler(RacingApi(cluster.url, before_bind), scorer, config, telemetry)


def _binding_errors(sched: StandaloneScheduler, kind: str) -> float | None:
    return sched.metrics.value("kubejoule_scheduler_binding_errors_total", {"kind": kind})


def test_a_pod_bound_by_someone_else_meanwhile_is_left_there() -> None:
    with EmulatedCluster() as cluster:
        def bind_elsewhere(name: str) -> None:
            cluster.call("POST", f"/api/v1/namespaces/default/pods/{name}/binding", {
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "other"},
            })

        sched = _race(cluster, bind_elsewhere)
        with running(sched):
            wait_for(lambda: _binding_errors(sched, "conflict"), what="the conflict")
            wait_for(lambda: len(sched.queue) == 0, what="the pod leaves the queue")
            sched.drain()
            assert sched.cache.placement("default/p") == ("other", False)
        bindings = cluster.bindings()
        assert cluster.get_pod("default", "p")["spec"]["nodeName"] == "other"
    # Ours was refused (409) and, the API showing the pod bound, never tried again.
    assert [(b.node, b.accepted) for b in bindings] == [("other", True), ("n0", False)]


def test_a_pod_deleted_meanwhile_is_dropped_from_the_queue() -> None:
    with EmulatedCluster() as cluster:
        sched = _race(
            cluster, lambda name: cluster.call("DELETE", f"/api/v1/namespaces/default/pods/{name}")
        )
        with running(sched):
            wait_for(lambda: _binding_errors(sched, "not_found"), what="the 404")
            wait_for(lambda: len(sched.queue) == 0, what="the pod leaves the queue")
            sched.drain()
            assert sched.cache.pending("default/p") is None
            assert sched.cache.placement("default/p") is None
        assert cluster.bindings() == []  # the emulator answers 404 before recording an attempt


def test_a_pod_recreated_meanwhile_is_scheduled_under_its_new_uid() -> None:
    """The binding carries the old pod's uid: refused (409). The pod of the same name that now
    exists is waiting, so it is backed off and scheduled — never dropped."""
    with EmulatedCluster() as cluster:
        def recreate(name: str) -> None:
            cluster.call("DELETE", f"/api/v1/namespaces/default/pods/{name}")
            cluster.create_pod(pod(name, requests={"cpu": "1"}, uid="uid-second"))

        sched = _race(cluster, recreate)
        with running(sched):
            # (A list, not a GET: between the delete and the create the pod does not exist.)
            bound = wait_for(lambda: placements(cluster.list_pods()).get("p"), what="bound")
            sched.drain()
            conflicts = _binding_errors(sched, "conflict")
        bindings = cluster.bindings()
        assert cluster.get_pod("default", "p")["metadata"]["uid"] == "uid-second"
    assert bound == "n0"
    # One binding accepted, the new pod's; the old pod's refused (its uid no longer exists) — sent
    # before or after the new pod's, and once more if the backoff ends before the watch delivers
    # the new pod (CI saw that under load). Every refusal is counted as a conflict.
    refused = [b for b in bindings if not b.accepted]
    assert [b.node for b in bindings if b.accepted] == ["n0"]
    assert 1 <= len(refused) <= 2 and {b.node for b in refused} == {"n0"}
    assert conflicts == float(len(refused))


def test_a_placement_gets_its_measured_outcome_line(tmp_path: Path) -> None:
    """Decision line when the pod is bound; once the node has a sample a window later, the
    outcome line with the power before and after — measured, both from RAPL."""
    path = tmp_path / "decisions.jsonl"
    decision_log = DecisionLog(DecisionLogConfig(str(path), batch_records=1))
    window = 0.3
    outcomes = OutcomeTracker(decision_log, window_seconds=window)
    decided_at = time.time()
    telemetry = StaticTelemetry({"n0": NodeTelemetry("n0", decided_at, 80.0, "rapl", 0.1, 4.0)})
    config = StandaloneConfig(mode=MODE_ACTIVE, seed=1)
    with EmulatedCluster() as cluster:
        cluster.create_node(node("n0"))
        cluster.create_pod(pod("p", requests={"cpu": "1"}))
        with running_scheduler(
            cluster.url, _scorer(), config, telemetry, decision_log, outcomes=outcomes
        ) as sched:
            wait_for(lambda: cluster.get_pod("default", "p")["spec"].get("nodeName"), what="bound")
            sched.drain()
            assert len(outcomes) == 1
            # The agent's next sample, after the window: 95 W.
            telemetry.samples = {
                "n0": NodeTelemetry("n0", decided_at + window + 5.0, 95.0, "rapl", 0.35, 4.0)
            }
            wait_for(lambda: len(outcomes) == 0, what="the outcome written")
    records = read_records(path)[0]
    [decision] = [r for r in records if r["type"] == "decision"]
    [outcome] = [r for r in records if r["type"] == "outcome"]
    assert outcome["id"] == decision["id"] and outcome["node"] == decision["chosen"] == "n0"
    assert (outcome["watts_before"], outcome["watts_after"]) == (80.0, 95.0)
    assert outcome["sample_time_after"] == decided_at + window + 5.0
    assert outcome["measured"] is True and outcome["window_seconds"] == window


def test_a_node_deleted_between_decision_and_binding_is_not_bound_to() -> None:
    """The API server accepts a Binding to a node that does not exist (measured on kube-apiserver
    1.36, tests/e2e/test_e2e_standalone.py): a node gone from the cache since the decision is
    not bound to; the pod is decided again and lands on a node that exists."""
    with EmulatedCluster() as cluster:
        sched = _race(cluster, lambda name: None)
        deleted: list[str] = []

        def leader_while_n0_goes() -> bool:  # the binder calls it after the decision, before binding
            binder = threading.current_thread().name.startswith("scheduler-bind")
            if binder and not deleted and sched.cache.placement("default/p") == ("n0", True):
                deleted.append("n0")
                cluster.call("DELETE", "/api/v1/nodes/n0")
                wait_for(lambda: "n0" not in sched.cache.node_names(), what="the node's deletion seen")
            return True

        sched.is_leader = leader_while_n0_goes
        with running(sched):
            bound = wait_for(lambda: placements(cluster.list_pods()).get("p"), what="bound")
            sched.drain()
            assert _binding_errors(sched, "node_gone") == 1.0
        assert deleted == ["n0"] and bound == "other"
        assert [(b.node, b.accepted) for b in cluster.bindings()] == [("other", True)]
