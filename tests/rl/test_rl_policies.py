"""Policy formulas against kube-scheduler's, PEAKS' and Trimaran's, on table cases."""

from __future__ import annotations

import math
import random

import pytest

from agent.curves import PowerCurve
from rl.peaks import (
    PeaksPowerModel,
    PeaksScorer,
    fit_power_model,
    normalize,
    pod_cpu_millicores,
    power_jump,
    raw_score,
)
from rl.policies import BUILTIN_POLICIES, RoundRobinPolicy, ScorerPolicy, make_policy
from rl.scenario import NodeSpec
from rl.trimaran import (
    TargetLoadPackingArgs,
    TargetLoadPackingScorer,
    go_round,
    node_score,
    predicted_millicores,
)
from scheduler.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources, ScoreResult

GIB = 2**30


def make_pod(cpu_millicores: int, memory_gib: float = 1.0) -> PodInfo:
    return PodInfo("ns", "p", "uid", Resources(cpu_millicores, round(memory_gib * GIB), 1))


def make_node(
    name: str,
    cores: float,
    memory_gib: float,
    requested_mc: int = 0,
    requested_gib: float = 0.0,
    utilization: float | None = 0.0,
    since_sample_cores: float = 0.0,
) -> NodeState:
    info = NodeInfo(name, Resources(round(cores * 1000), round(memory_gib * GIB), 110))
    telemetry = None
    if utilization is not None:
        telemetry = NodeTelemetry(
            name, 0.0, watts=100.0, source="estimated", utilization=utilization, cores=cores
        )
    return NodeState(
        info,
        requested=Resources(requested_mc, round(requested_gib * GIB), 1),
        telemetry=telemetry,
        cpu_since_sample_cores=since_sample_cores,
        pod_count=1 if requested_mc else 0,
    )


# --- kube-scheduler default / MostAllocated --------------------------------------------------


def test_default_policy_follows_kube_scheduler_totals():
    # Pod 1 core / 1 GiB.
    # a (4 cores, 8 GiB, 1 core + 2 GiB requested): LeastAllocated cpu (4000−2000)·100//4000 = 50,
    #   memory (8−3)/8 → 62, (50+62)//2 = 56; Balanced: |0.5 − 0.375|/2 → int(93.75) = 93: 149.
    # b (8 cores, 8 GiB, 6 cores + 1 GiB): cpu 12, memory 75 → 43; Balanced |0.875−0.25|/2
    #   → int(68.75) = 68: 111.  kube-scheduler picks a.
    pod = make_pod(1000, 1.0)
    nodes = [make_node("b", 8, 8, 6000, 1.0), make_node("a", 4, 8, 1000, 2.0)]
    policy = make_policy("default", [])
    policy.reset([], random.Random(0))
    assert policy.choose(pod, nodes, 0.0) == "a"


def test_mostallocated_packs_the_fuller_node():
    # a empty (4 cores, 8 GiB): MostAllocated cpu 25, memory 12 → 18; Balanced |0.25−0.125|/2
    #   → 93: 111.  b (4 cores, 8 GiB, 2 cores + 2 GiB): cpu 75, memory 37 → 56; Balanced
    #   |0.75 − 0.375|/2 → 81: 137.  MostAllocated picks b; LeastAllocated picks a.
    pod = make_pod(1000, 1.0)
    nodes = [make_node("a", 4, 8), make_node("b", 4, 8, 2000, 2.0)]
    packing = make_policy("mostallocated", [])
    spreading = make_policy("default", [])
    for policy in (packing, spreading):
        policy.reset([], random.Random(0))
    assert packing.choose(pod, nodes, 0.0) == "b"
    assert spreading.choose(pod, nodes, 0.0) == "a"


def test_default_breaks_ties_at_random():
    pod = make_pod(500)
    nodes = [make_node(f"n{i}", 4, 8) for i in range(4)]
    chosen = set()
    for seed in range(40):
        policy = make_policy("default", [])
        policy.reset([], random.Random(seed))
        chosen.add(policy.choose(pod, nodes, 0.0))
    assert chosen == {"n0", "n1", "n2", "n3"}


def test_roundrobin_cycles_over_feasible_nodes():
    specs = [NodeSpec(f"n{i}", "g", 4, 8, PowerCurve.linear(1, 2)) for i in range(3)]
    states = [make_node(f"n{i}", 4, 8) for i in range(3)]
    policy = RoundRobinPolicy()
    policy.reset(specs, random.Random(0))
    pod = make_pod(100)
    assert [policy.choose(pod, states, 0.0) for _ in range(4)] == ["n0", "n1", "n2", "n0"]
    # n1 infeasible: skip to n2, then wrap to n0.
    assert policy.choose(pod, [states[0], states[2]], 0.0) == "n2"
    assert policy.choose(pod, [states[0], states[2]], 0.0) == "n0"


# --- Trimaran TargetLoadPacking ----------------------------------------------------------------

TLP = TargetLoadPackingArgs()  # target 40 %


@pytest.mark.parametrize(
    ("utilization_pct", "pod_mc", "missing_mc", "expected"),
    [
        (0.0, 0, 0, 40),  # scheduler-plugins "new node": empty pod on an idle node → T
        (50.0, 0, 0, 33),  # "hot node": T + 10 % → round(40 · 50 / 60) = 33
        (30.0, 1000, 0, 0),  # "excess utilization": 130 % → min score
        (None, 0, 0, 0),  # no metric → min score
        (20.0, 0, 0, 70),  # (60 · 20 / 40) + 40
        (40.0, 0, 0, 100),  # at the target: the best score
        (70.0, 0, 0, 20),  # 40 · 30 / 60
        (100.0, 0, 0, 0),
        (10.0, 200, 100, 100),  # U = 10 + 20 (pod) + 10 (bound since the sample) = 40
        (10.0, 400, 100, 27),  # U = 60 → round(40 · 40 / 60) = round(26.67)
    ],
)
def test_target_load_packing_score_table(utilization_pct, pod_mc, missing_mc, expected):
    assert node_score(utilization_pct, 1000.0, pod_mc, missing_mc, TLP) == expected


def test_target_load_packing_prediction_and_rounding():
    assert predicted_millicores(1000, 1000, TLP) == 1000  # a limit wins
    assert predicted_millicores(1000, None, TLP) == 1500  # request × 1.5
    assert predicted_millicores(0, None, TLP) == 1000  # best effort: the default
    assert [go_round(x) for x in (37.5, 2.5, -2.5, 2.49)] == [38, 3, -3, 2]


def test_target_load_packing_scorer_on_node_states():
    # 4 cores, 25 % used (1000 m); pod requests 500 m → 750 m predicted:
    # U = 100 · 1750 / 4000 = 43.75 > 40 → 40 · 56.25 / 60 = 37.5 → 38.
    scorer = TargetLoadPackingScorer()
    [result] = scorer.score(make_pod(500), [make_node("a", 4, 8, utilization=0.25)], 0.0)
    assert result.score == 38
    # 500 m requested since the sample is predicted at 750 m too: U = 62.5 → 25.
    [result] = scorer.score(
        make_pod(500), [make_node("a", 4, 8, utilization=0.25, since_sample_cores=0.5)], 0.0
    )
    assert result.score == 25


# --- PEAKS -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([0, 100], [100, 0]),  # scheduler-plugins TestNormalizeScore {min, max}
        ([0, 0], [0, 0]),  # {min, min}: untouched
        ([100, 100], [100, 100]),  # {max, max}
        ([10, 20, 40], [100, 67, 0]),  # 100 − int(33.3)
    ],
)
def test_peaks_normalize_table(raw, expected):
    assert normalize(raw) == expected


def test_peaks_power_jump_and_raw_score():
    model = PeaksPowerModel(50.0, 10.0, 0.02)
    jump = power_jump(20.0, 45.0, model)
    assert jump == pytest.approx(10 * (math.exp(0.9) - math.exp(0.4)))
    # 4 cores at 20 %, pod 1000 m → 45 %.
    assert raw_score(20.0, 4000.0, 1000, model) == int(jump * 1e15)
    assert raw_score(90.0, 4000.0, 1000, model) == 0  # 115 % → MinNodeScore
    assert raw_score(None, 4000.0, 1000, model) == 0  # no metric → MinNodeScore
    assert pod_cpu_millicores(make_pod(0)) == 1000 and pod_cpu_millicores(make_pod(250)) == 250


def test_peaks_scorer_prefers_small_jump_and_reproduces_overflow_quirk():
    models = {
        "cheap": PeaksPowerModel(50.0, 5.0, 0.01),
        "dear": PeaksPowerModel(50.0, 20.0, 0.01),
        "full": PeaksPowerModel(50.0, 5.0, 0.01),
    }
    scorer = PeaksScorer(models)
    nodes = [
        make_node("cheap", 4, 8, utilization=0.1),
        make_node("dear", 4, 8, utilization=0.1),
        make_node("full", 4, 8, utilization=0.9),  # + 25 % > 100 % → raw 0 → best after normalize
    ]
    scores = {r.node: r.score for r in scorer.score(make_pod(1000), nodes, 0.0)}
    assert scores["dear"] == 0
    assert scores["full"] == 100
    assert 0 < scores["cheap"] < 100


def test_peaks_fit_recovers_an_exponential_curve():
    truth = PeaksPowerModel(80.0, 20.0, 0.015)
    curve = PowerCurve.from_points([truth.watts(x) for x in range(0, 101, 10)])
    fitted = fit_power_model(curve)
    for x in range(0, 101, 10):
        assert fitted.watts(x) == pytest.approx(truth.watts(x), rel=1e-4)
    concave = fit_power_model(PowerCurve.fan(100.0, 250.0, 1.4))
    assert concave.k1 < 0 and concave.k2 < 0  # a concave curve fits with both negative
    assert concave.watts(100) == pytest.approx(250.0, rel=0.02)


# --- scorer hook -------------------------------------------------------------------------------


class PreferNamed:
    name = "prefer"

    def __init__(self, favourite: str) -> None:
        self.favourite = favourite

    def score(self, pod, nodes, now):
        return [
            ScoreResult(n.info.name, 90.0 if n.info.name == self.favourite else 10.0) for n in nodes
        ]


def make_prefer_b(nodes):
    return PreferNamed("b")


def test_any_scorer_is_a_policy():
    policy = ScorerPolicy(PreferNamed("b"))
    policy.reset([], random.Random(0))
    nodes = [make_node("a", 4, 8), make_node("b", 4, 8)]
    assert policy.choose(make_pod(100), nodes, 0.0) == "b"
    loaded = make_policy(f"py:{__name__}:make_prefer_b", [])
    loaded.reset([], random.Random(0))
    assert loaded.choose(make_pod(100), nodes, 0.0) == "b"


def test_every_builtin_policy_builds_and_unknown_names_fail():
    specs = [NodeSpec("a", "g", 4, 8, PowerCurve.linear(50, 100))]
    for name in BUILTIN_POLICIES:
        assert make_policy(name, specs).name == name
    with pytest.raises(ValueError):
        make_policy("nope", specs)
    with pytest.raises(ValueError):
        make_policy("py:only-module", specs)


# --- the policies run the scheduler's code, not a copy of it --------------------------------


def test_default_policy_scores_with_kube_scoring(monkeypatch: pytest.MonkeyPatch):
    """`default` calls scheduler.kube_scoring: tilting its BalancedAllocation towards the node
    LeastAllocated ranks lower moves the choice there."""
    import scheduler.kube_scoring as kube_scoring

    pod = make_pod(1000, 1.0)
    nodes = [make_node("a", 4, 8), make_node("b", 4, 8, 2000, 2.0)]

    def choice() -> str:
        policy = make_policy("default", [])
        policy.reset([], random.Random(0))
        return policy.choose(pod, nodes, 0.0)

    assert choice() == "a"

    def favour_b(pod_info: PodInfo, node: NodeState) -> int:
        return 1000 if node.info.name == "b" else 0

    monkeypatch.setattr(kube_scoring, "balanced_allocation", favour_b)
    assert choice() == "b"


def test_heuristic_policy_is_the_schedulers_heuristic_scorer(monkeypatch: pytest.MonkeyPatch):
    from scheduler.scorer import HeuristicScorer

    specs = [NodeSpec(n, "g", 4, 8, PowerCurve.linear(50, 100)) for n in ("a", "b", "c")]
    states = [make_node(n, 4, 8) for n in ("a", "b", "c")]
    seen: list[tuple[str, ...]] = []

    def prefer_c(self, pod, nodes, now):
        seen.append(tuple(n.info.name for n in nodes))
        return [ScoreResult(n.info.name, 99.0 if n.info.name == "c" else 1.0) for n in nodes]

    monkeypatch.setattr(HeuristicScorer, "score", prefer_c)
    policy = make_policy("heuristic", specs)
    policy.reset(specs, random.Random(0))
    assert policy.choose(make_pod(500), states, 0.0) == "c"
    assert seen == [("a", "b", "c")]  # one batched call with every candidate
