"""The `learned` Score plugin: a model trained in the simulator (`rl.dqn`, `rl.mlp`), served by
a numpy forward pass (`scheduler.learned`) — the scheduler never needs torch.

Configuration: `{name: learned, args: {model: PATH}}` (PATH: the `.npz` exported beside the
`.pt` checkpoint, or the `.pt` path, whose `.npz` sibling is loaded). Scores are absolute 0–100
from the model's fixed score map, one batched pass over the candidates, neutral 50 where the
telemetry is missing or stale; no NormalizeScore step, so a node's score never depends on the
other candidates. A model built for another feature schema refuses to load (ModelError).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.features_v2 import NodeWorkload
from scheduler.framework.batch import CandidateBatch
from scheduler.learned import LearnedScorer, load_numpy_model
from scheduler.model import PodInfo
from scheduler.scorer import HeuristicScorer

NAME = "learned"


class LearnedPlugin:
    name = NAME

    def __init__(
        self,
        model: str | Path,
        feature_scorer: HeuristicScorer | None = None,
        workloads: Callable[[], Mapping[str, NodeWorkload]] | None = None,
    ) -> None:
        self.scorer = LearnedScorer(
            load_numpy_model(model), feature_scorer or HeuristicScorer(), workloads
        )

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        if len(batch) == 0:
            return np.zeros(0)
        rows = self.scorer.rows(pod, batch.states, batch.now)
        return self.scorer.score_rows(rows)[0]


def from_args(
    args: Mapping[str, Any], feature_scorer: HeuristicScorer | None = None
) -> LearnedPlugin:
    """The plugin from its configuration arguments (`model: PATH`)."""
    unknown = set(args) - {"model"}
    if unknown or not isinstance(args.get("model"), str) or not args["model"]:
        raise ValueError(f"learned plugin: args must be {{model: PATH}}, got {dict(args)}")
    return LearnedPlugin(args["model"], feature_scorer)
