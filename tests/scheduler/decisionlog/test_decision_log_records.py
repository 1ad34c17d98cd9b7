"""The decision log's records: the candidates kept, outcomes, the lines the extender and the
standalone scheduler write and when.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness.standalone_objects import pod
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.decisionlog.logfile import (
    DecisionLog,
    DecisionLogConfig,
    read_records,
)
from scheduler.decisionlog.outcomes import OutcomeTracker
from scheduler.decisionlog.schema import CandidateRecord
from scheduler.domain.model import NodeTelemetry, PodInfo


def test_decision_record_keeps_the_best_candidates_and_the_chosen_ones(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    decision_log = DecisionLog(DecisionLogConfig(str(path), max_candidates=3))
    info = pod_info_from_k8s(pod("web", requests={"cpu": "250m", "memory": "1Gi"}))
    candidates = [
        CandidateRecord(f"n{i}", score=float(i), delta_watts=10.0 - i, default_score=100 + i)
        for i in range(10)
    ]
    decision_id = decision_log.record_decision(
        source="standalone",
        mode="shadow",
        pod=info,
        candidates=candidates,
        chosen="n0",
        recommended="n9",
        default_choice="n0",
        scorer="heuristic",
        wall_time=5.0,
    )
    decision_log.close()
    (record,) = read_records(path)[0]
    assert record["id"] == decision_id and record["schema"] == "kubejoule.decision/v1"
    assert record["pod"] == {
        "namespace": "default",
        "name": "web",
        "uid": "uid-web",
        "cpu_request_cores": 0.25,
        "memory_request_gib": 1.0,
    }
    assert [c["node"] for c in record["candidates"]] == ["n9", "n8", "n7", "n0"]
    assert record["candidate_count"] == 10
    assert record["candidates"][0]["default_score"] == 109


def _t(node: str, at: float, watts: float | None, source: str) -> NodeTelemetry:
    return NodeTelemetry(node=node, sample_time=at, watts=watts, source=source, utilization=0.5)


def test_outcomes_are_measured_only_with_rapl_on_both_sides(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    decision_log = DecisionLog(DecisionLogConfig(str(path)))
    tracker = OutcomeTracker(decision_log, window_seconds=60.0, give_up_after_seconds=30.0)
    samples = {
        "rapl": _t("rapl", 170.0, 140.0, "rapl"),
        "est": _t("est", 170.0, 90.0, "estimated"),
        "late": _t("late", 100.0, 80.0, "rapl"),  # no sample after the window: gives up
    }
    tracker.track("d1", "rapl", 100.0, _t("rapl", 99.0, 120.0, "rapl"))
    tracker.track("d2", "est", 100.0, _t("est", 99.0, 80.0, "estimated"))
    tracker.track("d3", "late", 100.0, _t("late", 99.0, 75.0, "rapl"))
    assert tracker.poll(159.0, samples.get) == 0  # window not over
    assert tracker.poll(175.0, samples.get) == 2
    assert tracker.poll(200.0, samples.get) == 1  # 160 + 30: given up
    decision_log.close()
    outcomes = {r["id"]: r for r in read_records(path)[0]}
    assert outcomes["d1"]["measured"] is True
    assert (outcomes["d1"]["watts_before"], outcomes["d1"]["watts_after"]) == (120.0, 140.0)
    assert outcomes["d2"]["measured"] is False and outcomes["d2"]["source_after"] == "estimated"
    assert outcomes["d3"]["measured"] is False and outcomes["d3"]["watts_after"] is None
    assert len(tracker) == 0


def test_extender_calls_become_decision_log_lines(tmp_path: Path) -> None:
    import numpy as np

    from scheduler.domain.model import REASONS, NodeInfo, NodeState, Resources
    from scheduler.extender.calls import ExtenderCall, MemoryRecorder
    from scheduler.extender.recorder import ExtenderRecorder
    from scheduler.framework.batch import CandidateBatch
    from scheduler.plugins.energy import EnergyPlugin, EnergyScores

    path = tmp_path / "d.jsonl"
    decision_log = DecisionLog(DecisionLogConfig(str(path)))
    memory = MemoryRecorder(10)
    recorder = ExtenderRecorder(decision_log, EnergyPlugin(), also=memory)
    info = pod_info_from_k8s(pod("api", requests={"cpu": "1"}))
    nodes = [
        NodeState(
            NodeInfo(f"n{i}", Resources(4000, 2**33, 110)),
            telemetry=_t(f"n{i}", 90.0, 100.0, "rapl"),
        )
        for i in range(3)
    ]
    scores = EnergyScores(
        score=np.array([40.0, 90.0, 50.0]),
        delta_watts=np.array([12.0, 2.0, np.nan]),
        reason=np.array([0, 0, REASONS.index("stale")], dtype=np.int8),
    )
    recorder.record(
        ExtenderCall(
            verb="prioritize",
            mode="shadow",
            wall_time=100.0,
            pod=info,
            names=[n.info.name for n in nodes],
            candidates=CandidateBatch.of(nodes, 100.0),
            scores=scores,
            recommended="n1",
        )
    )
    recorder.record(
        ExtenderCall(
            verb="filter",
            mode="shadow",
            wall_time=101.0,
            pod=info,
            names=[n.info.name for n in nodes],
            candidates=CandidateBatch.of(nodes, 101.0),
            scores=None,
            recommended=None,
        )
    )
    recorder.close()  # records what is queued (the work happens off the request path)
    decision_log.close()
    (record,) = read_records(path)[0]
    assert record["source"] == "extender" and record["mode"] == "shadow"
    assert record["chosen"] is None and record["recommended"] == "n1"
    assert [c["node"] for c in record["candidates"]] == ["n1", "n2", "n0"]
    assert record["candidates"][0]["telemetry_age_seconds"] == 10.0
    assert record["candidates"][1]["reason"] == "stale"
    assert len(memory.decisions) == 2 and recorder.errors == 0


def _scheduled_with_log(tmp_path: Path, decision_log: DecisionLog, before_bind: Any = None,
                        failures: int = 0) -> tuple[list[dict], str | None]:
    """One pod scheduled by the standalone scheduler against kmock's emulator; `before_bind`
    runs as each binding is sent; `failures` bindings are refused first (a 500)."""
    from benchmarks.harness.standalone_kmock import EmulatedCluster
    from benchmarks.harness.standalone_objects import node
    from scheduler.plugins.energy import EnergyPlugin
    from scheduler.standalone.settings import MODE_ACTIVE, StandaloneConfig
    from tests.helpers.standalone_harness import make_scheduler, running, wait_for

    with EmulatedCluster() as cluster:
        cluster.create_node(node("n0"))
        cluster.fail_next_bindings(failures)
        cluster.create_pod(pod("p", requests={"cpu": "100m"}))
        scheduler = make_scheduler(
            cluster.url, EnergyPlugin(), StandaloneConfig(mode=MODE_ACTIVE, seed=1, initial_backoff_seconds=0.05),
            decision_log=decision_log, outcomes=OutcomeTracker(decision_log, 60.0),
        )
        if before_bind is not None:
            bind = scheduler.api.bind

            def checked(pod_info: PodInfo, node_name: str) -> None:
                before_bind()
                bind(pod_info, node_name)

            scheduler.api.bind = checked  # type: ignore[method-assign,assignment]
        with running(scheduler):
            bound = wait_for(lambda: cluster.get_pod("default", "p")["spec"].get("nodeName"), what="bound")
            scheduler.drain()
            tracked = len(scheduler.outcomes) if scheduler.outcomes is not None else 0
    decision_log.close()
    assert tracked == 1  # the outcome of the binding that took effect, only
    return read_records(decision_log.path)[0], bound


def test_the_decision_line_is_in_the_file_before_the_binding_is_sent(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    seen: list[list[str]] = []
    # No fsync for a minute: what the binding sees is what write(2) put in the file.
    decision_log = DecisionLog(DecisionLogConfig(str(path), flush_interval_seconds=60.0, batch_records=10**6))
    records, bound = _scheduled_with_log(
        tmp_path, decision_log, lambda: seen.append([r["type"] for r in read_records(path)[0]])
    )
    assert bound == "n0" and seen == [["decision"]]
    [decision] = records
    assert (decision["pod"]["name"], decision["chosen"]) == ("p", "n0")


def test_a_failed_binding_is_followed_by_an_abandoned_line(tmp_path: Path) -> None:
    decision_log = DecisionLog(DecisionLogConfig(str(tmp_path / "d.jsonl")))
    records, bound = _scheduled_with_log(tmp_path, decision_log, failures=1)
    assert bound == "n0"
    first, abandoned, second = records  # the refused attempt, then the retry
    assert [r["type"] for r in records] == ["decision", "abandoned", "decision"]
    assert abandoned["id"] == first["id"] != second["id"]
    assert "binding failed" in abandoned["reason"]


def test_a_log_that_cannot_be_written_does_not_stop_scheduling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decision_log = DecisionLog(DecisionLogConfig(str(tmp_path / "d.jsonl")))

    def full(record: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(decision_log, "write", full)
    from benchmarks.harness.standalone_kmock import EmulatedCluster
    from benchmarks.harness.standalone_objects import node
    from scheduler.plugins.energy import EnergyPlugin
    from scheduler.standalone.settings import MODE_ACTIVE, StandaloneConfig
    from tests.helpers.standalone_harness import make_scheduler, running, wait_for

    with EmulatedCluster() as cluster:
        cluster.create_node(node("n0"))
        cluster.create_pod(pod("p", requests={"cpu": "100m"}))
        scheduler = make_scheduler(cluster.url, EnergyPlugin(), StandaloneConfig(mode=MODE_ACTIVE, seed=1),
                                   decision_log=decision_log)
        with running(scheduler):
            assert wait_for(lambda: cluster.get_pod("default", "p")["spec"].get("nodeName"), what="bound") == "n0"
    decision_log.close()


def test_kept_candidates_are_the_best_plus_the_named_ones_best_first():
    """One choice of a decision line's candidates for the standalone scheduler, the extender and
    the simulator: the `limit` best (ties by node name), plus the chosen/recommended/default
    nodes wherever they rank, sorted best first; names not among the candidates are ignored."""
    import numpy as np

    from scheduler.decisionlog.schema import candidate_record, kept_candidates

    names = ["d", "c", "b", "a", "e"]
    score = np.array([10.0, 90.0, 50.0, 50.0, 5.0])
    assert kept_candidates(score, names, 2, ()) == [1, 3]  # c (90), then a before b (tie at 50)
    assert kept_candidates(score, names, 2, ("e", None, "c", "zz")) == [1, 3, 4]
    assert kept_candidates(score, names, 0, ("d",)) == [0]
    record = candidate_record("n", np.float64(42.0), float("nan"), "stale", telemetry_age_seconds=float("nan"))
    assert record.to_json() == {
        "node": "n",
        "score": 42.0,
        "delta_watts": None,
        "reason": "stale",
        "default_score": None,
        "telemetry_age_seconds": None,
        "features": None,
    }
