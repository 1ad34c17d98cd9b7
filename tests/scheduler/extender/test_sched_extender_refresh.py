"""The extender's node batches are prepared off the request path (scheduler/extender/state.py):
a request right after a telemetry refresh is scored on the new telemetry, without rebuilding;
Node specs from `Nodes.items` are read once per resourceVersion; cluster changes wake the
preparer. Correctness, not time (the times are in benchmarks/bench_scheduler.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from benchmarks.harness.realistic_nodes import realistic_node
from benchmarks.harness.sched_sources import FixedSource
from common.curves import PowerCurve
from scheduler.cluster.kubeobjects import node_info_from_k8s
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, Resources
from scheduler.extender.core import Extender
from scheduler.extender.wire import json_response, parse_args
from scheduler.plugins.defaults import served_profile
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.energy_results import results
from tests.helpers.standalone_harness import wait_for

NOW = 1_700_000_000.0
POD = {
    "metadata": {"name": "p", "namespace": "default", "uid": "u"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
}
# ΔP of a 2-core pod on an 8-core node (Δu 0.25) on a straight line from 100 W: slope × 0.25.
LINE = PowerCurve.linear(100, 260).as_points()  # 160 W per unit → 40 W


def sample(node: str, utilization: float, curve: tuple[float, ...] = LINE, age: float = 1.0) -> NodeSample:
    return NodeSample(NodeTelemetry(node, NOW - age, 150.0, "rapl", utilization, 8.0, curve), pod_count=3)


def scores(extender: Extender, body: dict[str, Any]) -> dict[str, int]:
    args = parse_args(json.dumps({"Pod": POD, **body}).encode(), extender.states.node_info)
    answer = json.loads(bytes(json_response(extender.prioritize(args)).body))
    return {entry["Host"]: entry["Score"] for entry in answer}


@pytest.fixture
def running() -> Iterator[tuple[Extender, FixedSource, TelemetryStore]]:
    """An active extender whose preparer thread runs (as after `start()`), refreshed by hand."""
    source = FixedSource({"a": sample("a", 0.2), "b": sample("b", 0.2)})
    store = TelemetryStore([source], clock=lambda: NOW)
    extender = Extender(served_profile(EnergyPlugin(delta_p_ref_watts=100.0)), store, mode="active", clock=lambda: NOW)
    extender.states.start()
    try:
        yield extender, source, store
    finally:
        extender.states.stop()


@pytest.mark.parametrize("form", ["NodeNames", "Nodes.items"])
def test_a_request_right_after_a_refresh_is_scored_on_the_new_telemetry(
    running: tuple[Extender, FixedSource, TelemetryStore], form: str
) -> None:
    extender, source, store = running
    body: dict[str, Any] = (
        {"NodeNames": ["a", "b"]}
        if form == "NodeNames"
        else {"Nodes": {"items": [realistic_node("a", 0, cpu="8"), realistic_node("b", 1, cpu="8")]}}
    )
    store.refresh_once()
    scores(extender, body)  # a first request: Nodes.items specs are remembered from here on
    wait_for(lambda: not extender.states._dirty.is_set(), 5, "the preparer")
    # Both on the line: ΔP 40 W of 100 → 60 → 6.
    assert scores(extender, body) == {"a": 6, "b": 6}

    # Node a's agent now exports a steeper curve: ΔP 0.25 × 320 = 80 W → 20 → 2.
    source.samples["a"] = sample("a", 0.2, PowerCurve.linear(100, 420).as_points(), age=0.5)
    store.refresh_once()
    builds = extender.states.builds
    assert scores(extender, body) == {"a": 2, "b": 6}
    assert extender.states.builds == builds  # the refresh prepared it: the request built nothing


def test_a_request_during_a_rebuild_gets_the_previous_snapshot_whole() -> None:
    """While the refresh thread prepares, requests are scored on the last published snapshot:
    never a mix of old states and a new batch."""
    source = FixedSource({"a": sample("a", 0.2)})
    store = TelemetryStore([source], clock=lambda: NOW)
    scorer = EnergyPlugin(delta_p_ref_watts=100.0)
    extender = Extender(served_profile(scorer), store, mode="active", clock=lambda: NOW)
    extender.states.start()
    try:
        store.refresh_once()
        assert scores(extender, {"NodeNames": ["a"]}) == {"a": 6}
        entered, release = threading.Event(), threading.Event()
        columns = scorer.columns

        def slow_columns(batch: Any) -> Any:
            entered.set()
            release.wait(5)
            return columns(batch)

        scorer.columns = slow_columns  # type: ignore[method-assign]
        source.samples["a"] = sample("a", 0.2, PowerCurve.linear(100, 420).as_points(), age=0.5)
        refresh = threading.Thread(target=store.refresh_once)
        refresh.start()
        assert entered.wait(5)
        assert scores(extender, {"NodeNames": ["a"]}) == {"a": 6}  # the old snapshot, whole
        release.set()
        refresh.join(5)
        assert scores(extender, {"NodeNames": ["a"]}) == {"a": 2}
    finally:
        release.set()
        extender.states.stop()


def test_a_node_spec_the_batch_was_not_built_with_is_scored_with_the_spec_sent(
    running: tuple[Extender, FixedSource, TelemetryStore],
) -> None:
    """Telemetry without a core count: the Node object's allocatable CPU sets Δu. A Node sent
    with 4 cores, then with 16 (a new resourceVersion), is scored with what was sent each time,
    the same as the per-node scorer gives."""
    extender, source, store = running
    source.samples = {"a": NodeSample(NodeTelemetry("a", NOW - 1, 150.0, "rapl", 0.2, None, LINE), 3)}
    store.refresh_once()
    small = realistic_node("a", 0, cpu="4")
    big = realistic_node("a", 0, cpu="16")
    big["metadata"]["resourceVersion"] = "2000000"
    for node, cores in ((small, 4), (big, 16), (small, 4)):
        if node is small:
            node["metadata"]["resourceVersion"] = f"{int(node['metadata']['resourceVersion']) + 1}"
        got = scores(extender, {"Nodes": {"items": [node]}})
        info = node_info_from_k8s(node)
        state = NodeState(info, telemetry=source.samples["a"].telemetry, pod_count=3)
        (want,) = results(extender.energy, parse_args(json.dumps({"Pod": POD, "NodeNames": ["a"]}).encode()).pod,
                          [state], NOW)
        assert info.allocatable.cpu_millicores == cores * 1000 - 90
        assert got == {"a": round(want.score / 10)}, (cores, want)
    # Only the first sight of a resourceVersion reads the object.
    first = extender.states.node_info(json.dumps(small).encode())
    assert extender.states.node_info(json.dumps(small, indent=1).encode()) is first


def test_node_objects_without_a_resource_version_are_read_every_time(
    running: tuple[Extender, FixedSource, TelemetryStore],
) -> None:
    extender, _, _ = running
    node = realistic_node("a", 0, cpu="4")
    del node["metadata"]["resourceVersion"]
    one = extender.states.node_info(json.dumps(node).encode())
    node["status"]["allocatable"]["cpu"] = "6"
    again = extender.states.node_info(json.dumps(node).encode())
    assert again.allocatable.cpu_millicores == 6000 != one.allocatable.cpu_millicores


class ListeningCluster:
    """A cluster view with a listener hook, as ClusterWatch has: `since` cores placed on "a"."""

    synced = True

    def __init__(self) -> None:
        self.since = 0.0
        self.listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        self.listeners.append(listener)

    def node_states(self, telemetry: Any = None) -> list[NodeState]:
        info = NodeInfo("a", Resources(cpu_millicores=8000))
        return [NodeState(info, telemetry=telemetry("a"), cpu_since_sample_cores=self.since, pod_count=3)]


def test_a_cluster_change_wakes_the_preparer() -> None:
    """A pod bound since the sample (the watch's listener fires) reaches the scores without a
    request building anything: the preparer thread rebuilds."""
    steep = (100.0,) * 6 + (100.0, 300.0, 500.0, 700.0, 900.0)  # flat to 60 %, then 2000 W/unit
    store = TelemetryStore([FixedSource({"a": sample("a", 0.4, steep)})], clock=lambda: NOW)
    cluster = ListeningCluster()
    extender = Extender(
        served_profile(EnergyPlugin(delta_p_ref_watts=1000.0)), store, mode="active", clock=lambda: NOW,
        cluster=cluster,
    )
    extender.states.start()
    try:
        store.refresh_once()
        assert scores(extender, {"NodeNames": ["a"]}) == {"a": 9}  # u 0.4 → 0.65: ΔP 100 W
        builds = extender.states.builds
        cluster.since = 2.0  # u 0.65 → 0.9: ΔP 500 W → 5
        for listener in cluster.listeners:
            listener()
        wait_for(lambda: extender.states.builds > builds, 5, "the preparer's rebuild")
        builds = extender.states.builds
        assert scores(extender, {"NodeNames": ["a"]}) == {"a": 5}
        assert extender.states.builds == builds
    finally:
        extender.states.stop()


def test_a_node_scored_on_its_own_leaves_the_shared_snapshot_as_it_was(
    running: tuple[Extender, FixedSource, TelemetryStore],
) -> None:
    """A request whose rows are every row of the snapshot (its unknown name maps to the
    sentinel row) and one of them scored on its own state: the patch goes to a copy, never
    into the snapshot other requests read."""
    extender, _, store = running
    store.refresh_once()
    unknown = realistic_node("new", 0, cpu="4")
    scores(extender, {"Nodes": {"items": [unknown]}})  # its spec is known from now on
    prepared = extender.states.current()
    before = {k: v.copy() for k, v in extender.energy.columns(prepared.batch).items()}
    assert scores(extender, {"NodeNames": ["a", "b", "new"]})["new"] == scores(
        extender, {"Nodes": {"items": [unknown]}})["new"]
    after = extender.energy.columns(prepared.batch)
    for name, values in before.items():
        np.testing.assert_array_equal(after[name], values, err_msg=name)


def test_prioritize_decodes_only_the_nodes_not_seen_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """/prioritize's decoding (no raw Nodes kept) reads each Node's identity in one pass and
    decodes only the Nodes whose name and resourceVersion are new: the same NodeInfos as
    decoding everything, the remembered ones as the same objects; the NodeNames form and bad
    bodies exactly as the full decoding gives them."""
    from scheduler.extender import wire

    decoded: list[str] = []
    read_node = wire.read_node

    def counting(raw: Any, position: int) -> NodeInfo:
        info = read_node(raw, position)
        decoded.append(info.name)
        return info

    monkeypatch.setattr(wire, "read_node", counting)
    remembered = wire.RememberedNodes()
    nodes = [realistic_node(name, i, cpu=str(4 * (i + 1))) for i, name in enumerate("abc")]
    body = json.dumps({"Pod": POD, "Nodes": {"items": nodes}}).encode()
    first = parse_args(body, remembered, raw_nodes=False)
    assert first.node_names is None and first.node_items is None and first.names == ["a", "b", "c"]
    assert first.node_infos == parse_args(body).node_infos and decoded[-3:] == ["a", "b", "c"]

    decoded.clear()
    nodes[1]["metadata"]["resourceVersion"] = "7"
    nodes[1]["status"]["allocatable"]["cpu"] = "30"
    again = parse_args(json.dumps({"Pod": POD, "Nodes": {"items": nodes}}).encode(), remembered, raw_nodes=False)
    assert decoded == ["b"]
    assert again.node_infos[0] is first.node_infos[0] and again.node_infos[2] is first.node_infos[2]
    assert again.node_infos[1].allocatable.cpu_millicores == 30000

    names = json.dumps({"Pod": POD, "NodeNames": ["a", "x"]}).encode()
    assert parse_args(names, remembered, raw_nodes=False) == parse_args(names)
    for bad in ({"Pod": POD, "Nodes": {"items": [nodes[0], 5]}},
                {"Pod": POD, "Nodes": {"items": [{**nodes[0], "metadata": "a"}]}},
                {"Pod": POD, "NodeNames": ["a", ""]},
                {"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "-1"}}}]}},
                 "NodeNames": ["a"]}):
        data = json.dumps(bad).encode()
        with pytest.raises(wire.BadRequest) as full:
            parse_args(data)
        with pytest.raises(wire.BadRequest) as identified:
            parse_args(data, remembered, raw_nodes=False)
        assert str(identified.value) == str(full.value) and identified.value.status == 400
