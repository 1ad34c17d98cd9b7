"""Every plugin: a node's score in a batch equals its score in a batch of one (before any
NormalizeScore step), and hand-computed or upstream table cases for the plugins whose tables
nobody else translates (TaintToleration, NodeAffinity preferred terms, the energy plugin)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from common.curves import PowerCurve
from scheduler.domain.model import (
    NodeInfo,
    NodeState,
    NodeTelemetry,
    PodInfo,
    Resources,
    SelectorRequirement,
    SelectorTerm,
    Taint,
    Toleration,
)
from scheduler.framework import CandidateBatch, normalized
from scheduler.framework.interface import FilterPlugin, ScorePlugin
from scheduler.plugins.energy import (
    REASON_MISSING,
    REASON_NO_CURVE,
    REASON_OK,
    REASON_STALE,
    EnergyPlugin,
)
from scheduler.plugins.extender import ExtenderScore
from scheduler.plugins.nodeaffinity import NodeAffinity, NodeUnschedulable
from scheduler.plugins.noderesources import (
    MOST_ALLOCATED,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
)
from scheduler.plugins.tainttoleration import TaintToleration

NOW = 1000.0
GIB = 1 << 30
CURVES = [
    PowerCurve.linear(100, 200),
    PowerCurve.fan(80, 250, 1.4),
    PowerCurve.from_points([41.6, 46.7, 52.3, 57.9, 65.4, 73, 80.7, 89.5, 99.6, 105, 113]),
]


def _random_state(rng: random.Random, i: int) -> NodeState:
    cores = rng.choice([2, 8, 24])
    taints = tuple(
        Taint(rng.choice(["a", "b"]), rng.choice(["x", "y"]), rng.choice(["NoSchedule", "PreferNoSchedule"]))
        for _ in range(rng.randrange(3))
    )
    labels = tuple(sorted({("zone", rng.choice(["z1", "z2"])), ("disk", rng.choice(["ssd", "hdd"]))}))
    info = NodeInfo(
        f"n{i}", Resources(cores * 1000, cores * GIB, 110), labels, taints,
        unschedulable=rng.random() < 0.1,
    )
    used = Resources(rng.randrange(0, cores * 1000), rng.randrange(0, cores * GIB), rng.randrange(0, 20))
    telemetry = None
    if rng.random() < 0.85:
        curve = rng.choice(CURVES + [None])
        telemetry = NodeTelemetry(
            f"n{i}", NOW - rng.choice([1.0, 5.0, 60.0]), 150.0, "rapl", rng.random(), cores,
            curve.as_points() if curve is not None and curve.model != "fan" else None,
        )
    return NodeState(info, used, telemetry, rng.random() * 2, pod_count=rng.randrange(0, 3))


def _pod(rng: random.Random) -> PodInfo:
    cpu = rng.choice([0, 100, 500, 3000])
    return PodInfo(
        "default", "p", "u", Resources(cpu, rng.choice([0, GIB]), 1),
        tolerations=(Toleration("a", "Equal", "x", ""),) if rng.random() < 0.5 else (),
        preferred_affinity=(
            (5, SelectorTerm((SelectorRequirement("zone", "In", ("z1",)),))),
            (2, SelectorTerm((SelectorRequirement("disk", "In", ("ssd",)),))),
        ),
        nonzero_requests=Resources(cpu or 100, GIB, 1),
    )


def _plugins() -> list[Any]:
    fan = {"n3": PowerCurve.fan(80, 250, 1.4), "n7": PowerCurve.fan(60, 140, 1.2)}
    return [
        NodeResourcesFit(),
        NodeResourcesFit(MOST_ALLOCATED, {"cpu": 3, "memory": 1}),
        NodeResourcesBalancedAllocation(),
        TaintToleration(),
        NodeAffinity(),
        NodeUnschedulable(),
        EnergyPlugin(delta_p_ref_watts=40.0, curves=fan),
        EnergyPlugin(delta_p_ref_watts=40.0, consolidation=True, curves=fan),
        ExtenderScore(EnergyPlugin(delta_p_ref_watts=40.0)),
    ]


@pytest.mark.parametrize("seed", range(4))
def test_batch_equals_batch_of_one_for_every_plugin(seed: int) -> None:
    rng = random.Random(seed)
    states = [_random_state(rng, i) for i in range(30)]
    for plugin in _plugins():
        for _ in range(3):
            pod = _pod(rng)
            batch = CandidateBatch.of(states, NOW)
            singles = [CandidateBatch.of([s], NOW) for s in states]
            if isinstance(plugin, FilterPlugin) and hasattr(plugin, "filter"):
                whole = plugin.filter(pod, batch)
                one = [bool(plugin.filter(pod, b)[0]) for b in singles]
                assert whole.tolist() == one, plugin.name
                assert [not plugin.reasons(pod, s) for s in states] == one, plugin.name
            if isinstance(plugin, ScorePlugin) and hasattr(plugin, "score"):
                whole = plugin.score(pod, batch)
                one = [plugin.score(pod, b)[0] for b in singles]
                np.testing.assert_array_equal(whole, np.array(one), err_msg=plugin.name)
                # a sub-batch (the feasible rows) scores its rows as the whole batch does
                rows = [5, 2, 17]
                np.testing.assert_array_equal(plugin.score(pod, batch.take(rows)), whole[rows])


def _tainted(name: str, *taints: tuple[str, str, str]) -> NodeState:
    return NodeState(NodeInfo(name, Resources(1000, GIB, 10), taints=tuple(Taint(*t) for t in taints)))


P = "PreferNoSchedule"
N = "NoSchedule"

# kubernetes pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go,
# TestTaintTolerationScore (the cases without the Gt/Lt feature gate, which we do not implement).
TAINT_SCORE_CASES = [
    ("tolerated taints score higher than intolerable ones",
     [("foo", "Equal", "bar", P)],
     [[("foo", "bar", P)], [("foo", "blah", P)]],
     [100, 0]),
    ("all taints tolerated: same score however many",
     [("cpu-type", "Equal", "arm64", P), ("disk-type", "Equal", "ssd", P)],
     [[], [("cpu-type", "arm64", P)], [("cpu-type", "arm64", P), ("disk-type", "ssd", P)]],
     [100, 100, 100]),
    ("the more intolerable taints, the lower the score",
     [("foo", "Equal", "bar", P)],
     [[], [("cpu-type", "arm64", P)], [("cpu-type", "arm64", P), ("disk-type", "ssd", P)]],
     [100, 50, 0]),
    ("only PreferNoSchedule taints and tolerations count",
     [("cpu-type", "Equal", "arm64", N), ("disk-type", "Equal", "ssd", N)],
     [[], [("cpu-type", "arm64", N)], [("cpu-type", "arm64", P), ("disk-type", "ssd", P)]],
     [100, 100, 0]),
    ("no tolerations: lands on the node without taints",
     [],
     [[], [("cpu-type", "arm64", P)]],
     [100, 0]),
]


@pytest.mark.parametrize(("case", "tolerations", "taints", "want"), TAINT_SCORE_CASES)
def test_taint_toleration_score_table(
    case: str, tolerations: list[tuple[str, str, str, str]], taints: list[list[tuple[str, str, str]]], want: list[int]
) -> None:
    pod = PodInfo("default", "p", "u", Resources(), tolerations=tuple(Toleration(*t) for t in tolerations))
    batch = CandidateBatch.of([_tainted(f"node{i}", *t) for i, t in enumerate(taints)])
    assert normalized(TaintToleration(), pod, batch).tolist() == want


def _labelled(name: str, **labels: str) -> NodeState:
    return NodeState(NodeInfo(name, Resources(1000, GIB, 10), tuple(sorted(labels.items()))))


def _term(weight: int, *requirements: tuple[str, str, tuple[str, ...]]) -> tuple[int, SelectorTerm]:
    return weight, SelectorTerm(tuple(SelectorRequirement(*r) for r in requirements))


def test_node_affinity_preferred_weights_normalized() -> None:
    # Shaped like node_affinity_test.go's TestNodeAffinityPriority "all nodes matched, different
    # weights": terms of weight 2 (foo=bar), 4 (key=value) and 5 (az1 and foo=bar together).
    pod = PodInfo(
        "default", "p", "u", Resources(),
        preferred_affinity=(
            _term(2, ("foo", "In", ("bar",))),
            _term(4, ("key", "In", ("value",))),
            _term(5, ("foo", "In", ("bar",)), ("key", "In", ("value",)), ("az", "In", ("az1",))),
            _term(0, ("foo", "In", ("bar",))),  # weight 0: skipped
            (3, SelectorTerm()),  # no requirement: skipped
        ),
    )
    nodes = [
        _labelled("m1", foo="bar"),  # 2
        _labelled("m2", key="value"),  # 4
        _labelled("m3", foo="bar", key="value", az="az1"),  # 2 + 4 + 5 = 11
        _labelled("m4"),  # 0
    ]
    batch = CandidateBatch.of(nodes)
    assert NodeAffinity().score(pod, batch).tolist() == [2, 4, 11, 0]
    assert normalized(NodeAffinity(), pod, batch).tolist() == [18, 36, 100, 0]  # 100·s // 11
    nothing = PodInfo("default", "p", "u", Resources())
    assert normalized(NodeAffinity(), nothing, batch).tolist() == [0, 0, 0, 0]


def _energy_state(u: float, cores: float, age: float = 1.0, curve: PowerCurve | None = CURVES[0],
                  pods: int = 1, since: float = 0.0, name: str = "n") -> NodeState:
    telemetry = NodeTelemetry(
        name, NOW - age, 150.0, "rapl", u, cores, curve.as_points() if curve is not None else None
    )
    return NodeState(NodeInfo(name, Resources(int(cores * 1000), GIB, 10)), Resources(), telemetry, since, pods)


def test_energy_hand_computed() -> None:
    plugin = EnergyPlugin(delta_p_ref_watts=50.0, max_staleness_seconds=30.0)
    pod = PodInfo("default", "p", "u", Resources(cpu_millicores=1000))
    batch = CandidateBatch.of(
        [
            _energy_state(0.25, 8),  # 100 → 200 W line: ΔP = 100 W × 1/8 = 12.5 W → 75
            _energy_state(0.25, 8, since=2.0),  # u = 0.5 counted with 2 cores since: same slope
            _energy_state(0.95, 8),  # u 0.95 → 1.075: past 1 the last tenth's slope, 12.5 W
            # Without fresh telemetry: the node's curve at its worst utilization (a line's
            # marginal is the same everywhere: 75), or the floor when no curve is known.
            _energy_state(0.25, 8, age=60.0, name="stale"),
            _energy_state(0.25, 8, curve=None, name="curveless"),
            NodeState(NodeInfo("absent", Resources(8000, GIB, 10))),  # no telemetry
        ],
        NOW,
    )
    got = plugin.evaluate(pod, batch)
    assert got.score.tolist() == [75.0, 75.0, 75.0, 75.0, 0.0, 0.0]
    assert got.delta_watts[:3].tolist() == [12.5, 12.5, 12.5]
    assert np.isnan(got.delta_watts[3:]).all()  # not measured: no ΔP is reported
    assert got.reasons() == [REASON_OK, REASON_OK, REASON_OK, REASON_STALE, REASON_NO_CURVE, REASON_MISSING]
    # A node whose agent has gone keeps the last curve it exported (and its core count).
    gone = NodeState(NodeInfo("n", Resources(0, GIB, 10)))
    assert plugin.evaluate(pod, CandidateBatch.of([gone], NOW)).score.tolist() == [75.0]
    # a best-effort pod counts kube-scheduler's 100 m: 100 W × 0.1 / 8 = 1.25 W
    best_effort = PodInfo("default", "p", "u", Resources())
    assert plugin.delta_watts(best_effort, _energy_state(0.25, 8), NOW) == (1.25, REASON_OK)


def test_energy_consolidation_price_on_empty_and_running_nodes() -> None:
    # 41.6 … 113 W points curve (8 cores); u_ref 0.5: the least P(v)/v up to 0.5 is at 0.5,
    # 73 / 0.5 = 146 W per unit. A 1-core pod (Δu 1/8) on an empty node costs 146/8 = 18.25 W;
    # on a running node at u = 0.5 → 0.625 its marginal is (80.7 − 73) + (89.5 − 80.7) / 4
    # = 9.9 W (below the share); without the price, the empty node costs its marginal
    # (46.7 − 41.6) + (52.3 − 46.7) / 4 = 6.5 W.
    points = CURVES[2]
    plugin = EnergyPlugin(delta_p_ref_watts=100.0, consolidation=True)
    pod = PodInfo("default", "p", "u", Resources(cpu_millicores=1000))
    batch = CandidateBatch.of(
        [_energy_state(0.0, 8, curve=points, pods=0), _energy_state(0.5, 8, curve=points)], NOW
    )
    delta = plugin.evaluate(pod, batch).delta_watts
    np.testing.assert_allclose(delta, [146 / 8, (80.7 - 73) + (89.5 - 80.7) / 4])
    np.testing.assert_allclose(plugin.evaluate(pod, batch, with_idle=False).delta_watts[0], (46.7 - 41.6) + (52.3 - 46.7) / 4)
