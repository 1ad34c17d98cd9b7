"""Missing telemetry never wins on energy (issue 17 item 5; the rule: scheduler/plugins/energy/plugin.py,
"Missing data never wins", and docs/scheduler.md): of two identical nodes, one measured and one
without fresh telemetry, the measured one scores at least as well, whatever its curve, load,
emptiness and the pod — in the plugin, through the extender over HTTP, and for random states."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from common.curves import PowerCurve, columns_watts, curve_columns
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources
from scheduler.extender.app import create_app
from scheduler.extender.core import Extender
from scheduler.framework.batch import CandidateBatch
from scheduler.plugins.defaults import served_profile
from scheduler.plugins.energy import EnergyPlugin
from scheduler.plugins.energy.price import worst_marginal_watts
from scheduler.telemetry.discovery import StaticTargets
from scheduler.telemetry.sources import AgentScrapeSource
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.energy_results import results as energy_results
from tests.helpers.sched_http import agent_exposition, text_server

NOW = 1_000_000.0
GIB = 1 << 30
# SPECpower_ssj2008 X3470 (8 CPUs, rl/scenarios/heterogeneous.yaml): steep at the start and top.
X3470 = (41.6, 46.7, 52.3, 57.9, 65.4, 73.0, 80.7, 89.5, 99.6, 105.0, 113.0)
CURVES = [X3470, PowerCurve.linear(60, 160).as_points(), PowerCurve.fan(50, 200, 1.4).as_points()]


def pod(millicores: int) -> PodInfo:
    return PodInfo("default", "p", "u", Resources(cpu_millicores=millicores))


def state(name: str, cores: int, telemetry: NodeTelemetry | None, pods: int = 1,
          since: float = 0.0) -> NodeState:
    info = NodeInfo(name, Resources(cores * 1000, 16 * GIB, 110))
    return NodeState(info, Resources(), telemetry, since, pods)


def measured(name: str, cores: int, u: float, points: tuple[float, ...] | None, age: float = 1.0,
             pods: int = 1, since: float = 0.0) -> NodeState:
    telemetry = NodeTelemetry(name, NOW - age, 100.0, "rapl", u, float(cores), points)
    return state(name, cores, telemetry, pods, since)


@pytest.mark.parametrize("consolidation", [False, True])
@pytest.mark.parametrize("points", CURVES, ids=["x3470", "line", "fan"])
def test_the_measured_twin_scores_at_least_the_unmeasured_one(
    consolidation: bool, points: tuple[float, ...]
) -> None:
    """Two identical 4-core nodes; the unmeasured one has no agent (with and without a
    configured curve), a stale sample, or an agent that has gone since it exported its curve."""
    for ref in (20.0, 200.0):
        configured = EnergyPlugin(ref, consolidation, curves={"twin": PowerCurve.from_points(points)})
        bare = EnergyPlugin(ref, consolidation)
        remembered = EnergyPlugin(ref, consolidation)
        remembered.observe(NodeTelemetry("twin", NOW - 600, 100.0, "rapl", 0.3, 4.0, points))
        for millicores in (100, 500, 1000, 2000, 4000, 6000):
            for u in (0.0, 0.05, 0.3, 0.62, 0.95, 1.0, 1.3):
                for pods in (0, 3):
                    for plugin in (configured, bare, remembered):
                        batch = CandidateBatch.of([
                            measured("m", 4, u, points, pods=pods),
                            state("twin", 4, None),  # no agent
                            measured("twin", 4, u, points, age=600.0, pods=pods),  # stale
                        ], NOW)
                        scores = plugin.evaluate(pod(millicores), batch)
                        assert scores.score[1] <= scores.score[0] + 1e-9
                        assert scores.score[2] <= scores.score[0] + 1e-9
                        assert scores.reasons()[1:] == ["missing", "stale"]
    # With no curve anywhere the unmeasured twin gets the floor.
    bare = EnergyPlugin(20.0)
    assert bare.evaluate(pod(500), CandidateBatch.of([state("twin", 4, None)], NOW)).score[0] == 0


def test_the_issue_example_no_agent_no_longer_beats_the_measured_node() -> None:
    """Issue 17: two identical 4-core nodes, the one without an agent scored 5 on the extender's
    scale against 1 (500 m) or 0 (1 CPU) for the measured one."""
    scorer = EnergyPlugin()  # the extender's defaults: ΔP_ref 20 W
    curve = PowerCurve.linear(100, 200).as_points()
    for millicores in (500, 1000):
        results = energy_results(scorer, pod(millicores), [measured("m", 4, 0.4, curve), state("x", 4, None)], NOW)
        assert results[1].score == 0.0 and results[1].reason == "missing"
        assert results[0].score >= results[1].score


@st.composite
def curves(draw: Any) -> tuple[float, ...]:
    """Random 11-point curves: non-decreasing, or with a dip (agents export what they fit)."""
    idle = draw(st.floats(5.0, 300.0))
    steps = draw(st.lists(st.floats(-5.0, 80.0), min_size=10, max_size=10))
    points = [idle]
    for step in steps:
        points.append(max(0.0, points[-1] + step))
    return tuple(points)


@settings(max_examples=300, deadline=None)
@given(
    points=curves(),
    cores=st.sampled_from([2, 4, 8, 24, 64]),
    u=st.floats(0.0, 1.5),
    since=st.floats(0.0, 8.0),
    pods=st.integers(0, 5),
    millicores=st.integers(0, 16_000),
    consolidation=st.booleans(),
    reference_load=st.floats(0.1, 1.0),
    ref=st.floats(1.0, 2000.0),
    age=st.floats(31.0, 1e6),
)
def test_property_no_unmeasured_node_outscores_its_measured_twin(
    points: tuple[float, ...], cores: int, u: float, since: float, pods: int, millicores: int,
    consolidation: bool, reference_load: float, ref: float, age: float,
) -> None:
    plugin = EnergyPlugin(ref, consolidation, curves={"configured": PowerCurve.from_points(points)},
                          consolidation_utilization=reference_load)
    plugin.observe(NodeTelemetry("gone", NOW - 1e6, 100.0, "rapl", 0.5, float(cores), points))
    batch = CandidateBatch.of([
        measured("twin", cores, u, points, pods=pods, since=since),
        measured("stale", cores, u, points, age=age, pods=pods, since=since),
        state("configured", cores, None),
        state("gone", cores, None),
        state("unknown", cores, None),
        measured("curveless", cores, u, None, pods=pods),  # fresh load, no curve
    ], NOW)
    scores = plugin.evaluate(pod(millicores), batch).score
    assert (scores[1:] <= scores[0] + 1e-9).all(), scores
    assert scores[4] == scores[5] == 0.0


def node_object(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "1", "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_over_http_the_node_without_an_agent_never_scores_above_the_measured_one() -> None:
    """The extender scrapes a real agent exposition for `measured`; `dark` has none. Both are
    4-core nodes; both forms of /prioritize, several pod sizes and loads."""
    with text_server() as agents:
        store = TelemetryStore(
            [AgentScrapeSource(StaticTargets({"measured": agents.url("/measured/metrics")}))],
            node_cores=lambda: {"measured": 4.0, "dark": 4.0},
        )
        extender = Extender(served_profile(EnergyPlugin()), store, mode="active")
        with TestClient(create_app(extender, manage_store=False)) as client:
            for utilization in (0.05, 0.4, 0.9):
                agents.pages["/measured/metrics"] = agent_exposition(
                    "measured", time.time(), utilization=utilization, curve=X3470
                )
                store.refresh_once()
                for cpu in ("100m", "500m", "1", "3"):
                    body: dict[str, Any] = {"Pod": {
                        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                    }}
                    for form in ("NodeNames", "Nodes"):
                        if form == "NodeNames":
                            body["NodeNames"], body["Nodes"] = ["dark", "measured"], None
                        else:
                            body["NodeNames"] = None
                            body["Nodes"] = {"items": [node_object("dark", "4"), node_object("measured", "4")]}
                        response = client.post("/prioritize", json=body)
                        assert response.status_code == 200, response.text
                        scores = {entry["Host"]: entry["Score"] for entry in response.json()}
                        assert scores["dark"] <= scores["measured"], (utilization, cpu, form, scores)
                        assert scores["dark"] == 0  # no curve known for it: the floor


@settings(max_examples=150, deadline=None)
@given(points=curves(), delta_u=st.floats(0.001, 2.0))
def test_the_worst_marginal_is_the_maximum_over_every_utilization(
    points: tuple[float, ...], delta_u: float
) -> None:
    """worst_marginal_watts() against a dense search: never below any utilization's marginal,
    and attained (within the grid's resolution) — it is the maximum, not a loose bound."""
    cols = curve_columns([PowerCurve.from_points(points)])
    worst = float(worst_marginal_watts(cols, np.array([delta_u]))[0])
    grid = np.linspace(0.0, 2.5, 5001)[None, :]
    steps = columns_watts(cols, grid + delta_u) - columns_watts(cols, grid)
    assert steps.max() <= worst + 1e-9
    slope = float(np.abs(np.diff(points)).max()) * 10 + 1.0
    assert worst <= steps.max() + slope * 0.0005 + 1e-9


def test_over_http_a_configured_curve_prices_a_node_without_an_agent_in_both_forms() -> None:
    """`dark` has no agent but a configured curve: once its Node object has been seen, both forms
    price it at its curve's worst step (a line: the same as measured), not at the floor; a name
    the extender knows nothing of stays at the floor."""
    line = PowerCurve.linear(50, 130)  # 80 W per unit; 1 CPU of 4 → 20 W → 100 × (1 − 20/50) = 60
    with text_server() as agents:
        agents.pages["/measured/metrics"] = agent_exposition(
            "measured", time.time(), utilization=0.5, curve=line.as_points()
        )
        store = TelemetryStore(
            [AgentScrapeSource(StaticTargets({"measured": agents.url("/measured/metrics")}))],
            node_cores=lambda: {"measured": 4.0},
        )
        extender = Extender(served_profile(EnergyPlugin(delta_p_ref_watts=50.0, curves={"dark": line})), store,
                            mode="active")
        store.refresh_once()
        with TestClient(create_app(extender, manage_store=False)) as client:
            the_pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
            items = {"items": [node_object("dark", "4"), node_object("measured", "4")]}
            by_items = client.post("/prioritize", json={"Pod": the_pod, "Nodes": items}).json()
            by_names = client.post("/prioritize", json={
                "Pod": the_pod, "NodeNames": ["dark", "measured", "nobody"]}).json()
    assert by_items == [{"Host": "dark", "Score": 6}, {"Host": "measured", "Score": 6}]
    assert by_names == [{"Host": "dark", "Score": 6}, {"Host": "measured", "Score": 6},
                        {"Host": "nobody", "Score": 0}]
