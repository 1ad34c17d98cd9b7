"""kube-scheduler's percentageOfNodesToScore (scheduler/framework/nodes_to_score.py), with the cases
of its own tests in kubernetes pkg/scheduler/schedule_one_test.go."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.framework.nodes_to_score import NodesToScore, num_feasible_nodes_to_find

# TestNumFeasibleNodesToFind (schedule_one_test.go): (name, percentageOfNodesToScore — 0 when
# "not set", numAllNodes, wantNumNodes).
NUM_FEASIBLE_CASES = [
    ("not set percentageOfNodesToScore and nodes number not more than 50", 0, 10, 10),
    ("set percentageOfNodesToScore and nodes number not more than 50", 40, 10, 10),
    ("not set percentageOfNodesToScore and nodes number more than 50", 0, 1000, 420),
    ("set percentageOfNodesToScore and nodes number more than 50", 40, 1000, 400),
    ("not set percentageOfNodesToScore and nodes number more than 50*125", 0, 6000, 300),
    ("set percentageOfNodesToScore and nodes number more than 50*125", 40, 6000, 2400),
]


@pytest.mark.parametrize(
    ("percentage", "nodes", "want"),
    [c[1:] for c in NUM_FEASIBLE_CASES],
    ids=[c[0] for c in NUM_FEASIBLE_CASES],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, want: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == want


def test_at_least_100_nodes_and_the_adaptive_floor_of_5_percent() -> None:
    # numFeasibleNodesToFind's two floors: minFeasibleNodesToFind (100 nodes) and
    # minFeasibleNodesPercentageToFind (5 %); 5,000 nodes: 50 − 40 = 10 % → 500.
    assert num_feasible_nodes_to_find(1, 1000) == 100
    assert num_feasible_nodes_to_find(0, 5000) == 500
    assert num_feasible_nodes_to_find(0, 10000) == 500  # 50 − 80 < 5 → 5 %
    assert num_feasible_nodes_to_find(100, 5000) == 5000


@pytest.mark.parametrize("bad", [-1, 101, 1.5, True, "10"])
def test_bad_percentages_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="percentageOfNodesToScore"):
        NodesToScore(bad)  # type: ignore[arg-type]


def test_fair_evaluation_for_nodes() -> None:
    """TestFairEvaluationForNodes (schedule_one_test.go): 500 nodes that all pass, 30 %: each
    search returns nodesToFind nodes and the next one starts where it stopped, wrapping."""
    count = 500
    to_score = NodesToScore(30)
    nodes_to_find = num_feasible_nodes_to_find(30, count)
    assert count % nodes_to_find != 0
    mask = np.ones(count, dtype=bool)
    seen: list[int] = []
    for i in range(2 * (count // nodes_to_find + 1)):
        rows = to_score.select(mask)
        assert len(rows) == nodes_to_find
        assert to_score.next_start == (i + 1) * nodes_to_find % count
        seen.extend(rows.tolist())
    assert set(seen) == set(range(count))  # every node had its turn


def test_infeasible_nodes_count_as_processed_and_few_feasible_means_all() -> None:
    mask = np.zeros(400, dtype=bool)
    mask[::2] = True  # 200 feasible; 400 nodes → 400 × (50 − 3) % = 188 wanted
    to_score = NodesToScore(0)
    rows = to_score.select(mask)
    assert len(rows) == 188 and rows[-1] == 374
    assert to_score.next_start == 375
    rows = to_score.select(mask)
    assert rows[0] == 376 and len(rows) == 188
    few = np.zeros(400, dtype=bool)
    few[[5, 7]] = True
    start = to_score.next_start
    assert sorted(to_score.select(few).tolist()) == [5, 7]
    assert to_score.next_start == start  # every node looked at: back where it started
    assert NodesToScore(None).select(mask).tolist() == np.flatnonzero(mask).tolist()
