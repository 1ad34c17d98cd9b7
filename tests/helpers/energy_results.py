"""The energy plugin's evaluation of one pod over some nodes as one record per node, for tests
that compare scores, ΔP and reasons node by node (the product keeps them as arrays and codes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from scheduler.domain.model import REASONS, NodeState, PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.plugins.energy import EnergyPlugin


class Result(NamedTuple):
    node: str
    score: float
    delta_watts: float | None  # None where unknown
    reason: str


def results(energy: EnergyPlugin, pod: PodInfo, nodes: Sequence[NodeState], now: float) -> list[Result]:
    """`energy.evaluate(pod, CandidateBatch.of(nodes, now))`, node by node."""
    batch = CandidateBatch.of(nodes, now)
    scores = energy.evaluate(pod, batch)
    return [
        Result(name, score, None if delta != delta else delta, REASONS[code])
        for name, score, delta, code in zip(
            batch.names, scores.score.tolist(), scores.delta_watts.tolist(), scores.reason.tolist(),
            strict=True,
        )
    ]
