"""The extender's HTTP API with real-shaped kube-scheduler payloads (extender v1 JSON): the
answers, the recorder, health and metrics (bad input: test_sched_extender_input.py; a cluster
view: test_sched_extender_cluster.py)."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest
from fastapi.testclient import TestClient

from scheduler.extender.app import create_app
from scheduler.extender.calls import ExtenderCall, MemoryRecorder
from scheduler.extender.core import Extender
from scheduler.framework.interface import extender_priority
from tests.helpers.sched_extender import (
    POD,
    Recorder,
    make_extender,
    node_object,
)

NAMES = ["hungry", "frugal", "stale", "nocurve", "unknown"]
EXPECTED = {"hungry": 2, "frugal": 6, "stale": 6, "nocurve": 0, "unknown": 0}


def test_prioritize_nodes_items_form(active: tuple[Extender, TestClient]) -> None:
    extender, client = active
    body = {"Pod": POD, "Nodes": {"kind": "NodeList", "apiVersion": "v1", "metadata": {},
                                  "items": [node_object(n) for n in NAMES]}}
    response = client.post("/prioritize", json=body)
    assert response.status_code == 200
    assert response.json() == [{"Host": n, "Score": EXPECTED[n]} for n in NAMES]


def test_prioritize_node_names_form_uses_known_cores(active: tuple[Extender, TestClient]) -> None:
    extender, client = active
    # No cores anywhere yet (telemetry has none, no Node seen): nothing can be priced, and
    # unpriced nodes get the floor (never more than a measured one).
    response = client.post("/prioritize", json={"Pod": POD, "NodeNames": NAMES, "Nodes": None})
    assert response.json() == [{"Host": n, "Score": 0} for n in NAMES]
    # Once kube-scheduler has sent the Node objects, the NodeNames form scores too.
    client.post("/prioritize", json={"Pod": POD, "Nodes": {"items": [node_object(n) for n in NAMES]}})
    response = client.post("/prioritize", json={"Pod": POD, "NodeNames": NAMES})
    assert response.json() == [{"Host": n, "Score": EXPECTED[n]} for n in NAMES]


@pytest.mark.parametrize("form", ["Nodes.items", "NodeNames"])
def test_shadow_answers_neutral_and_records_the_recommendation(form: str) -> None:
    recorder = Recorder()
    extender = make_extender("shadow", recorder=recorder)
    with TestClient(create_app(extender, manage_store=False)) as client:
        items = {"Pod": POD, "Nodes": {"items": [node_object(n) for n in NAMES]}}
        response = client.post("/prioritize", json=items)  # (teaches the NodeNames form the cores)
        if form == "NodeNames":
            response = client.post("/prioritize", json={"Pod": POD, "NodeNames": NAMES})
    assert response.json() == [{"Host": n, "Score": 5} for n in NAMES]
    decision = recorder.decisions[-1]
    assert decision.mode == "shadow" and decision.verb == "prioritize"
    assert decision.recommended == "frugal"
    assert decision.pod.key == "shop/checkout-6c9f7b5d4-x2x7q"
    assert dict(zip(decision.names, decision.scores.reasons(), strict=True)) == {
        "hungry": "ok", "frugal": "ok", "stale": "stale", "nocurve": "no_curve", "unknown": "missing"
    }


def test_filter_drops_only_nodes_over_their_cap(active: tuple[Extender, TestClient]) -> None:
    extender = make_extender("active", caps={"hungry": 180.0, "frugal": 500.0, "stale": 1.0, "nocurve": 1.0})
    items = [node_object(n) for n in NAMES]
    with TestClient(create_app(extender, manage_store=False)) as client:
        by_items = client.post("/filter", json={"Pod": POD, "Nodes": {"items": copy.deepcopy(items)}}).json()
        by_names = client.post("/filter", json={"Pod": POD, "NodeNames": NAMES}).json()
    # hungry: 150 W measured + 40 W = 190 W > 180 W. stale/nocurve: unknown → never filtered.
    assert set(by_items["FailedNodes"]) == {"hungry"}
    assert "190 W" in by_items["FailedNodes"]["hungry"] and "180 W" in by_items["FailedNodes"]["hungry"]
    assert by_items["NodeNames"] is None
    assert by_items["Nodes"]["items"] == [i for i in items if i["metadata"]["name"] != "hungry"]
    assert by_items["Error"] == "" and by_items["FailedAndUnresolvableNodes"] == {}
    assert by_names["Nodes"] is None
    assert by_names["NodeNames"] == ["frugal", "stale", "nocurve", "unknown"]


def test_filter_in_shadow_keeps_every_node_but_records() -> None:
    recorder = Recorder()
    extender = make_extender("shadow", caps={"hungry": 180.0}, recorder=recorder)
    with TestClient(create_app(extender, manage_store=False)) as client:
        client.post("/prioritize", json={"Pod": POD, "Nodes": {"items": [node_object(n) for n in NAMES]}})
        result = client.post("/filter", json={"Pod": POD, "NodeNames": NAMES}).json()
    assert result["NodeNames"] == NAMES and result["FailedNodes"] == {}
    assert set(recorder.decisions[-1].failed) == {"hungry"}


def test_scores_do_not_depend_on_the_other_candidates(active: tuple[Extender, TestClient]) -> None:
    """Over HTTP, in both forms: a node's answer is the same whatever else is offered."""
    _, client = active
    everyone = {n: EXPECTED[n] for n in NAMES}
    # The NodeNames form knows each node's cores once kube-scheduler has sent the Node objects.
    client.post("/prioritize", json={"Pod": POD, "Nodes": {"items": [node_object(n) for n in NAMES]}})
    rng = random.Random(3)
    for _ in range(6):
        subset = rng.sample(NAMES, rng.randint(1, len(NAMES)))
        by_names = client.post("/prioritize", json={"Pod": POD, "NodeNames": subset}).json()
        items = {"items": [node_object(n) for n in subset]}
        by_items = client.post("/prioritize", json={"Pod": POD, "Nodes": items}).json()
        expected = [{"Host": n, "Score": everyone[n]} for n in subset]
        assert by_names == expected and by_items == expected


def test_body_size_is_capped() -> None:
    extender = make_extender(max_body_bytes=2048)
    with TestClient(create_app(extender, manage_store=False)) as client:
        big = json.dumps({"Pod": POD, "NodeNames": [f"node-{i}" for i in range(500)]}).encode()
        declared = client.post("/prioritize", content=big)
        chunked = client.post("/prioritize", content=iter([big[:1500], big[1500:]]))  # no length
        small = client.post("/prioritize", json={"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["a"]})
    assert declared.status_code == 413 and "limit" in declared.json()["Error"]
    assert chunked.status_code == 413
    assert small.status_code == 200


def test_wrong_method(active: tuple[Extender, TestClient]) -> None:
    _, client = active
    assert client.get("/prioritize").status_code == 405


def test_a_failing_recorder_does_not_fail_the_request() -> None:
    class Broken:
        def record(self, decision: ExtenderCall) -> None:
            raise OSError("disk full")

    extender = make_extender(recorder=Broken())
    with TestClient(create_app(extender, manage_store=False)) as client:
        response = client.post("/prioritize", json={"Pod": POD, "NodeNames": ["hungry"]})
    assert response.status_code == 200


def test_health_readiness_and_metrics() -> None:
    extender = make_extender(refresh=False)
    with TestClient(create_app(extender, manage_store=False)) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 503
        extender.store.refresh_once()
        assert client.get("/readyz").status_code == 200
        client.post("/prioritize", json={"Pod": POD, "Nodes": {"items": [node_object(n) for n in NAMES]}})
        client.post("/prioritize", content=b"{")
        text = client.get("/metrics").text
    assert 'kubejoule_extender_requests_total{code="200",verb="prioritize"} 1.0' in text
    assert 'kubejoule_extender_requests_total{code="400",verb="prioritize"} 1.0' in text
    assert 'kubejoule_extender_request_duration_seconds_count{verb="prioritize"} 2.0' in text
    assert 'kubejoule_scheduler_fallbacks_total{reason="stale"} 1.0' in text
    assert 'kubejoule_scheduler_fallbacks_total{reason="missing"} 1.0' in text
    assert 'kubejoule_scheduler_telemetry_age_seconds{node="stale"} 300.0' in text
    assert 'kubejoule_scheduler_recommendations_total{mode="active"} 1.0' in text


def test_score_mapping() -> None:
    scores = np.array([0, 4.9, 5, 25, 50, 94.9, 95, 100, 150, -3])
    assert extender_priority(scores).tolist() == [0, 0, 1, 3, 5, 9, 10, 10, 10, 0]


def test_memory_recorder_is_bounded() -> None:
    recorder = MemoryRecorder(size=2)
    extender = make_extender("shadow", recorder=recorder)
    with TestClient(create_app(extender, manage_store=False)) as client:
        for _ in range(3):
            client.post("/prioritize", json={"Pod": POD, "Nodes": {"items": [node_object("frugal")]}})
    assert len(recorder.decisions) == 2
    assert all(d.recommended == "frugal" for d in recorder.decisions)


def test_names_are_escaped_in_the_answer(active: tuple[Extender, TestClient]) -> None:
    _, client = active
    names = ['we"ird\\name', "ünïcode", "frugal"]
    response = client.post("/prioritize", json={"Pod": POD, "NodeNames": names})
    assert response.status_code == 200
    assert [entry["Host"] for entry in response.json()] == names
