"""The `learned` Score plugin: a model trained in the simulator (`rl.learning.dqn`, `rl.learning.mlp`), served by
a numpy forward pass (`scheduler.learning.numpy_model`) — the scheduler never needs torch.

Configuration: `{name: learned, args: {model: PATH}}` (PATH: the `.npz` exported beside the
`.pt` checkpoint, or the `.pt` path, whose `.npz` sibling is loaded). Scores are absolute 0–100
from the model's fixed score map, one batched pass over the candidates' feature rows (the
model's schema: v3, or v2 for models trained before it), no NormalizeScore step, so a node's score never depends on the other candidates.

A row whose telemetry is missing or stale (`telemetry_fresh` = 0) scores 0
(UNMEASURED_SCORE), the floor — the energy plugin's score for a node it cannot price — so a node
without fresh telemetry is never preferred over a measured one by this plugin (missing data
never wins; docs/learned.md says why not a worst-state price); so does a row with a value that
is not finite or absurdly far from the training data (`scheduler.learning.numpy_model.usable`). A model file
that cannot be served (another kind or feature schema, truncated, NaN weights) refuses to load
(ModelError).

The v1 features that come from the heuristic (curves, ΔP, staleness limit) are computed with
`energy`, the scheduler's configured energy plugin (the profile's `KubejouleEnergy`, built by
`scheduler.config.build.build_energy_plugin` from the `scorer:` section), as training computed them
with the simulator's; the v2 workload features with `workload(name)` (the standalone
scheduler's cluster cache, `ClusterCache.workload`) or `workloads()` (a mapping by name: the
simulator's), else unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scheduler.domain.model import NodeState, NodeWorkload, PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.framework.interface import MIN_NODE_SCORE
from scheduler.learning.features_v2 import V2, Workloads
from scheduler.learning.features_v3 import V3
from scheduler.learning.numpy_model import NumpyModel, load_numpy_model
from scheduler.lifetimes import LifetimePredictor
from scheduler.plugins.energy import EnergyPlugin, EnergyScores

NAME = "learned"
# The score of a node without fresh telemetry: the floor, never above a measured node's.
UNMEASURED_SCORE = float(MIN_NODE_SCORE)

WorkloadLookup = Callable[[str], NodeWorkload | None]
LifetimesLookup = Callable[[], LifetimePredictor | None]


class LearnedPlugin:
    name = NAME

    def __init__(
        self,
        model: str | Path | NumpyModel,
        energy: EnergyPlugin | None = None,
        workload: WorkloadLookup | None = None,
        workloads: Callable[[], Mapping[str, NodeWorkload] | None] | None = None,
        lifetimes: LifetimesLookup | None = None,
    ) -> None:
        """`model`: a model file (or one loaded); `energy`: the plugin the v1 features are
        computed with (default: a default EnergyPlugin, which the scheduler replaces by its
        configured one); `workload(name)` or `workloads()` (a mapping by name): the nodes'
        v2/v3 workloads; `lifetimes()`: the lifetime predictor for the pod's v3 features
        (None: unknown)."""
        if workload is not None and workloads is not None:
            raise ValueError("give workload or workloads, not both")
        self.model = model if isinstance(model, NumpyModel) else load_numpy_model(model)
        self.energy = energy or EnergyPlugin()
        self.workload = workload
        self.workloads = workloads
        self.lifetimes = lifetimes
        self._version = V3 if self.model.schema == V3.schema else V2
        self._fresh = self.model.schema.node_features.index("telemetry_fresh")
        # name → (the NodeState it was read for, its workload): see _read_workloads()
        self._read: dict[str, tuple[NodeState, NodeWorkload | None]] = {}

    def _read_workloads(self, batch: CandidateBatch) -> list[NodeWorkload | None]:
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

    def rows(
        self, pod: PodInfo, batch: CandidateBatch, scores: EnergyScores | None = None
    ) -> np.ndarray:
        """The rows of every candidate in the model's feature schema (v3 or v2), as the model
        sees them (`scores`: the energy plugin's evaluation of `pod` over `batch`, when
        already computed)."""
        known: Workloads
        if self.workload is not None:
            known = self._read_workloads(batch)
        else:
            known = self.workloads() if self.workloads is not None else None
        lifetimes = None
        if self._version is V3 and self.lifetimes is not None:
            lifetimes = self.lifetimes()
        return self._version.rows(pod, batch, self.energy, known, lifetimes, scores)

    def score_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scores and a fresh-telemetry mask for encoded rows. A fresh row the model cannot
        judge (a value not finite or absurdly far from anything in training:
        `scheduler.learning.numpy_model.usable`) scores UNMEASURED_SCORE too, and so does a row whose
        output is not a number: never NaN, never a crash."""
        fresh = rows[:, self._fresh] > 0.5
        scores = np.full(len(rows), UNMEASURED_SCORE, dtype=np.float64)
        if fresh.any():
            judged = self.model.scores(rows[fresh])
            scores[fresh] = np.where(np.isfinite(judged), judged, UNMEASURED_SCORE)
        return scores, fresh

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        if len(batch) == 0:
            return np.zeros(0)
        return self.score_rows(self.rows(pod, batch))[0]


@dataclass(frozen=True)
class LearnedArgs:
    """The plugin's arguments in a profile entry: `model: PATH` (a `.npz` model file)."""

    model: str

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"learned takes args {{model: PATH}}, got {{'model': {self.model!r}}}")

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> LearnedArgs:
        model = config.get("model")
        if set(config) != {"model"} or not isinstance(model, str):
            raise ValueError(f"learned takes args {{model: PATH}}, got {dict(config)!r}")
        return cls(model)
