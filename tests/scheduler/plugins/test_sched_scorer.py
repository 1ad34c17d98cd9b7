"""Table-driven tests of the heuristic energy scorer."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from common.curves import PowerCurve
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources
from scheduler.extender.state import Prepared
from scheduler.plugins.energy import EnergyPlugin, NodeHistory
from tests.helpers.energy_results import Result, results

NOW = 1_000_000.0
LINEAR_100_300 = PowerCurve.linear(100.0, 300.0).as_points()  # 200 W per unit of utilization
# SPECpower_ssj2008 curves of rl/scenarios/heterogeneous.yaml (W at 0 %, 10 % … 100 %).
WESTMERE = (58.4, 98.0, 109.0, 118.0, 128.0, 140.0, 153.0, 170.0, 189.0, 205.0, 222.0)  # 24 CPUs
X3470 = (41.6, 46.7, 52.3, 57.9, 65.4, 73.0, 80.7, 89.5, 99.6, 105.0, 113.0)  # 8 CPUs


def pod(cpu: str | None = "2") -> PodInfo:
    requests = {"cpu": cpu} if cpu is not None else {}
    return pod_info_from_k8s(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
        }
    )


def node(
    name: str = "n1",
    cores: float = 10.0,
    utilization: float | None = 0.5,
    age: float = 1.0,
    points: tuple[float, ...] | None = LINEAR_100_300,
    watts: float | None = 200.0,
    since: float = 0.0,
    pods: int = 3,
    telemetry: bool = True,
) -> NodeState:
    info = NodeInfo(name, Resources(cpu_millicores=int(cores * 1000)))
    tel = (
        NodeTelemetry(
            node=name,
            sample_time=NOW - age,
            watts=watts,
            source="rapl" if watts is not None else "none",
            utilization=utilization,
            cores=cores,
            curve_points=points,
        )
        if telemetry
        else None
    )
    return NodeState(info=info, telemetry=tel, cpu_since_sample_cores=since, pod_count=pods)


@dataclass
class Case:
    id: str
    node: NodeState
    pod_cpu: str | None = "2"
    consolidation: bool = False
    ref: float = 100.0
    score: float = 0.0
    delta: float | None = None
    reason: str = "ok"
    curves: dict[str, PowerCurve] = field(default_factory=dict)
    reference_load: float = 0.5  # consolidation_utilization


CASES = [
    # 2 cores of 10 → Δu 0.2 → 40 W on a 100→300 W line; 100 × (1 − 40/100) = 60.
    Case("fresh linear", node(), score=60.0, delta=40.0),
    # Without fresh telemetry (docs/scheduler.md, "Missing telemetry never wins"): priced at the
    # node's worst state with its last known curve; a line's marginal is the same everywhere.
    Case("stale → its curve at the worst utilization", node(age=31.0), score=60.0, reason="stale"),
    Case("just fresh at the limit", node(age=30.0), score=60.0, delta=40.0),
    Case("no telemetry, no curve → the floor", node(telemetry=False), score=0.0, reason="missing"),
    Case("no telemetry, a configured curve → its worst marginal", node(telemetry=False),
         curves={"n1": PowerCurve.linear(50.0, 100.0)}, score=90.0, reason="missing"),
    Case("no utilization → the exported curve at the worst", node(utilization=None), score=60.0,
         reason="missing"),
    Case("no curve, no history → the floor", node(points=None), score=0.0, reason="no_curve"),
    # The steep part of a curve prices a node whose load is unknown: 0.2 of the 50 % → 70 %
    # segment of this curve is the costliest step, 80 W.
    Case("stale, points curve → its steepest step", node(age=31.0, utilization=0.0,
         points=(100, 110, 120, 130, 140, 150, 190, 230, 270, 310, 350)), score=20.0, reason="stale"),
    # With consolidation the worst state is empty: the pod's share, 0.2 × P(0.5)/0.5 = 80 W.
    Case("consolidation: stale and running → priced as empty", node(age=31.0, pods=3),
         consolidation=True, ref=200.0, score=60.0, reason="stale"),
    Case(
        "configured curve used when the agent exports none",
        node(points=None),
        curves={"n1": PowerCurve.linear(50.0, 100.0)},  # 50 W per unit → 10 W
        score=90.0,
        delta=10.0,
    ),
    # Points curve: steep from 50 % on. u = 0.5 → 0.7 crosses two 40 W steps.
    Case(
        "points curve",
        node(points=(100, 110, 120, 130, 140, 150, 190, 230, 270, 310, 350)),
        score=20.0,
        delta=80.0,
    ),
    # Assumed pods: 3 cores since the sample → u 0.8; same line, ΔP still 40 W (linear).
    Case("assumed pods on a linear curve", node(since=3.0), score=60.0, delta=40.0),
    # ... but on a curve that is flat until 80 % and steep after, assumed pods matter.
    Case(
        "assumed pods move u onto the steep part",
        node(points=(100,) * 9 + (200, 300), utilization=0.5, since=3.0),
        score=0.0,
        delta=200.0,  # P(1.0) − P(0.8) = 300 − 100
    ),
    Case(
        "without the assumed pods the same node looks cheap",
        node(points=(100,) * 9 + (200, 300), utilization=0.5),
        score=100.0,
        delta=0.0,
    ),
    # Saturated: u = 1 already; extension with the last tenth's slope (200 W/unit) → 40 W.
    Case("a full node is not free", node(utilization=1.0), score=60.0, delta=40.0),
    Case("no request counts as 100 m", node(), pod_cpu=None, score=98.0, delta=2.0),
    # Consolidation prices a pod at Δu × a_n, a_n = min P(v)/v for 0 < v ≤ max(u_ref, Δu). On
    # the 100→300 W line P(v)/v = 100/v + 200 falls all the way, so a_n = P(u_ref)/u_ref.
    Case(
        "consolidation: empty node costs the pod's share at the reference load",
        node(pods=0),
        consolidation=True,
        ref=200.0,
        score=60.0,  # 0.2 × P(0.5)/0.5 = 0.2 × 400 = 80 W (the whole idle power was 140 W)
        delta=80.0,
    ),
    Case(
        "consolidation: the reference load is configurable",
        node(pods=0),
        consolidation=True,
        reference_load=1.0,
        score=40.0,  # 0.2 × 300 / 1 = 60 W
        delta=60.0,
    ),
    Case(
        "consolidation: a pod bigger than the reference load pays its own average",
        node(pods=0),
        pod_cpu="8",
        consolidation=True,
        ref=300.0,
        score=100.0 * (1 - 260.0 / 300.0),  # 0.8 × P(0.8)/0.8 = P(0.8) = 260 W
        delta=260.0,
    ),
    Case(
        "consolidation: the rate is the node's best up to the reference load",
        # Efficiency peaks at 50 % (300 W/unit) then worsens: with u_ref = 1 the rate is 300.
        node(pods=0, points=(100, 110, 120, 130, 140, 150, 250, 350, 450, 550, 650)),
        consolidation=True,
        reference_load=1.0,
        score=40.0,  # 0.2 × 300
        delta=60.0,
    ),
    Case("consolidation: busy node pays its marginal watts", node(pods=2), consolidation=True,
         score=60.0, delta=40.0),  # 40 W < its share of 80 W
    Case(
        "consolidation: a running node's steep start is capped at its share",
        # SPECpower X5675 (24 CPUs), 2 % busy, 1-CPU pod: marginal 396 W/unit × 1/24 = 16.5 W;
        # the share is P(0.5)/0.5 = 280 W/unit × 1/24 = 11.67 W.
        node(cores=24.0, utilization=0.02, pods=1, points=WESTMERE),
        pod_cpu="1",
        consolidation=True,
        score=100.0 * (1 - 280.0 / 24 / 100.0),
        delta=280.0 / 24,
    ),
    Case(
        "no consolidation: the same node pays the steep marginal",
        node(cores=24.0, utilization=0.02, pods=1, points=WESTMERE),
        pod_cpu="1",
        score=100.0 * (1 - 396.0 / 24 / 100.0),
        delta=396.0 / 24,
    ),
    Case("consolidation off: empty node", node(pods=0), score=60.0, delta=40.0),
    Case("over the reference clamps at 0", node(), ref=20.0, score=0.0, delta=40.0),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_heuristic_table(case: Case) -> None:
    scorer = EnergyPlugin(
        delta_p_ref_watts=case.ref,
        consolidation=case.consolidation,
        curves=case.curves,
        consolidation_utilization=case.reference_load,
    )
    [result] = results(scorer, pod(case.pod_cpu), [case.node], NOW)
    assert result.node == case.node.info.name
    assert result.reason == case.reason
    assert result.score == pytest.approx(case.score)
    if case.delta is None:
        assert result.delta_watts is None
    else:
        assert result.delta_watts == pytest.approx(case.delta)


def test_online_fit_gives_a_curve_from_history() -> None:
    scorer = EnergyPlugin(delta_p_ref_watts=100.0)
    # P = 80 + 150 u, with a little noise.
    history = [(0.1, 1.0), (0.3, -1.0), (0.5, 0.5), (0.7, -0.5), (0.9, 0.0)]
    # Old (stale) samples, no curve yet: the floor score; they still teach the curve.
    for i, (u, noise) in enumerate(history[:3]):
        state = node(points=None, utilization=u, watts=80 + 150 * u + noise, age=90 - i)
        [result] = results(scorer, pod(), [state], NOW)
        assert (result.reason, result.score) == ("stale", 0.0)
    assert scorer.fitted("n1") is None  # three samples are too few
    for i, (u, noise) in enumerate(history[3:]):
        state = node(points=None, utilization=u, watts=80 + 150 * u + noise, age=20 - i)
        [result] = results(scorer, pod(), [state], NOW)
        assert result.reason == "ok"
    fit = scorer.fitted("n1")
    assert fit is not None
    assert fit.slope_watts == pytest.approx(150.0, rel=0.02)
    assert fit.intercept_watts == pytest.approx(80.0, abs=1.5)
    [result] = results(scorer, pod(), [node(points=None, utilization=0.5, age=0.5)], NOW)
    assert result.reason == "ok"
    assert result.delta_watts == pytest.approx(0.2 * fit.slope_watts)
    # The fit is per node: another node without history still has no curve.
    [result] = results(scorer, pod(), [node(name="other", points=None)], NOW)
    assert (result.reason, result.score) == ("no_curve", 0.0)
    # A node whose agent went away is priced by its fitted line at the worst utilization.
    [result] = results(scorer, pod(), [node(telemetry=False)], NOW)
    assert result.reason == "missing"
    assert result.score == pytest.approx(100.0 * (1 - 0.2 * fit.slope_watts / 100.0))


@pytest.mark.parametrize(
    ("points", "why"),
    [
        ([(0.5, 200.0), (0.51, 201.0), (0.5, 199.0), (0.52, 202.0)], "no spread in u"),
        ([(0.1, 300.0), (0.4, 250.0), (0.7, 200.0), (0.9, 150.0)], "negative slope"),
        ([(0.1, 100.0), (0.9, 200.0)], "too few samples"),
    ],
)
def test_history_refuses_bad_fits(points: list[tuple[float, float]], why: str) -> None:
    history = NodeHistory()
    for t, (u, p) in enumerate(points):
        history.add(float(t), u, p)
    assert history.fit() is None, why


def test_history_ignores_repeated_samples() -> None:
    history = NodeHistory()
    assert history.add(10.0, 0.1, 100.0)
    assert not history.add(10.0, 0.9, 500.0)
    assert not history.add(9.0, 0.9, 500.0)
    assert history.version == 1  # one sample taken


def test_unmeasured_watts_never_enter_the_history() -> None:
    scorer = EnergyPlugin()
    for i in range(6):
        scorer.observe(
            NodeTelemetry("n1", NOW - 10 + i, watts=None, source="none", utilization=i / 6, cores=4)
        )
    assert scorer.fitted("n1") is None


def test_candidate_independence() -> None:
    """Shuffling or removing other candidates never changes a node's score."""
    rng = random.Random(7)
    nodes = [
        node(
            name=f"n{i}",
            cores=rng.choice([4.0, 8.0, 16.0]),
            utilization=rng.choice([None, rng.random()]),
            age=rng.choice([1.0, 5.0, 45.0]),
            points=rng.choice([None, LINEAR_100_300, PowerCurve.fan(60, 250, 1.4).as_points()]),
            since=rng.choice([0.0, 1.5]),
            pods=rng.choice([0, 4]),
        )
        for i in range(40)
    ]
    scorer = EnergyPlugin(delta_p_ref_watts=60.0, consolidation=True)
    full = {r.node: r for r in results(scorer, pod("1500m"), nodes, NOW)}
    for _ in range(20):
        subset = rng.sample(nodes, rng.randint(1, len(nodes)))
        for result in results(scorer, pod("1500m"), subset, NOW):
            assert result == full[result.node]
    assert {r.reason for r in full.values()} >= {"ok", "stale", "missing", "no_curve"}


def test_consolidation_opens_the_efficient_node_and_fills_open_ones_first() -> None:
    """The bundled power-off scenario's failure, on its own curves: charging the whole idle
    power made a 1-CPU pod open a small X3470 (48 W) before a Westmere (75 W), though the
    Westmere serves load at 280 W per unit at half load against the X3470's 146 W per unit ×
    (8 / 24 of the cores)."""
    scorer = EnergyPlugin(delta_p_ref_watts=250.0, consolidation=True)
    one_cpu = pod("1")
    westmere = node("westmere", cores=24.0, utilization=0.0, pods=0, points=WESTMERE)
    small = node("x3470", cores=8.0, utilization=0.0, pods=0, points=X3470)
    by_name = {r.node: r for r in results(scorer, one_cpu, [westmere, small], NOW)}
    assert by_name["westmere"].delta_watts == pytest.approx(280.0 / 24)  # 11.7 W
    assert by_name["x3470"].delta_watts == pytest.approx(146.0 / 8)  # 18.25 W
    assert by_name["westmere"].score > by_name["x3470"].score
    # A running node is never priced above an identical empty one, at any load or pod size.
    for load in (0.0, 0.01, 0.05, 0.2, 0.45, 0.7, 0.95):
        for cpu in ("100m", "1", "4", "12"):
            running = node("westmere", cores=24.0, utilization=load, pods=2, points=WESTMERE)
            empty = node("westmere", cores=24.0, utilization=load, pods=0, points=WESTMERE)
            [on] = results(scorer, pod(cpu), [running], NOW)
            [off] = results(scorer, pod(cpu), [empty], NOW)
            assert on.delta_watts is not None and off.delta_watts is not None
            assert on.delta_watts <= off.delta_watts + 1e-9
    # A running inefficient node costs its marginal watts: cheaper than opening the Westmere
    # at 25 % (67.4 W/unit × 1/8 = 8.4 W), dearer at 65 % (95.8 W/unit × 1/8 = 12.0 W) — there
    # the efficient node is opened rather than the small one filled.
    [at_25] = results(scorer, one_cpu, [node("x3470", cores=8.0, utilization=0.25, pods=2, points=X3470)], NOW)
    [at_65] = results(scorer, one_cpu, [node("x3470", cores=8.0, utilization=0.65, pods=5, points=X3470)], NOW)
    assert at_25.delta_watts == pytest.approx(67.4 / 8)
    assert at_65.delta_watts == pytest.approx(88.0 * 0.05 + 101.0 * 0.075)
    assert at_25.score > by_name["westmere"].score > at_65.score


def test_consolidation_utilization_must_be_a_load() -> None:
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError):
            EnergyPlugin(consolidation=True, consolidation_utilization=bad)


def test_extended_watts_continues_past_full() -> None:
    curve = PowerCurve.linear(100.0, 300.0)
    assert curve.extended_watts(0.5) == pytest.approx(200.0)
    assert curve.extended_watts(1.5) == pytest.approx(400.0)


def test_reference_must_be_positive() -> None:
    with pytest.raises(ValueError):
        EnergyPlugin(delta_p_ref_watts=0)


@pytest.mark.parametrize("consolidation", [False, True])
def test_batch_scores_equal_scalar_scores(consolidation: bool) -> None:
    """The numpy batch path (used by the extender) gives exactly what score() gives."""
    rng = random.Random(11)
    fan = PowerCurve.fan(60, 250, 1.4)
    nodes = [
        node(
            name=f"n{i}",
            cores=rng.choice([2.0, 8.0, 64.0]),
            utilization=rng.choice([None, rng.random(), 0.97, 1.0]),
            age=rng.choice([0.0, 5.0, 29.9, 45.0]),
            points=rng.choice([None, LINEAR_100_300, (90, 95, 100, 120, 150, 190, 240, 300, 370, 450, 540)]),
            since=rng.choice([0.0, 0.7, 6.0]),
            pods=rng.choice([0, 4]),
        )
        for i in range(300)
    ]
    scorer = EnergyPlugin(
        delta_p_ref_watts=45.0, consolidation=consolidation, curves={"n3": fan, "n7": fan}
    )
    for cpu in ("250m", "3", None):
        expected = [results(scorer, pod(cpu), [one], NOW)[0] for one in nodes]
        got = results(scorer, pod(cpu), nodes, NOW)
        for want, have in zip(expected, got, strict=True):
            assert (have.node, have.reason) == (want.node, want.reason)
            assert have.score == pytest.approx(want.score, abs=1e-9)
            if want.delta_watts is None:
                assert have.delta_watts is None
            else:
                assert have.delta_watts == pytest.approx(want.delta_watts, abs=1e-9)
        # The extender's prepared batch: selected rows, unknown names → the sentinel row.
        prepared = Prepared.build(scorer, {}, {n.info.name: n for n in nodes})
        rows = prepared.rows(["n5", "nope", "n0"])
        picked = scorer.evaluate(pod(cpu), prepared.batch.at(NOW), rows=rows)
        names = ["n5", "nope", "n0"]
        have = [
            Result(name, s, None if d != d else d, r)
            for name, s, d, r in zip(names, picked.score.tolist(), picked.delta_watts.tolist(),
                                     picked.reasons(), strict=True)
        ]
        assert have[0] == got[5] and have[2] == got[0]
        assert (have[1].score, have[1].reason) == (0.0, "missing")
