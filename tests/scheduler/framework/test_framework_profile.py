"""The framework's combination rule (kube-scheduler's prioritizeNodes), extender scaling and
tie breaking, on hand-computed cases; CandidateBatch reuse."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from scheduler.domain.model import NodeInfo, NodeState, PodInfo, Resources
from scheduler.framework import CandidateBatch, SchedulingProfile, select_best
from scheduler.framework.interface import extender_priority
from scheduler.plugins.extender import ExtenderScore

POD = PodInfo("default", "p", "u1", Resources(cpu_millicores=100))


def _states(count: int) -> list[NodeState]:
    return [
        NodeState(NodeInfo(f"n{i}", Resources(4000, 8 << 30, 110)), Resources(100 * i, 0, i))
        for i in range(count)
    ]


class Fixed:
    """A Score plugin returning fixed raw scores by node name."""

    def __init__(self, name: str, scores: dict[str, float]) -> None:
        self.name = name
        self.scores = scores

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        return np.array([self.scores[n] for n in batch.names])


class FixedNormalized(Fixed):
    """…with a NormalizeScore step: raw × 100 // max raw."""

    def normalize(self, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        return (scores * 100 // scores.max()).astype(np.int64)


def test_weighted_sum_of_normalized_scores() -> None:
    batch = CandidateBatch.of(_states(3))
    a = Fixed("a", {"n0": 10, "n1": 80, "n2": 40})
    b = FixedNormalized("b", {"n0": 3, "n1": 1, "n2": 4})  # normalized: 75, 25, 100
    scored = SchedulingProfile("p", scores=[(a, 2), (b, 3)]).score(POD, batch)
    # n0: 2·10 + 3·75 = 245; n1: 2·80 + 3·25 = 235; n2: 2·40 + 3·100 = 380
    assert scored.total.tolist() == [245, 235, 380]
    assert scored.of("b").tolist() == [75, 25, 100]


def test_weight_zero_means_one_and_negative_is_refused() -> None:
    batch = CandidateBatch.of(_states(2))
    a = Fixed("a", {"n0": 7, "n1": 9})
    assert SchedulingProfile("p", scores=[(a, 0)]).score(POD, batch).total.tolist() == [7, 9]
    with pytest.raises(ValueError, match=">= 0"):
        SchedulingProfile("p", scores=[(a, -1)])
    with pytest.raises(ValueError, match="twice"):
        SchedulingProfile("p", scores=[(a, 1), (a, 1)])


def test_no_score_plugin_scores_every_node_alike() -> None:
    assert SchedulingProfile("p").score(POD, CandidateBatch.of(_states(3))).total.tolist() == [1, 1, 1]


@pytest.mark.parametrize(
    ("score", "extender"),
    [(0, 0), (4.9, 0), (5.0, 1), (14.99, 1), (15.0, 2), (49.9, 5), (50.0, 5), (94.9, 9), (95, 10), (100, 10)],
)
def test_extender_rounding_halves_up(score: float, extender: int) -> None:
    assert extender_priority(np.array([score])).tolist() == [extender]


def test_extender_enters_as_score_times_weight_times_ten() -> None:
    batch = CandidateBatch.of(_states(3))
    energy = Fixed("energy", {"n0": 94.0, "n1": 15.0, "n2": 55.0})  # extender: 9, 2, 6
    fit = Fixed("fit", {"n0": 10, "n1": 90, "n2": 50})
    profile = SchedulingProfile("p", scores=[(fit, 1), (ExtenderScore(energy), 5)])
    scored = profile.score(POD, batch)
    # fit × 1 + extender score × weight 5 × MaxNodeScore/MaxExtenderPriority (10)
    assert scored.total.tolist() == [10 + 9 * 50, 90 + 2 * 50, 50 + 6 * 50]
    assert scored.names == ("fit", "extender:energy")
    assert ExtenderScore(energy).extender_scores(POD, batch).tolist() == [9, 2, 6]


def test_extender_normalizes_the_plugin_over_the_nodes_it_is_sent() -> None:
    plugin = FixedNormalized("n", {"n0": 1, "n1": 2, "n2": 4})
    batch = CandidateBatch.of(_states(3))
    assert ExtenderScore(plugin).extender_scores(POD, batch).tolist() == [3, 5, 10]
    assert ExtenderScore(plugin).extender_scores(POD, batch.take([0, 1])).tolist() == [5, 10]


def _reservoir(totals: list[int], rng: random.Random) -> int:
    """kube-scheduler's selectHost written out: the k-th tie replaces the pick with 1/k."""
    best, pick, seen = None, -1, 0
    for i, total in enumerate(totals):
        if best is None or total > best:
            best, pick, seen = total, i, 1
        elif total == best:
            seen += 1
            if rng.randrange(seen) == 0:
                pick = i
    return pick


def test_ties_are_broken_like_select_host() -> None:
    totals = [5, 9, 3, 9, 9, 1, 9]
    for seed in range(50):
        assert select_best(np.array(totals), random.Random(seed)) == _reservoir(
            totals, random.Random(seed)
        )


@pytest.mark.parametrize("ties", [4, 200])  # reservoir sampling, and one draw above the limit
def test_ties_are_uniform(ties: int) -> None:
    totals = np.array([7] * ties + [3])
    rng = random.Random(1)
    counts = Counter(select_best(totals, rng) for _ in range(ties * 300))
    assert set(counts) == set(range(ties))
    assert max(counts.values()) < 2.0 * min(counts.values()) + 20


def test_filters_then_scores_then_the_best_feasible_row() -> None:
    class EvenOnly:
        name = "even"

        def filter(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
            return np.array([int(n[1:]) % 2 == 0 for n in batch.names])

        def reasons(self, pod: PodInfo, node: NodeState) -> tuple[str, ...]:
            return () if int(node.info.name[1:]) % 2 == 0 else ("odd",)

    best = Fixed("s", {"n0": 1, "n1": 100, "n2": 50, "n3": 99})
    profile = SchedulingProfile("p", filters=[EvenOnly()], scores=[(best, 1)])
    batch = CandidateBatch.of(_states(4))
    rows = np.flatnonzero(profile.feasible(POD, batch))
    assert rows.tolist() == [0, 2]
    scored = profile.score(POD, batch.take(rows))
    assert int(rows[select_best(scored.total, random.Random(0))]) == 2
    assert profile.failure_summary(POD, batch) == "0/4 nodes are available: 2 odd."


def test_batch_update_patches_core_and_derived_columns() -> None:
    states = _states(4)
    batch = CandidateBatch.of(states, now=5.0)
    calls: list[int] = []

    def build(rows: list[NodeState] | tuple[NodeState, ...]) -> dict[str, np.ndarray]:
        calls.append(len(rows))
        return {"pods": np.array([s.pod_count + s.requested.pods for s in rows])}

    owner = object()
    assert batch.derived(owner, build)["pods"].tolist() == [0, 1, 2, 3]
    sub = batch.take([3, 1])
    assert sub.names == ["n3", "n1"] and sub.req_cpu.tolist() == [300, 100]
    assert sub.derived(owner, build)["pods"].tolist() == [3, 1]  # sliced, not rebuilt
    changed = NodeState(states[2].info, Resources(1000, 0, 7), pod_count=7)
    batch.update([2], [changed])
    assert batch.req_cpu.tolist() == [0, 100, 1000, 300]
    assert batch.derived(owner, build)["pods"].tolist() == [0, 1, 14, 3]
    assert calls == [4, 1]
    assert batch.at(9.0).now == 9.0 and batch.at(9.0).derived(owner, build) is batch.derived(owner, build)


def test_kubejoule_and_extender_profiles() -> None:
    """The standalone default profile and the extender deployment, as profile entries."""
    from scheduler.plugins.defaults import extender_profile, kubejoule_profile

    energy = Fixed("KubejouleEnergy", {"n0": 10.0, "n1": 55.0, "n2": 54.0})
    alone = kubejoule_profile(energy)
    assert [p.name for p, _ in alone.scores] == ["KubejouleEnergy"]
    assert [p.name for p in alone.filters] == [
        "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit"
    ]
    both = kubejoule_profile(energy, energy_weight=4, with_default_scores=True)
    assert [(p.name, w) for p, w in both.scores][-1] == ("KubejouleEnergy", 4)
    assert len(both.scores) == 5
    ext = extender_profile(energy, 5)
    assert ext.name == "default+extender:5"
    batch = CandidateBatch.of(_states(3))
    scored = ext.score(POD, batch)
    # 55 and 54 both round to extender 5 (n1: 5.5 → 6, n2: 5.4 → 5): × 5 × 10
    assert scored.of("extender:KubejouleEnergy").tolist() == [10, 60, 50]
    assert (scored.total - SchedulingProfile("d", scores=ext.scores[:-1]).score(POD, batch).total).tolist() == [
        50, 300, 250
    ]
