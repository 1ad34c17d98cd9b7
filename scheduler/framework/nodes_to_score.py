"""kube-scheduler's percentageOfNodesToScore (`pkg/scheduler/schedule_one.go`).

kube-scheduler stops filtering once it has found `numFeasibleNodesToFind(n)` feasible nodes and
scores only those. The search starts where the previous pod's stopped (`nextStartNodeIndex`),
so every node gets its turn:

* fewer than 100 nodes (minFeasibleNodesToFind): every node;
* percentage 0 (the default, "adaptive"): `50 − n / 125` %, at least 5 %
  (minFeasibleNodesPercentageToFind);
* `n × percentage / 100` nodes (int32 arithmetic), at least 100.

`NodesToScore.select(mask)` applies that to a boolean feasibility mask over the node list: the
first k feasible rows in the order `start, start + 1, …` (wrapping), and moves `start` past the
nodes the search looked at (the k feasible ones plus the infeasible ones in between), as
`findNodesThatPassFilters` does. Filtering every node is cheap here (vectorized); what the rule
saves is scoring.
"""

from __future__ import annotations

import numpy as np

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
ADAPTIVE_BASE_PERCENTAGE = 50
ADAPTIVE_NODES_PER_PERCENT = 125


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind: `percentage` 0 is the adaptive default."""
    if isinstance(percentage, bool) or not isinstance(percentage, int):
        raise ValueError(f"percentageOfNodesToScore must be an integer, got {percentage!r}")
    if not 0 <= percentage <= 100:
        raise ValueError(f"percentageOfNodesToScore must be within 0..100, got {percentage}")
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(
            ADAPTIVE_BASE_PERCENTAGE - num_all_nodes // ADAPTIVE_NODES_PER_PERCENT,
            MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND,
        )
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class NodesToScore:
    """The rows kube-scheduler would score for one pod (module docstring). One per scheduler;
    `percentage` None scores every feasible node."""

    def __init__(self, percentage: int | None = None) -> None:
        if percentage is not None:
            num_feasible_nodes_to_find(percentage, 0)  # validates
        self.percentage = percentage
        self.next_start = 0

    def select(self, mask: np.ndarray) -> np.ndarray:
        """Indices of the rows to score, in search order."""
        count = len(mask)
        if self.percentage is None or count == 0:
            return np.flatnonzero(mask)
        wanted = num_feasible_nodes_to_find(self.percentage, count)
        start = self.next_start % count
        order = np.concatenate((np.arange(start, count), np.arange(0, start)))
        hits = np.flatnonzero(mask[order])
        if len(hits) > wanted:
            hits = hits[:wanted]
            processed = int(hits[-1]) + 1
        else:
            processed = count
        self.next_start = (start + processed) % count
        return order[hits]
