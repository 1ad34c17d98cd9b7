"""The energy-aware node-group choice (scheduler/decisions/expansion.py), on hand-computed cases."""

from __future__ import annotations

import pytest

from common.curves import PowerCurve
from scheduler.decisions.expansion import (
    CURVE_FROM_CONFIG,
    CURVE_FROM_LABEL,
    CURVE_FROM_RUNNING,
    GroupOption,
    best_options,
    expected_watts,
    option_cost,
    rank_options,
    resolve_curve,
)
from scheduler.domain.model import NodeInfo, PodInfo, Resources

GIB = 1024**3


def template(group: str, cores: float, memory_gib: float = 64, pods: int = 110, **labels: str) -> NodeInfo:
    return NodeInfo(
        name=f"template-{group}",
        allocatable=Resources(
            cpu_millicores=round(cores * 1000), memory_bytes=round(memory_gib * GIB), pods=pods
        ),
        labels=tuple(sorted(labels.items())),
    )


def pod(i: int, cpu_cores: float, memory_gib: float = 0.0) -> PodInfo:
    return PodInfo(
        "default",
        f"p{i}",
        f"u{i}",
        Resources(cpu_millicores=round(cpu_cores * 1000), memory_bytes=round(memory_gib * GIB), pods=1),
    )


def option(group: str, count: int, pods: list[PodInfo], node: NodeInfo) -> GroupOption:
    return GroupOption(group, count, tuple(pods), node)


LINEAR_BIG = PowerCurve.linear(100, 300)  # 10 cores
LINEAR_SMALL = PowerCurve.linear(30, 60)  # 2 cores


def test_expected_watts_spreads_the_requests_over_the_new_nodes() -> None:
    # 4 pods × 2.5 cores on 2 nodes of 10 cores: u = 10 / 20 = 0.5, 2 × (100 + 200 × 0.5) = 400 W.
    opt = option("big", 2, [pod(i, 2.5) for i in range(4)], template("big", 10))
    assert expected_watts(opt, LINEAR_BIG) == pytest.approx(400.0)


def test_a_pod_without_a_cpu_request_counts_100_millicores() -> None:
    # u = 0.1 / 10 = 0.01: 100 + 200 × 0.01 = 102 W.
    opt = option("big", 1, [pod(0, 0.0)], template("big", 10))
    assert expected_watts(opt, LINEAR_BIG) == pytest.approx(102.0)


def test_demand_past_the_cores_costs_the_last_slope() -> None:
    # 12 cores on one 10-core node: u = 1.2; 300 + 200 W per unit × 0.2 = 340 W.
    opt = option("big", 1, [pod(0, 12.0)], template("big", 10))
    assert expected_watts(opt, LINEAR_BIG) == pytest.approx(340.0)


def test_the_price_per_core_is_the_amortized_rate_up_to_the_reference_load() -> None:
    # big: P(v)/v = 100/v + 200 falls with v, so its least value up to 0.5 is at 0.5:
    #      200 / 0.5 = 400 W per unit of load, over 10 cores = 40 W per core.
    # small: (30 + 30 × 0.5) / 0.5 = 90 W per unit, over 2 cores = 45 W per core.
    big = option("big", 1, [pod(0, 1.0)], template("big", 10))
    small = option("small", 1, [pod(0, 1.0)], template("small", 2))
    cost_big = option_cost(big, LINEAR_BIG)
    cost_small = option_cost(small, LINEAR_SMALL)
    assert cost_big.watts_per_core == pytest.approx(40.0)
    assert cost_big.price_watts == pytest.approx(40.0)
    assert cost_big.expected_watts == pytest.approx(120.0)  # 100 + 200 × 0.1
    assert cost_small.watts_per_core == pytest.approx(45.0)
    assert cost_small.expected_watts == pytest.approx(45.0)  # 30 + 30 × 0.5
    # The greedy order (expected watts) would open the small node; the amortized price opens
    # the node that serves load more cheaply once the pods that follow share it.
    assert best_options([small, big], {"big": LINEAR_BIG, "small": LINEAR_SMALL}) == [big]


def test_a_reference_load_of_the_pods_own_load_is_the_greedy_order() -> None:
    # With u_ref at most u, v_up = u: big 120 / 0.1 / 10 = 120 W per core, small 45.
    big = option("big", 1, [pod(0, 1.0)], template("big", 10))
    small = option("small", 1, [pod(0, 1.0)], template("small", 2))
    curves = {"big": LINEAR_BIG, "small": LINEAR_SMALL}
    assert option_cost(big, LINEAR_BIG, reference_utilization=0.1).watts_per_core == pytest.approx(120.0)
    assert best_options([big, small], curves, reference_utilization=0.1) == [small]


def test_a_node_opened_for_memory_is_not_priced_as_if_cpu_filled_it() -> None:
    # The pod takes all 64 GiB of the big node: s = 1, v_up = u = 0.1 → 120 W per core; the
    # small node (16 GiB, s = 0.5 of memory, u = 0.5 → v_up = min(0.5, 1.0) = 0.5) → 45 W.
    big = option("big", 1, [pod(0, 1.0, memory_gib=64)], template("big", 10, memory_gib=64))
    small = option("small", 1, [pod(0, 1.0, memory_gib=8)], template("small", 2, memory_gib=16))
    assert option_cost(big, LINEAR_BIG).watts_per_core == pytest.approx(120.0)
    assert best_options([big, small], {"big": LINEAR_BIG, "small": LINEAR_SMALL}) == [small]


def test_heterogeneous_scenario_curves_one_core_pod() -> None:
    # rl/scenarios/heterogeneous.yaml. x3250-x3470 (8 cores): P(v)/v at 0.1 … 0.5 is
    # 467, 261.5, 193, 163.5, 146 → 146 / 8 = 18.25 W per core; x3550-x5675 (24 cores):
    # 980, 545, 393.3, 320, 280 → 280 / 24 = 11.67 W per core. Expected watts right after the
    # scale-up favour the small x3250 (48.1 W at u = 1/8 against 74.9 W at u = 1/24).
    x3250 = PowerCurve.from_points([41.6, 46.7, 52.3, 57.9, 65.4, 73, 80.7, 89.5, 99.6, 105, 113])
    x5675 = PowerCurve.from_points([58.4, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222])
    small = option("x3250-x3470", 1, [pod(0, 1.0)], template("x3250-x3470", 8, memory_gib=8))
    big = option("x3550-x5675", 1, [pod(0, 1.0)], template("x3550-x5675", 24, memory_gib=16))
    ranked = rank_options([small, big], {"x3250-x3470": x3250, "x3550-x5675": x5675})
    assert [c.option.group_id for c in ranked] == ["x3550-x5675", "x3250-x3470"]
    assert ranked[0].watts_per_core == pytest.approx(140 / 0.5 / 24)
    assert ranked[1].watts_per_core == pytest.approx(73 / 0.5 / 8)
    assert ranked[1].expected_watts == pytest.approx(46.7 + 0.25 * 5.6)
    assert ranked[0].expected_watts == pytest.approx(58.4 + (98 - 58.4) * (1 / 24) / 0.1)


def test_options_serving_different_pods_compare_per_core() -> None:
    # big serves 4 cores of pods, small only 1: in total big costs more (4 × 40 = 160 W against
    # 45 W) but per core it is cheaper, and it is the one chosen.
    big = option("big", 1, [pod(i, 1.0) for i in range(4)], template("big", 10))
    small = option("small", 1, [pod(0, 1.0)], template("small", 2))
    ranked = rank_options([small, big], {"big": LINEAR_BIG, "small": LINEAR_SMALL})
    assert ranked[0].option is big
    assert ranked[0].price_watts == pytest.approx(160.0)


def test_ties_go_to_fewer_watts_then_the_group_id() -> None:
    # Same curve and node: equal per-core price. 2 nodes at u = 0.1 (240 W) lose to 1 node at
    # u = 0.2 (140 W); between identical options the smaller group id wins.
    pods = [pod(0, 1.0), pod(1, 1.0)]
    one = option("b-one", 1, pods, template("x", 10))
    two = option("a-two", 2, pods, template("x", 10))
    same = option("a-same", 1, pods, template("x", 10))
    curves = {"b-one": LINEAR_BIG, "a-two": LINEAR_BIG, "a-same": LINEAR_BIG}
    assert best_options([two, one], curves) == [one]
    assert best_options([one, same], curves) == [same]


def test_unknown_curves_never_win_and_all_unknown_returns_every_option() -> None:
    big = option("big", 1, [pod(0, 1.0)], template("big", 10))
    mystery = option("mystery", 1, [pod(0, 1.0)], template("mystery", 10))
    assert best_options([mystery, big], {"big": LINEAR_SMALL}) == [big]
    assert best_options([mystery, big], {}) == [mystery, big]
    assert best_options([mystery, big], {"mystery": None, "big": None}) == [mystery, big]
    assert best_options([], {"big": LINEAR_BIG}) == []


def test_a_template_without_cpu_is_unknown_not_an_error() -> None:
    no_cpu = option("no-cpu", 1, [pod(0, 1.0)], template("no-cpu", 0))
    big = option("big", 1, [pod(0, 1.0)], template("big", 10))
    assert best_options([no_cpu, big], {"no-cpu": LINEAR_SMALL, "big": LINEAR_BIG}) == [big]
    assert best_options([no_cpu], {"no-cpu": LINEAR_SMALL}) == [no_cpu]
    with pytest.raises(ValueError, match="no allocatable CPU"):
        expected_watts(no_cpu, LINEAR_SMALL)


@pytest.mark.parametrize("count", [0, -1])
def test_a_node_count_below_one_is_an_error(count: int) -> None:
    bad = option("big", count, [pod(0, 1.0)], template("big", 10))
    with pytest.raises(ValueError, match="node_count"):
        best_options([bad], {"big": LINEAR_BIG})


def test_curve_resolution_order() -> None:
    node = template("ng-1", 8, **{"node.kubernetes.io/instance-type": "m5.2xlarge"})
    by_id = PowerCurve.linear(1, 2)
    by_type = PowerCurve.linear(3, 4)
    running = PowerCurve.linear(5, 6)
    exported = {("node.kubernetes.io/instance-type", "m5.2xlarge"): running}
    assert resolve_curve("ng-1", node, {"ng-1": by_id, "m5.2xlarge": by_type}, running=exported) == (
        by_id,
        CURVE_FROM_CONFIG,
    )
    assert resolve_curve("ng-1", node, {"m5.2xlarge": by_type}, running=exported) == (
        by_type,
        CURVE_FROM_LABEL,
    )
    assert resolve_curve("ng-1", node, {}, running=exported) == (running, CURVE_FROM_RUNNING)
    assert resolve_curve("ng-1", node, {}) is None
    # Only the configured label keys name curves.
    assert resolve_curve("ng-1", node, {"m5.2xlarge": by_type}, label_keys=("other",)) is None
