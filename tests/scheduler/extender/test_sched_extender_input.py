"""The extender's HTTP API on bad input: a 400 that says what is wrong, never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.extender.app import create_app
from scheduler.extender.core import Extender
from tests.helpers.sched_extender import (
    POD,
    make_extender,
    node_object,
    with_value,
)


def _with(path: list[str | int], value: Any) -> bytes:
    """The real-shaped POD with one field set to `value`, in the NodeNames form."""
    return json.dumps({"Pod": with_value(POD, path, value), "NodeNames": ["frugal"]}).encode()


def _nodes_with(path: list[str | int], value: Any) -> bytes:
    """The Nodes.items form, its second Node with one field set to `value`."""
    items = [node_object("hungry"), with_value(node_object("frugal"), path, value)]
    return json.dumps({"Pod": POD, "Nodes": {"items": items}}).encode()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (b'{"NodeNames": ["a"]}', "Pod"),
        (json.dumps({"Pod": "x", "NodeNames": ["a"]}).encode(), "Pod"),
        (json.dumps({"Pod": POD}).encode(), "Nodes or NodeNames"),
        (json.dumps({"Pod": POD, "NodeNames": "a,b"}).encode(), "NodeNames"),
        (json.dumps({"Pod": POD, "NodeNames": ["a", 3]}).encode(), "NodeNames"),
        (json.dumps({"Pod": POD, "Nodes": []}).encode(), "NodeList"),
        (json.dumps({"Pod": POD, "Nodes": {"items": [{"metadata": {}}]}}).encode(), "items[0]"),
        (json.dumps({"Pod": POD, "Nodes": {"items": "x"}}).encode(), "Nodes.items"),
        (
            json.dumps({"Pod": {**POD, "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}},
                        "NodeNames": ["a"]}).encode(),
            "quantity",
        ),
        (json.dumps({"Pod": {**POD, "spec": "x"}, "NodeNames": ["a"]}).encode(), "spec"),
        # Wrong types deep inside the Pod and the Nodes: a 400 naming the field.
        (_with(["spec", "containers", 0, "resources"], [1]), "Pod.spec.containers[0].resources:"),
        (_with(["spec", "containers", 1, "resources", "requests", "cpu"], True), "requests.cpu"),
        (_with(["spec", "tolerations", 0, "effect"], 3), "Pod.spec.tolerations[0].effect:"),
        (_with(["spec", "tolerations"], {"key": "x"}), "Pod.spec.tolerations:"),
        (_with(["spec", "nodeSelector"], {"zone": ["a"]}), "Pod.spec.nodeSelector.zone:"),
        (_with(["spec", "affinity"], {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                        {"nodeSelectorTerms": [{"matchExpressions": [
                                                            {"key": "k", "operator": "In", "values": 5}]}]}}}),
         "matchExpressions[0].values:"),
        (_with(["spec", "initContainers"], {"name": "init"}), "Pod.spec.initContainers:"),
        (_with(["spec", "overhead"], ["250m"]), "Pod.spec.overhead:"),
        (_with(["metadata", "labels"], {"app": {"nested": True}}), "Pod.metadata.labels.app:"),
        (_with(["metadata", "name"], ["p"]), "Pod.metadata.name:"),
        (_with(["status"], "Pending"), "Pod.status:"),
        # Numbers beyond what a double or a quantity holds: refused while parsing the JSON
        # (Infinity is not JSON; 1e400 overflows a double), never an OverflowError.
        (b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": '
         b'{"cpu": Infinity}}}]}}, "NodeNames": ["a"]}', "not valid JSON"),
        (b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": '
         b'{"memory": 1e400}}}]}}, "NodeNames": ["a"]}', "infinity"),
        (_with(["spec", "containers", 0, "resources", "requests", "cpu"], "1e30"), "out of range"),
        (_nodes_with(["status", "allocatable", "cpu"], "lots"), "Nodes.items[1].status.allocatable.cpu:"),
        (_nodes_with(["spec", "taints"], "NoSchedule"), "Nodes.items[1].spec.taints:"),
        (_nodes_with(["spec", "unschedulable"], "yes"), "Nodes.items[1].spec.unschedulable:"),
        (_nodes_with(["status", "conditions"], [1]), "Nodes.items[1].status.conditions[0]:"),
        (_nodes_with(["metadata", "labels"], ["a"]), "Nodes.items[1].metadata.labels:"),
        # Nested past the JSON parser's recursion limit.
        (b'{"Pod": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ],
)
@pytest.mark.parametrize("verb", ["/prioritize", "/filter"])
def test_bad_input_is_a_400_with_a_message(
    active: tuple[Extender, TestClient], verb: str, body: bytes, message: str
) -> None:
    _, client = active
    response = client.post(verb, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert message in response.json()["Error"]


def _paths(doc: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every place in a JSON document: each object key and each array index, recursively."""
    children: list[tuple[str | int, Any]] = []
    if isinstance(doc, dict):
        children = list(doc.items())
    elif isinstance(doc, list):
        children = list(enumerate(doc))
    found = []
    for key, value in children:
        found.append((*prefix, key))
        found += _paths(value, (*prefix, key))
    return found


# Any JSON value, including what Python's json reads beyond the standard (NaN, Infinity) and
# integers past int64.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
BODIES = {
    "items": {"Pod": POD, "Nodes": {"kind": "NodeList", "items": [node_object("hungry"), node_object("frugal")]}},
    "names": {"Pod": POD, "NodeNames": ["hungry", "frugal", "stale"]},
}
PLACES = [(form, path) for form, body in BODIES.items() for path in _paths(body)]


def test_no_body_gets_a_500() -> None:
    """Any field of a real-shaped request replaced by any JSON value: 200 or a 400 that says
    what is wrong, never a 500 (an exception escaping the parsing)."""
    extender = make_extender("active", caps={"hungry": 100.0, "frugal": 100.0})
    with TestClient(create_app(extender, manage_store=False)) as client:

        @settings(max_examples=200, deadline=None, derandomize=True)
        @given(place=st.sampled_from(PLACES), value=JSON_VALUES, verb=st.sampled_from(["/prioritize", "/filter"]))
        def check(place: tuple[str, tuple[str | int, ...]], value: Any, verb: str) -> None:
            form, path = place
            body = json.dumps(with_value(BODIES[form], list(path), value)).encode()
            response = client.post(verb, content=body, headers={"Content-Type": "application/json"})
            assert response.status_code in (200, 400), (path, value, response.text)
            if response.status_code == 400:
                assert response.json()["Error"]

        check()
    assert extender.metrics.registry.get_sample_value(
        "kubejoule_extender_requests_total", {"verb": "prioritize", "code": "500"}
    ) is None
