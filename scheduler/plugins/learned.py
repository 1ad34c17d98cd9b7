"""The `learned` Score plugin: a model trained in the simulator (`rl.dqn`, `rl.mlp`), served by
a numpy forward pass (`scheduler.learned`) — the scheduler never needs torch.

Configuration: `{name: learned, args: {model: PATH}}` (PATH: the `.npz` exported beside the
`.pt` checkpoint, or the `.pt` path, whose `.npz` sibling is loaded). Scores are absolute 0–100
from the model's fixed score map, one batched pass over the candidates, 0 (the floor) where the
telemetry is missing or stale, so missing data never wins; no NormalizeScore step, so a node's score never depends on the
other candidates. A model built for another feature schema refuses to load (ModelError).

The v1 features that come from the heuristic (curves, ΔP, staleness limit) are computed with
`energy`, the scheduler's configured energy plugin (the profile's `KubejouleEnergy`, built by
`scheduler.config.build_scorer` from the `scorer:` section), as training computed them with the
simulator's; the v2 workload features with `workload(name)`, the standalone scheduler's cluster
cache (`ClusterCache.workload`), or unknown without one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.features import EnergySource
from scheduler.features_v2 import NodeWorkload, rows_v2
from scheduler.framework.batch import CandidateBatch
from scheduler.learned import LearnedScorer, load_numpy_model
from scheduler.model import NodeState, PodInfo
from scheduler.plugins.energy import EnergyPlugin

NAME = "learned"

WorkloadLookup = Callable[[str], NodeWorkload | None]


class LearnedPlugin:
    name = NAME

    def __init__(
        self,
        model: str | Path,
        energy: EnergySource | None = None,
        workload: WorkloadLookup | None = None,
        workloads: Callable[[], Mapping[str, NodeWorkload]] | None = None,
    ) -> None:
        """`energy`: the plugin the v1 features are computed with (default: a default
        EnergyPlugin, which the scheduler replaces by its configured one); `workload(name)` or
        `workloads()` (a mapping by name): the nodes' v2 workloads."""
        if workload is not None and workloads is not None:
            raise ValueError("give workload or workloads, not both")
        self.scorer = LearnedScorer(load_numpy_model(model), energy or EnergyPlugin(), workloads)
        self.workload = workload
        # name → (the NodeState it was read for, its workload): see _workloads()
        self._read: dict[str, tuple[NodeState, NodeWorkload | None]] = {}

    def _workloads(self, batch: CandidateBatch) -> list[NodeWorkload | None]:
        """`workload(name)` of every candidate, read again only for nodes whose NodeState is
        not the one it was read for: the cluster cache writes a new state for a node whenever
        a pod is placed on or removed from it, and a new NodeInfo when its spec (taints)
        changes, which is all a workload is made of (its ages are computed from `now`)."""
        assert self.workload is not None
        read, lookup = self._read, self.workload
        if len(read) > 4 * len(batch) + 1024:
            read.clear()  # nodes that left the cluster
        found: list[NodeWorkload | None] = []
        for name, state in zip(batch.names, batch.states, strict=True):
            entry = read.get(name)
            if entry is None or entry[0] is not state:
                entry = read[name] = (state, lookup(name))
            found.append(entry[1])
        return found

    def rows(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        """The v2 rows of every candidate, as the model sees them."""
        if self.workload is not None:
            return rows_v2(pod, batch, self.scorer.feature_scorer, self._workloads(batch))
        return self.scorer.batch_rows(pod, batch)

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        if len(batch) == 0:
            return np.zeros(0)
        return self.scorer.score_rows(self.rows(pod, batch))[0]


def from_args(
    args: Mapping[str, Any],
    energy: EnergySource | None = None,
    workload: WorkloadLookup | None = None,
) -> LearnedPlugin:
    """The plugin from its configuration arguments (`model: PATH`)."""
    if set(args) != {"model"} or not isinstance(args.get("model"), str) or not args["model"]:
        raise ValueError(f"learned takes args {{model: PATH}}, got {dict(args)!r}")
    return LearnedPlugin(args["model"], energy, workload)
