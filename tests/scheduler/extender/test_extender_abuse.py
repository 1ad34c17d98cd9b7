"""The extender under abuse: malformed, negative and out-of-range values are 400s (never a 5xx),
large bodies are parsed off the event loop without holding the interpreter, and a global
budget of bytes in flight keeps a real server under the manifest's memory limit while 32
clients send maximal bodies (503 with Retry-After beyond it) and small requests go on."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.harness.extender_process import (
    Answer,
    maximal_body,
    post,
    running_extender,
    small_body,
)
from common.quantity import parse_decimal, quantity_units
from scheduler.extender import jsonwalk
from scheduler.extender.app import create_app
from scheduler.extender.body import LARGE_BODY_BYTES, MIN_MAX_BODY_BYTES, BadRequest
from scheduler.extender.wire import parse_args
from tests.helpers.sched_extender import POD, make_extender, node_object, with_value

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "daemonset/components/extender/extender-deployment.yaml"
BIG = "9" * 400  # the 400-digit integers


def _manifest_memory_limit_bytes() -> int:
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        if doc and doc.get("kind") == "Deployment":
            [container] = doc["spec"]["template"]["spec"]["containers"]
            return quantity_units(container["resources"]["limits"]["memory"])
    raise AssertionError("no Deployment in the extender manifest")


# Where a quantity goes: (form, path inside the Pod or the second Node, what the message names).
POD_PLACES = [
    (("spec", "containers", 0, "resources", "requests", "cpu"), "Pod.spec.containers[0].resources.requests.cpu"),
    (("spec", "containers", 0, "resources", "requests", "memory"), "Pod.spec.containers[0].resources.requests.memory"),
    (("spec", "containers", 1, "resources", "limits", "cpu"), "Pod.spec.containers[1].resources.limits.cpu"),
    (("spec", "overhead", "cpu"), "Pod.spec.overhead.cpu"),
    (("spec", "overhead", "memory"), "Pod.spec.overhead.memory"),
]
NODE_PLACES = [
    (("status", "allocatable", "cpu"), "Nodes.items[1].status.allocatable.cpu"),
    (("status", "allocatable", "memory"), "Nodes.items[1].status.allocatable.memory"),
    (("status", "allocatable", "pods"), "Nodes.items[1].status.allocatable.pods"),
    (("status", "capacity", "cpu"), "Nodes.items[1].status.capacity.cpu"),
]


def _body(place: tuple[str | int, ...], in_pod: bool, value: Any) -> bytes:
    if in_pod:
        return json.dumps({"Pod": with_value(POD, place, value), "NodeNames": ["frugal"]}).encode()
    items = [node_object("hungry"), with_value(node_object("frugal"), place, value)]
    return json.dumps({"Pod": POD, "Nodes": {"items": items}}).encode()


@pytest.fixture(scope="module")
def client() -> Any:
    extender = make_extender("active", caps={"hungry": 100.0, "frugal": 100.0})
    with TestClient(create_app(extender, manage_store=False)) as c:
        yield c


CASES = [
    # The 500s: 400-digit integers, as JSON numbers and as quantity strings.
    *[(p, True, v, "") for p, _ in POD_PLACES for v in (int(BIG), BIG)],
    *[(p, False, v, "") for p, _ in NODE_PLACES for v in (int(BIG), BIG)],
    # Negative requests, limits, overhead, allocatable, capacity: the API server refuses them.
    *[(p, True, "-1", "negative") for p, _ in POD_PLACES],
    *[(p, False, "-1", "negative") for p, _ in NODE_PLACES],
    *[(p, True, v, "negative") for p, _ in POD_PLACES[:2] for v in (-5, "-0.5", "-1Ki", "-1e-9")],
    # Past int64 in the field's unit (millicores for CPU, bytes): out of range.
    (POD_PLACES[0][0], True, "9223372036854776", "out of range"),  # cores → millicores
    (NODE_PLACES[1][0], False, "9223372036854775808", "out of range"),
]


@pytest.mark.parametrize(("place", "in_pod", "value", "message"), CASES)
@pytest.mark.parametrize("verb", ["/prioritize", "/filter"])
def test_bad_quantities_are_400s_naming_the_field(
    client: Any, verb: str, place: tuple[str | int, ...], in_pod: bool, value: Any, message: str
) -> None:
    response = client.post(verb, content=_body(place, in_pod, value))
    assert response.status_code == 400, response.text
    error = response.json()["Error"]
    assert message in error
    assert len(error) < 300  # a 400-digit value is not echoed back whole


def test_a_pods_total_past_int64_is_a_400(client: Any) -> None:
    """Each container within range, their sum not (Kubernetes' own int64 would overflow)."""
    pod = with_value(POD, ("spec", "containers", 0, "resources", "requests", "memory"), str(2**62))
    pod = with_value(pod, ("spec", "containers", 1, "resources", "requests", "memory"), str(2**62))
    response = client.post("/prioritize", json={"Pod": pod, "NodeNames": ["frugal"]})
    assert response.status_code == 400
    assert "total memory request is out of range" in response.json()["Error"]
    assert client.post("/prioritize", json={"Pod": with_value(POD, ("spec", "priority"), 2**31), "NodeNames": ["a"]}).status_code == 400


def test_binary_values_are_capped_as_kubernetes_caps_them(client: Any) -> None:
    """"16Ei" is 2^64 bytes, capped at 2^63-1 by Kubernetes: in range for allocatable memory."""
    response = client.post("/prioritize", content=_body(NODE_PLACES[1][0], False, "16Ei"))
    assert response.status_code == 200


QUANTITY_TEXT = st.from_regex(
    r"[+-]?([0-9]{0,420}(\.[0-9]{0,12})?|\.[0-9]{1,12})([eE][+-]?[0-9]{1,11}|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?",
    fullmatch=True,
)
QUANTITIES = st.one_of(
    QUANTITY_TEXT,
    st.text(max_size=12),
    st.integers(-(10**420), 10**420),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 9), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
)
PLACES = [(p, True) for p, _ in POD_PLACES] + [(p, False) for p, _ in NODE_PLACES]


def _negative(value: Any) -> bool:
    try:
        return isinstance(value, str | int | float) and parse_decimal(value) < 0
    except ValueError:
        return False


def test_no_quantity_gets_a_5xx(client: Any) -> None:
    """Any value in any quantity field: a 200, or a 400 with a message; a negative one is a
    400 always."""

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(place=st.sampled_from(PLACES), value=QUANTITIES, verb=st.sampled_from(["/prioritize", "/filter"]))
    def check(place: tuple[tuple[str | int, ...], bool], value: Any, verb: str) -> None:
        response = client.post(verb, content=_body(place[0], place[1], value))
        assert response.status_code in (200, 400), (place, value, response.text)
        if response.status_code == 400:
            assert response.json()["Error"]
        if _negative(value):
            assert response.status_code == 400, (place, value)

    check()


# -- large bodies: walked, not parsed in one call ---------------------------------------------

JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(value=JSON_TEXT, indent=st.sampled_from([None, 1]))
def test_the_walker_reads_what_orjson_reads(value: Any, indent: int | None) -> None:
    data = json.dumps(value, indent=indent, ensure_ascii=indent is None).encode()
    assert jsonwalk.loads(data) == orjson.loads(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": NaN}', b'{"a": Infinity}', b'{"a": -Infinity}', b'{"a": 1e400}', b'{"a": "\\ud800"}',
        b'{"a": "\\ude00x"}', b'{"a": "\\ud800\\ud800"}', b'{"a": "\\\\\\ud800"}', b"[" * 5000 + b"]" * 5000,
        b'{"a": 1} x', b"\xff\xfe", b'{"a" 1}', b"", b"   ", b'{"a": [1,]}', b'{"a": -}', b'{"a": 1,}',
        b'{1: 2}', b'[1 2]', b'{"a": "unterminated', b'{"a": tru}', b'"\\x"',
    ],
)
def test_the_walker_refuses_what_orjson_refuses_with_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        orjson.loads(data)
    with pytest.raises(ValueError):
        jsonwalk.loads(data)


def test_the_walker_hands_containers_of_small_elements_to_the_c_scanner_whole() -> None:
    """NodeNames lists, objects of many keys, big elements then small ones: the same values as
    orjson, and what orjson refuses inside them is still refused."""
    big = {"x": "y" * 400}
    docs = [
        {"Pod": {"metadata": {"name": "p"}}, "NodeNames": [f"n{i}" for i in range(5000)]},
        {f"k{i}": i for i in range(3000)},
        {"Nodes": {"items": [big] * 20 + [1, "a", None] * 100 + [big] * 3}},
        [[big] * 3, [0.5] * 200],
    ]
    for doc in docs:
        data = json.dumps(doc).encode()
        assert jsonwalk.loads(data) == orjson.loads(data)
    names = json.dumps([f"n{i}" for i in range(100)]).encode()
    for broken in (names[:-1] + b", NaN]", names[:-1] + b", 1e999]", names[:-1] + b', "\\ud800"]'):
        with pytest.raises(ValueError):
            orjson.loads(broken)
        with pytest.raises(ValueError):
            jsonwalk.loads(broken)


def test_a_large_malformed_body_is_a_400_not_a_5xx() -> None:
    """Above LARGE_BODY_BYTES the walker parses: its errors are BadRequests too."""
    nodes = [node_object(f"n{i}") for i in range(1500)]
    body = json.dumps({"Pod": POD, "Nodes": {"items": nodes}}).encode()
    assert len(body) > LARGE_BODY_BYTES
    assert len(parse_args(body).node_infos) == 1500
    for broken, message in [
        (body[:-3], "not valid JSON"),
        (body.replace(b'"cpu": "8"', b'"cpu": NaN', 1), "not valid JSON"),
        (body.replace(b'"cpu": "8"', b'"cpu": "-8"', 1), "negative"),
        (body.replace(b'"cpu": "8"', b'"cpu": ' + BIG.encode(), 1), "Nodes.items[0]"),
        (body + b"]", "extra data"),
    ]:
        with pytest.raises(BadRequest, match=message.replace("[", r"\[").replace("]", r"\]")):
            parse_args(broken)


# -- a real server under 32 concurrent maximal bodies -----------------------------------------


def test_32_concurrent_maximal_bodies_keep_the_server_under_its_memory_limit(tmp_path: Path) -> None:
    limit = _manifest_memory_limit_bytes()
    big = maximal_body(MIN_MAX_BODY_BYTES)  # the default limit with no node known: 16 MiB
    assert MIN_MAX_BODY_BYTES - 64 * 1024 < len(big) <= MIN_MAX_BODY_BYTES
    nodes = big.count(b'"kind":"Node"')
    with running_extender(tmp_path) as server:
        stop = threading.Event()
        smalls: list[Answer] = []
        bigs: list[Answer] = []

        def small_requests() -> None:
            i = 0
            while not stop.is_set():
                smalls.append(post(server.port, "/prioritize", small_body(f"small-{i}"), timeout=30))
                i += 1
                stop.wait(0.02)

        def one_big() -> None:
            bigs.append(post(server.port, "/prioritize", big, timeout=120))

        small = threading.Thread(target=small_requests)
        small.start()
        clients = [threading.Thread(target=one_big) for _ in range(32)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(180)
        stop.set()
        small.join(60)
        memory = server.memory_kib()
        final = post(server.port, "/prioritize", small_body("after"), timeout=30)
    assert len(bigs) == 32
    statuses = sorted(a.status for a in bigs)
    assert set(statuses) <= {200, 503}, statuses
    for answer in bigs:
        if answer.status == 200:
            assert len(json.loads(answer.body)) == nodes  # a whole answer, every node scored
        else:
            assert answer.headers.get("retry-after") == "1"
            assert "in flight" in json.loads(answer.body)["Error"]
    assert statuses.count(200) >= 1  # a maximal body alone is always admissible
    assert statuses.count(503) >= 1  # 32 of them are not
    assert smalls and all(a.status == 200 for a in smalls)  # small requests never refused
    assert final.status == 200
    assert memory["VmHWM"] * 1024 < limit, (memory, limit)  # peak RSS under the manifest's limit
