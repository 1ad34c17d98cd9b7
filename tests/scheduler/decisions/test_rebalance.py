"""The energy rebalancer's decision (scheduler/decisions/rebalance.py, energy.py) on hand-computed
cases, and Karpenter's balanced score on its design's worked examples.

The cluster: `old` (4 cores, linear 100–200 W) runs one pod using 1 core (u = 0.25: 125 W,
125 W per busy core); `new` (8 cores, linear 50–150 W) runs four 1-core pods (u = 0.5: 100 W).
Moving the pod puts `new` at u = 0.625, 112.5 W (22.5 W per busy core): ΔP = 12.5 W."""

from __future__ import annotations

from dataclasses import replace

import pytest

from common.curves import PowerCurve
from scheduler.config.rebalancer import RebalancerConfig
from scheduler.decisions.rebalance import NodeView, PodView, cpu_shares, fresh_utilization, plan
from scheduler.decisions.rebalance_lifetime import Remaining
from scheduler.decisions.rebalance_prices import (
    KARPENTER_COMMIT,
    balanced_score,
    eviction_cost,
    node_disruption_cost,
    pod_eviction_cost,
    source_energy,
    takeover_time,
)
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources

GIB = 2**30
OLD = PowerCurve.linear(100.0, 200.0)
NEW = PowerCurve.linear(50.0, 150.0)
NO_CA = RebalancerConfig(scale_down_utilization_threshold=None)


def pod(key: str, cpu: float = 1.0, remaining: float | None = 3600.0, *, fallback: bool = False,
        restarts: bool = False, run: float = 0.0, **kw: object) -> PodView:
    info = PodInfo("default", key, f"uid-{key}",
                   Resources(cpu_millicores=round(cpu * 1000), memory_bytes=GIB, pods=1),
                   owner_kind="Job" if restarts else "ReplicaSet")
    left = None if remaining is None else Remaining(remaining, fallback)
    return PodView(key, info, cpu, run, restarts, left, **kw)  # type: ignore[arg-type]


def node(name: str, cores: int, curve: PowerCurve | None, pods: list[PodView],
         utilization: float | None = None, **kw: object) -> NodeView:
    requested = sum((p.info.requests for p in pods), Resources())
    info = NodeInfo(name, Resources(cpu_millicores=cores * 1000, memory_bytes=64 * GIB, pods=110))
    state = NodeState(info=info, requested=requested, pod_count=len(pods),
                      telemetry=NodeTelemetry(name, 0.0, cores=cores))
    u = sum(p.cpu_cores for p in pods) / cores if utilization is None else utilization
    return NodeView(state, curve, u, tuple(pods), **kw)  # type: ignore[arg-type]


def cluster(source_pods: list[PodView], **source: object) -> list[NodeView]:
    return [node("old", 4, OLD, source_pods, **source),
            node("new", 8, NEW, [pod(f"n{i}") for i in range(4)])]


def test_a_pod_moves_to_the_more_efficient_node_when_the_saving_pays() -> None:
    result = plan(cluster([pod("a")]), NO_CA)
    assert [m.node for m in result.moves] == ["old"]
    move = result.moves[0]
    assert move.placements == (("a", "new"),)
    # without: 125 W × 3600 s + idle 100 W × 600 s; with: idle 100 W × 600 s now; moved: 12.5 W × 3600 s
    assert move.saving_joules == pytest.approx(125 * 3600 + 100 * 600 - 100 * 600 - 12.5 * 3600)
    assert move.cost_joules == pytest.approx(12.5 * 10)  # the replacement's 10 s start
    assert move.horizon_seconds == 3600
    assert move.watts_saved == pytest.approx(125 - 12.5)
    # Karpenter's score: (112.5 / 225 W) / (2 / (2 + 5))
    assert move.score == pytest.approx((112.5 / 225) / (2 / 7))


def test_a_job_pod_pays_for_the_work_it_loses() -> None:
    result = plan(cluster([pod("a", restarts=True, run=1800.0)]), NO_CA)
    assert result.moves[0].cost_joules == pytest.approx(12.5 * (10 + 1800))


def test_a_node_under_cluster_autoscalers_threshold_is_left_to_it() -> None:
    """The pod requests 1 of 4 cores, under CA's 0.5: CA drains and removes the node itself."""
    result = plan(cluster([pod("a")]), RebalancerConfig())
    assert not result.moves
    assert next(s.reason for s in result.skipped if s.node == "old") == "autoscaler"


def test_cluster_autoscaler_taking_the_node_later_shortens_the_horizon() -> None:
    """a (2 cores, 3600 s left) and b (1 core, 1000 s) request 3 of 4 cores; when b ends the
    node is at CA's 0.5 and CA removes it 600 s later: the horizon is 1600 s, not 3600 s."""
    result = plan(cluster([pod("a", 2.0), pod("b", 1.0, 1000.0)]), RebalancerConfig())
    move = result.moves[0]
    assert move.horizon_seconds == 1600
    without = 175 * 1000 + 150 * 600  # u 0.75, then 0.5 once b ends; CA takes it at 1600 s
    moved = 25 * 1600 + 12.5 * 1000  # a adds 25 W on new (0.5 → 0.75), b 12.5 W (→ 0.875)
    assert move.saving_joules == pytest.approx(without - 100 * 600 - moved)


def test_a_saving_under_the_margin_is_not_worth_it() -> None:
    # 1 s left: saves 125 + 100·600 − 100·600 − 12.5 = 112.5 J < (1 + 1) × 125 J
    result = plan(cluster([pod("a", remaining=1.0)]), NO_CA)
    assert not result.moves
    skip = next(s for s in result.skipped if s.node == "old")
    assert skip.reason == "not_worth" and skip.move is not None
    assert skip.move.saving_joules == pytest.approx(112.5)


def test_a_score_under_one_over_k_is_rejected() -> None:
    """A big empty node's 750 W in the cluster's total: (112.5 / 975) / (2 / 8) = 0.46 < 0.5."""
    nodes = cluster([pod("a")]) + [node("big", 24, PowerCurve.linear(500.0, 1000.0), [], 0.5)]
    result = plan(nodes, NO_CA)
    skip = next(s for s in result.skipped if s.node == "old")
    assert skip.reason == "score" and skip.move is not None
    assert skip.move.score == pytest.approx((112.5 / 975) / (2 / 8))


@pytest.mark.parametrize(
    "source_pods,source,reason",
    [
        ([pod("a")], {"utilization": None}, "telemetry"),
        ([pod("a")], {"curve": None}, "curve"),
        ([pod("a", remaining=None)], {}, "prediction"),
        ([pod("a", fallback=True)], {}, "prediction_fallback"),
        ([pod("a", blocker="bare")], {}, "bare"),
        ([pod("a", blocker="local_storage")], {}, "local_storage"),
        ([pod("a", blocker="not_safe_to_evict")], {}, "not_safe_to_evict"),
        ([pod("a", workload="w", pdb_room=0)], {}, "pdb"),
        ([pod("a")], {"schedulable": False}, "not_schedulable"),
        ([pod("a")], {"cooling": True}, "cooldown"),
        ([], {}, "no_pods"),
    ],
)
def test_doubt_and_protected_pods_leave_the_node_alone(
    source_pods: list[PodView], source: dict[str, object], reason: str
) -> None:
    nodes = cluster(source_pods)
    nodes[0] = replace(nodes[0], **source)  # type: ignore[arg-type]
    result = plan(nodes, NO_CA)
    assert not result.moves
    assert next(s.reason for s in result.skipped if s.node == "old") == reason


def test_no_eviction_without_a_destination_that_is_known_and_more_efficient() -> None:
    nodes = cluster([pod("a")])
    for change in ({"utilization": None}, {"curve": None}, {"schedulable": False},
                   {"curve": PowerCurve.linear(600.0, 700.0)}):
        changed = [nodes[0], replace(nodes[1], **change)]  # type: ignore[arg-type]
        result = plan(changed, NO_CA)
        assert not result.moves, change
        assert next(s.reason for s in result.skipped if s.node == "old") == "no_room"


def test_an_empty_node_is_no_destination() -> None:
    """Pods never revive a node cluster-autoscaler is about to remove."""
    nodes = [node("old", 4, OLD, [pod("a")]), node("new", 8, NEW, [], 0.0)]
    assert not plan(nodes, NO_CA).moves


def test_a_pdb_with_room_for_all_the_nodes_pods_allows_the_move() -> None:
    pods = [pod("a", 0.5, workload="w", pdb_room=2), pod("b", 0.5, workload="w", pdb_room=2)]
    assert plan(cluster(pods), NO_CA).moves
    short = [replace(p, pdb_room=1) for p in pods]
    assert next(s.reason for s in plan(cluster(short), NO_CA).skipped if s.node == "old") == "pdb"


def test_the_round_budgets() -> None:
    """Two inefficient sources; one node per round by default, the better score first; an
    eviction budget smaller than a node's pods stops its move."""
    nodes = cluster([pod("a")]) + [node("old2", 4, OLD, [pod("b", 0.5), pod("c", 0.5)])]
    result = plan(nodes, NO_CA)
    assert [m.node for m in result.moves] == ["old"]
    assert next(s.reason for s in result.skipped if s.node == "old2") == "budget"
    both = plan(nodes, replace(NO_CA, max_nodes_per_interval=2, max_evictions_per_interval=2))
    assert [m.node for m in both.moves] == ["old"]  # old2's two pods would pass the budget
    roomy = plan(nodes, replace(NO_CA, max_nodes_per_interval=2, max_evictions_per_interval=3))
    assert sorted(m.node for m in roomy.moves) == ["old", "old2"]


def test_two_moves_do_not_take_the_same_room() -> None:
    """`new` has room for 1 more core under u = 1: only one of two 1-core sources moves."""
    new = node("new", 8, NEW, [pod(f"n{i}") for i in range(7)])
    nodes = [node("old", 4, OLD, [pod("a")]), node("old2", 4, OLD, [pod("b")]), new]
    result = plan(nodes, replace(NO_CA, max_nodes_per_interval=2))
    assert len(result.moves) == 1
    assert next(s.reason for s in result.skipped if s.node == "old2") == "no_room"


def test_source_energy_follows_the_pods_ends() -> None:
    # u 0.5 → 0.25 at 100 s → 0 at 300 s, horizon 400 s, on a 4-core 100–200 W node
    energy = source_energy(OLD, 4, 0.5, [(100.0, 1.0), (300.0, 1.0)], 400.0)
    assert energy == pytest.approx(150 * 100 + 125 * 200 + 100 * 100)
    assert source_energy(OLD, 4, 0.5, [(100.0, 1.0), (300.0, 1.0)], 50.0) == pytest.approx(150 * 50)


def test_takeover_time() -> None:
    ends = [(100.0, 0.25, 0.1), (300.0, 0.25, 0.1)]
    assert takeover_time(ends, 0.75, 0.2, 0.5) == 100.0
    assert takeover_time(ends, 0.75, 0.6, 0.5) == 100.0  # memory 0.5 then: at the threshold
    assert takeover_time(ends, 0.75, 0.7, 0.5) == 300.0
    assert takeover_time(ends, 0.75, 0.9, 0.5) is None  # memory stays above 0.5
    assert takeover_time(ends, 0.4, 0.1, 0.5) == 0.0
    assert takeover_time(ends, 0.75, 0.2, None) is None


def test_shares_and_freshness() -> None:
    assert cpu_shares(2.0, [1000, 0, 900]) == pytest.approx([1.0, 0.1, 0.9])
    state = node("old", 4, OLD, [pod("a")]).state
    t = NodeTelemetry("old", 100.0, utilization=0.25, cores=4)
    assert fresh_utilization(replace(state, telemetry=t), 110.0, 30.0) == 0.25
    assert fresh_utilization(replace(state, telemetry=t, cpu_since_sample_cores=1.0), 110.0, 30.0) == 0.5
    assert fresh_utilization(replace(state, telemetry=t), 131.0, 30.0) is None  # stale
    assert fresh_utilization(replace(state, telemetry=t), 96.0, 30.0) == 0.25  # clocks' skew
    assert fresh_utilization(replace(state, telemetry=t), 90.0, 30.0) is None  # from the future
    assert fresh_utilization(replace(state, telemetry=None), 110.0, 30.0) is None
    assert fresh_utilization(replace(state, telemetry=replace(t, utilization=None)), 110.0, 30.0) is None


KARPENTER = f"kubernetes-sigs/karpenter {KARPENTER_COMMIT[:8]} designs/balanced-consolidation.md"
EXAMPLES = [  # "Examples": (savings, nodepool cost, move disruption, nodepool disruption, score)
    ("Oversized Node (approved)", 7.26, 58.08, 3, 80, 3.33),
    ("Spare Capacity Delete (approved)", 4.84, 58.08, 4, 80, 1.67),
    ("Marginal Move (rejected)", 2.42, 58.08, 8, 80, 0.42),
    ("Uniform Pool Replace (approved)", 2.42, 48.40, 8, 80, 0.50),
    ("Scale Invariance", 7.26, 580.80, 3, 800, 3.33),
    ("Well-Packed Node (rejected)", 0.0, 58.08, 10, 80, 0.0),
]


@pytest.mark.parametrize("name,savings,total,disruption,all_disruption,score", EXAMPLES,
                         ids=[f"{KARPENTER}: {e[0]}" for e in EXAMPLES])
def test_karpenter_balanced_examples(name: str, savings: float, total: float, disruption: float,
                                     all_disruption: float, score: float) -> None:
    got = balanced_score(savings, total, disruption, all_disruption)
    assert got == pytest.approx(score, abs=0.005)
    assert (got >= 0.5) == ("approved" in name or name == "Scale Invariance")


def test_karpenter_eviction_cost() -> None:
    """pkg/utils/disruption/disruption.go EvictionCost: 1 by default, priority / 2^25 and
    deletion cost / 2^27 added, clamped to [−10, 10]; a node counts 1 plus its pods at ≥ 0."""
    assert eviction_cost(None, None) == 1.0
    assert eviction_cost(2**25, None) == 2.0
    assert eviction_cost(None, -(2**27)) == 0.0
    assert eviction_cost(2_000_001_000, None) == 10.0
    assert eviction_cost(None, -2147483647) == -10.0
    assert node_disruption_cost([1.0, -10.0, 2.0]) == 4.0
    annotations = (("controller.kubernetes.io/pod-deletion-cost", "134217728"),)
    assert pod_eviction_cost(annotations, None) == 2.0
    assert pod_eviction_cost((("controller.kubernetes.io/pod-deletion-cost", "x"),), None) == 1.0
    assert pod_eviction_cost((("controller.kubernetes.io/pod-deletion-cost", "nan"),), None) == 1.0
