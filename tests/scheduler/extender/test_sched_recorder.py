"""The extender's decision recording: a bounded queue and one thread; a response waits (a
bounded time) for its line to be written; a full queue drops (and counts) decisions instead of
making /prioritize wait."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from benchmarks.harness.sched_sources import FixedSource
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.decisionlog.logfile import DecisionLog, DecisionLogConfig, read_records
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources
from scheduler.extender.app import create_app
from scheduler.extender.calls import ExtenderCall, MemoryRecorder
from scheduler.extender.core import Extender
from scheduler.extender.recorder import ExtenderRecorder
from scheduler.framework.batch import CandidateBatch
from scheduler.plugins.defaults import served_profile
from scheduler.plugins.energy import EnergyPlugin, EnergyScores
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore

NOW = 1_700_000_000.0
CURVE = (50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 130.0, 140.0, 150.0)


SAMPLES = {n: NodeSample(NodeTelemetry(n, NOW - 1, 100.0, "rapl", 0.3, 8.0, CURVE)) for n in ("a", "b")}


class Gate:
    """A features function that blocks the recorder thread until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, pod: PodInfo, batch: CandidateBatch) -> list[dict[str, float | None]]:
        self.entered.set()
        assert self.release.wait(10), "the test never released the recorder"
        return [{"cpu_cores": 8.0}] * len(batch)



def one_score(score: float, delta_watts: float = float("nan")) -> EnergyScores:
    """The energy plugin's evaluation of one node (reason ok)."""
    return EnergyScores(np.array([score]), np.array([delta_watts]), np.zeros(1, dtype=np.int8))

def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def _metric(text: str, line_start: str) -> float:
    [line] = [line for line in text.splitlines() if line.startswith(line_start)]
    return float(line.rsplit(" ", 1)[1])


def test_a_busy_recorder_holds_up_prioritize_only_for_a_bounded_time(tmp_path: Path) -> None:
    store = TelemetryStore([FixedSource(SAMPLES)], clock=lambda: NOW)
    store.refresh_once()
    decision_log = DecisionLog(DecisionLogConfig(str(tmp_path / "d.jsonl")))
    gate = Gate()
    memory = MemoryRecorder(10)
    recorder = ExtenderRecorder(decision_log, EnergyPlugin(), also=memory, features=gate, queue_size=2,
                                write_wait_seconds=0.05)
    extender = Extender(served_profile(EnergyPlugin()), store, mode="active", recorder=recorder, clock=lambda: NOW)
    answers = []
    with TestClient(create_app(extender, manage_store=False)) as client:
        body = {"Pod": _pod("p0"), "NodeNames": ["a", "b"]}
        answers.append(client.post("/prioritize", json=body).json())
        assert gate.entered.wait(10)  # the thread holds p0 and waits
        for i in range(1, 5):  # p1, p2 fill the queue; p3, p4 find it full
            body = {"Pod": _pod(f"p{i}"), "NodeNames": ["a", "b"]}
            answers.append(client.post("/prioritize", json=body).json())
        # Every request was answered while the recorder was stuck (each waited at most its
        # 50 ms for its line), and the in-memory recorder (on the request path) saw them all.
        assert len(answers) == 5 and all(len(a) == 2 for a in answers)
        assert len(memory.decisions) == 5
        text = client.get("/metrics").text
        assert _metric(text, 'kubejoule_extender_recorded_decisions_total{result="dropped"}') == 2
        assert _metric(text, 'kubejoule_extender_recorded_decisions_total{result="recorded"}') == 0
        assert _metric(text, "kubejoule_extender_recorder_queue_length") == 2
        gate.release.set()
        assert recorder.drain(10)
        text = client.get("/metrics").text
        assert _metric(text, 'kubejoule_extender_recorded_decisions_total{result="recorded"}') == 3
        # All three were written after their response had been sent.
        assert _metric(text, 'kubejoule_extender_recorded_decisions_total{result="late"}') == 3
    recorder.close()
    decision_log.close()
    records, broken = read_records(tmp_path / "d.jsonl")
    assert broken == 0
    assert [r["pod"]["name"] for r in records] == ["p0", "p1", "p2"]
    assert all(r["candidates"][0]["features"] == {"cpu_cores": 8.0} for r in records)


def test_the_response_is_sent_after_its_line_is_written(tmp_path: Path) -> None:
    """A recorder slower than the request (but within its wait): the line is in the file by
    the time the client has the answer, without a flush or a close."""
    store = TelemetryStore([FixedSource(SAMPLES)], clock=lambda: NOW)
    store.refresh_once()
    path = tmp_path / "d.jsonl"
    decision_log = DecisionLog(DecisionLogConfig(str(path)))

    def slow(pod: PodInfo, batch: CandidateBatch) -> list[dict[str, float | None]]:
        threading.Event().wait(0.05)
        return [{"cpu_cores": 8.0}] * len(batch)

    recorder = ExtenderRecorder(decision_log, EnergyPlugin(), features=slow, write_wait_seconds=5.0)
    extender = Extender(served_profile(EnergyPlugin()), store, mode="shadow", recorder=recorder, clock=lambda: NOW)
    with TestClient(create_app(extender, manage_store=False)) as client:
        for i in range(3):
            response = client.post("/prioritize", json={"Pod": _pod(f"p{i}"), "NodeNames": ["a", "b"]})
            assert response.status_code == 200
            records, broken = read_records(path)
            assert [r["pod"]["name"] for r in records] == [f"p{k}" for k in range(i + 1)]
            assert broken == 0
    assert recorder.stats()["late"] == 0
    recorder.close()
    decision_log.close()


def test_close_records_what_is_queued_and_later_decisions_are_dropped(tmp_path: Path) -> None:
    decision_log = DecisionLog(DecisionLogConfig(str(tmp_path / "d.jsonl")))
    gate = Gate()
    recorder = ExtenderRecorder(decision_log, EnergyPlugin(), features=gate)
    pod = pod_info_from_k8s(_pod("p"))
    nodes = CandidateBatch.of([NodeState(NodeInfo("a", Resources(8000)))])
    scores = one_score(80.0, 4.0)

    def decision(wall: float) -> ExtenderCall:
        return ExtenderCall("prioritize", "shadow", wall, pod, ["a"], nodes, scores, "a")

    for wall in (1.0, 2.0, 3.0):
        recorder.record(decision(wall))
    gate.release.set()
    recorder.close()
    recorder.record(decision(4.0))  # after close: dropped, not an error
    decision_log.close()
    records, _ = read_records(tmp_path / "d.jsonl")
    assert [r["time"] for r in records] == [1.0, 2.0, 3.0]
    assert recorder.stats() == {"recorded": 3, "dropped": 1, "failed": 0, "late": 0, "queued": 0}


def test_a_failing_record_is_counted_and_the_thread_goes_on(tmp_path: Path) -> None:
    calls = []

    def features(pod: PodInfo, batch: CandidateBatch) -> list[dict[str, float | None]]:
        calls.append(batch.now)
        if len(calls) == 1:
            raise ValueError("a broken feature")
        return [{}] * len(batch)

    decision_log = DecisionLog(DecisionLogConfig(str(tmp_path / "d.jsonl")))
    recorder = ExtenderRecorder(decision_log, EnergyPlugin(), features=features)
    pod = pod_info_from_k8s(_pod("p"))
    nodes = CandidateBatch.of([NodeState(NodeInfo("a", Resources(8000)))])
    for wall in (1.0, 2.0):
        recorder.record(ExtenderCall("prioritize", "shadow", wall, pod, ["a"], nodes, one_score(80.0), "a"))
    recorder.close()
    decision_log.close()
    records, _ = read_records(tmp_path / "d.jsonl")
    assert [r["time"] for r in records] == [2.0]
    assert recorder.stats()["failed"] == 1
