"""The extender's HTTP API with real-shaped kube-scheduler payloads (extender v1 JSON)."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.curves import PowerCurve
from benchmarks.harness.sched_sources import FixedSource
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, Resources
from scheduler.extender.app import create_app
from scheduler.extender.calls import ExtenderCall, MemoryRecorder
from scheduler.extender.core import Extender
from scheduler.extender.wire import ExtenderArgs, json_response, parse_args
from scheduler.framework.interface import extender_priority
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore

NOW = 1_700_000_000.0
GIB = 2**30

# A Pending pod as kube-scheduler sends it: defaulted fields, requests, limits, tolerations.
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "checkout-6c9f7b5d4-x2x7q",
        "generateName": "checkout-6c9f7b5d4-",
        "namespace": "shop",
        "uid": "5f0c6f7e-3c1a-4f0e-9d55-2b8e8f6c1a11",
        "resourceVersion": "184467",
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "labels": {"app": "checkout", "pod-template-hash": "6c9f7b5d4"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "checkout-6c9f7b5d4",
             "uid": "0d7a2c9e-8d0b-4c55-b8f3-7c1e6a0b9f21", "controller": True, "blockOwnerDeletion": True}
        ],
    },
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "registry.example/checkout:1.4.2",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "1500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            },
            {
                "name": "proxy",
                "image": "registry.example/proxy:2.0",
                "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}},
            },
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    },
    "status": {"phase": "Pending", "qosClass": "Burstable"},
}



def answer(extender: Extender, args: ExtenderArgs) -> Any:
    """/prioritize's answer as kube-scheduler reads it (the JSON the app sends)."""
    return json.loads(bytes(json_response(extender.prioritize(args)).body))


def node_object(name: str, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": cpu, "memory": "31Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "lastHeartbeatTime": "2024-05-01T09:59:50Z", "lastTransitionTime": "2024-04-01T00:00:00Z"}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"architecture": "amd64", "kubeletVersion": "v1.33.1", "operatingSystem": "linux"},
        },
    }


# 2 cores requested on 8-core nodes: Δu = 0.25.
LINE_100_260 = PowerCurve.linear(100, 260).as_points()  # 160 W/unit → ΔP 40 W
LINE_50_130 = PowerCurve.linear(50, 130).as_points()  # 80 W/unit → ΔP 20 W


def telemetry() -> dict[str, NodeSample]:
    def sample(node: str, age: float, curve: tuple[float, ...] | None, watts: float | None = 150.0) -> NodeSample:
        return NodeSample(
            NodeTelemetry(node, NOW - age, watts=watts, source="rapl" if watts else "none",
                          utilization=0.5, curve_points=curve),
            pod_count=3,
        )

    return {
        "hungry": sample("hungry", 2.0, LINE_100_260),  # ΔP 40 W → score 100(1 − 40/50) = 20 → 2
        "frugal": sample("frugal", 2.0, LINE_50_130, watts=90.0),  # ΔP 20 W → 60 → 6
        # Without fresh telemetry (docs/scheduler.md, "Missing telemetry never wins"): the
        # node's curve at its worst utilization (a line: ΔP 20 W → 6), no curve → the floor, 0.
        "stale": sample("stale", 300.0, LINE_50_130),
        "nocurve": sample("nocurve", 1.0, None),
    }


class Recorder:
    def __init__(self) -> None:
        self.decisions: list[ExtenderCall] = []

    def record(self, decision: ExtenderCall) -> None:
        self.decisions.append(decision)


def make_extender(mode: str = "active", caps: dict[str, float] | None = None, refresh: bool = True,
                  recorder: Any = None, max_body_bytes: int = 1 << 20) -> Extender:
    store = TelemetryStore([FixedSource(telemetry())], node_cores=lambda: {}, clock=lambda: NOW)
    extender = Extender(
        EnergyPlugin(delta_p_ref_watts=50.0),
        store,
        mode=mode,
        power_caps_watts=caps,
        recorder=recorder if recorder is not None else Recorder(),
        max_body_bytes=max_body_bytes,
        clock=lambda: NOW,
    )
    if refresh:
        store.refresh_once()
    return extender


@pytest.fixture
def active() -> Iterator[tuple[Extender, TestClient]]:
    extender = make_extender("active")
    with TestClient(create_app(extender, manage_store=False)) as client:
        yield extender, client


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


def _set(doc: Any, path: list[str | int], value: Any) -> Any:
    """A deep copy of `doc` with the value at `path` replaced (created if missing)."""
    doc = copy.deepcopy(doc)
    here = doc
    for key in path[:-1]:
        here = here[key] if isinstance(key, int) else here.setdefault(key, {})
    here[path[-1]] = value
    return doc


def _with(path: list[str | int], value: Any) -> bytes:
    """The real-shaped POD with one field set to `value`, in the NodeNames form."""
    return json.dumps({"Pod": _set(POD, path, value), "NodeNames": ["frugal"]}).encode()


def _nodes_with(path: list[str | int], value: Any) -> bytes:
    """The Nodes.items form, its second Node with one field set to `value`."""
    items = [node_object("hungry"), _set(node_object("frugal"), path, value)]
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
            body = json.dumps(_set(BODIES[form], list(path), value)).encode()
            response = client.post(verb, content=body, headers={"Content-Type": "application/json"})
            assert response.status_code in (200, 400), (path, value, response.text)
            if response.status_code == 400:
                assert response.json()["Error"]

        check()
    assert extender.metrics.registry.get_sample_value(
        "kubejoule_extender_requests_total", {"verb": "prioritize", "code": "500"}
    ) is None


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


class OneNodeCluster:
    """A cluster view of one 8-core node "n", with `since` cores placed since its sample."""

    since = 0.0

    def node_states(self, telemetry: Any = None) -> list[NodeState]:
        info = NodeInfo("n", Resources(cpu_millicores=8000))
        return [NodeState(info, telemetry=telemetry("n"), cpu_since_sample_cores=self.since, pod_count=2)]

    def place_since_sample(self, extender: Extender, cores: float) -> None:
        self.since = cores


def one_node_extender(
    watts: float, utilization: float, curve: tuple[float, ...], **kwargs: Any
) -> tuple[Extender, OneNodeCluster, ExtenderArgs]:
    """An active extender over OneNodeCluster, its node sampled a second ago, and the args of
    the 2-core POD for it."""
    sample = NodeTelemetry("n", NOW - 1, watts, "rapl", utilization, 8.0, curve)
    store = TelemetryStore([FixedSource({"n": NodeSample(sample)})], clock=lambda: NOW)
    store.refresh_once()
    cluster = OneNodeCluster()
    extender = Extender(store=store, mode="active", clock=lambda: NOW, cluster=cluster, **kwargs)
    return extender, cluster, parse_args(json.dumps({"Pod": POD, "NodeNames": ["n"]}).encode())


def test_cluster_view_supplies_pods_placed_since_the_sample() -> None:
    """With a cluster view (pods from watches), pods bound since the sample raise u."""
    steep = (100.0,) * 6 + (100.0, 300.0, 500.0, 700.0, 900.0)  # flat to 60 %, then 2000 W/unit
    extender, cluster, args = one_node_extender(
        100.0, 0.4, steep, energy=EnergyPlugin(delta_p_ref_watts=1000.0)
    )
    # u 0.4 → 0.65 with the 2-core pod: 0.05 into the steep part → ΔP = 100 W → score 90 → 9.
    assert answer(extender, args) == [{"Host": "n", "Score": 9}]
    cluster.place_since_sample(extender, 2.0)  # u 0.65 → 0.9, ΔP = 500 W → 50 → 5
    assert answer(extender, args) == [{"Host": "n", "Score": 5}]


def test_power_caps_count_the_pods_placed_since_the_sample() -> None:
    """150 W measured at u = 0.5 on a 100 → 260 W line (8 cores). A 2-core pod adds 40 W: 190 W,
    under a 200 W cap. With 2 cores bound since the sample the node already draws about 190 W,
    so the pod would take it to 230 W: over the cap."""
    extender, cluster, args = one_node_extender(
        150.0, 0.5, LINE_100_260, energy=EnergyPlugin(delta_p_ref_watts=50.0),
        power_caps_watts={"n": 200.0},
    )
    assert extender.filter(args)["NodeNames"] == ["n"]
    cluster.place_since_sample(extender, 2.0)
    result = extender.filter(args)
    assert result["NodeNames"] == [] and "230 W" in result["FailedNodes"]["n"]


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
