"""Feature schema v2: v1 (`scheduler.learning.features`) plus what a real scheduler can see that the
heuristic ignores — the age and kind of the work already on a node, how long the node has been
up, whether the autoscaler is about to remove it — and the pod's owner kind and priority.

Node features, after v1's (in order):

| name | unit | meaning |
|---|---|---|
| `workload_known` | 0/1 | the scheduler knows the node's pods, boot time and scale-down state |
| `youngest_pod_age_seconds` | s | age of the newest pod on the node, DaemonSet pods excepted (capped at 86 400); None without such pods |
| `oldest_pod_age_seconds` | s | age of the oldest such pod (capped at 86 400); None without such pods |
| `job_pod_share` | 0..1 | share of those pods owned by a Job; None without such pods |
| `seconds_since_boot` | s | time since the node became ready (capped at 86 400) |
| `in_scale_down_window` | 0/1 | the node has no pods other than DaemonSet pods and the autoscaler's scale-down timer runs: a pod placed there keeps it on |

Pod features, after v1's: `owner_job`, `owner_replicaset`, `owner_statefulset`, `owner_other`
(0/1, one-hot; all 0 for a bare pod) and `priority_log10` (`sign(p) × log10(1 + |p|)` of the
pod's spec.priority, so system-critical 2·10⁹ stays on a scale a network can use).

A node's workload comes from outside NodeState (the cluster cache or the simulator): a
`NodeWorkload` (`scheduler.domain.model`), or None when unknown (then `workload_known` is 0 and
the workload features None).

`WorkloadSchema` (below) is what v2 and v3 share: from a schema's node columns and pod features,
the model rows, the decision log's feature dicts and its callback (`WorkloadFeatures`), one
implementation for both (`V2` here, `V3` in `features_v3`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import is_

import numpy as np

from scheduler.domain.model import NodeState, NodeWorkload, PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.learning.features import (
    NODE_FEATURES,
    POD_FEATURES,
    Features,
    FeatureSchema,
    NodeValues,
    column_features,
    encode,
    encode_columns,
    node_columns,
    node_values,
    pod_features,
)
from scheduler.lifetimes import LifetimePredictor
from scheduler.plugins.energy import EnergyPlugin, EnergyScores

SCHEMA_VERSION_V2 = "kubejoule.features/v2"
MAX_WORKLOAD_AGE_SECONDS = 86_400.0

NODE_FEATURES_V2: tuple[str, ...] = NODE_FEATURES + (
    "workload_known",
    "youngest_pod_age_seconds",
    "oldest_pod_age_seconds",
    "job_pod_share",
    "seconds_since_boot",
    "in_scale_down_window",
)
POD_FEATURES_V2: tuple[str, ...] = POD_FEATURES + (
    "owner_job",
    "owner_replicaset",
    "owner_statefulset",
    "owner_other",
    "priority_log10",
)
FEATURE_SCHEMA_V2 = FeatureSchema(SCHEMA_VERSION_V2, NODE_FEATURES_V2, POD_FEATURES_V2)

_OWNER_COLUMNS = {
    "Job": "owner_job",
    "ReplicaSet": "owner_replicaset",
    "StatefulSet": "owner_statefulset",
}


# What rows_v2() accepts as the nodes' workloads: a mapping by node name, a function of the
# name (the cluster cache's `workload`), a list in the batch's row order, or None (unknown).
Workloads = (
    Mapping[str, NodeWorkload]
    | Callable[[str], NodeWorkload | None]
    | list[NodeWorkload | None]
    | None
)

# A workload's time-independent values: newest and oldest start, Job share, ready time, window.
_WORKLOAD_VALUES = ("newest", "oldest", "job_share", "ready_since", "window")


def _workload_row(workload: NodeWorkload | None) -> tuple[float, ...]:
    if workload is None:
        return (math.nan,) * 4 + (0.0,)
    starts = workload.pod_start_times
    ready = workload.ready_since
    return (
        max(starts) if starts else math.nan,
        min(starts) if starts else math.nan,
        workload.job_pods / len(starts) if starts else math.nan,
        float(ready) if ready is not None else math.nan,
        1.0 if workload.in_scale_down_window else 0.0,
    )


def _workload_values(found: list[NodeWorkload | None]) -> dict[str, np.ndarray]:
    table = np.array([_workload_row(w) for w in found], dtype=np.float64).reshape(
        len(found), len(_WORKLOAD_VALUES)
    )
    return {name: table[:, k].copy() for k, name in enumerate(_WORKLOAD_VALUES)}


def clip_seconds(seconds: np.ndarray) -> np.ndarray:
    """A duration feature (v2 and v3): 0 … one day; NaN (unknown) stays NaN."""
    return np.minimum(np.maximum(seconds, 0.0), MAX_WORKLOAD_AGE_SECONDS)


def _age(now: float, since: np.ndarray) -> np.ndarray:
    return clip_seconds(now - since)


def workload_columns(
    found: list[NodeWorkload | None], now: float, cache: NodeValues | None = None
) -> dict[str, np.ndarray]:
    """The workload features of nodes whose workloads are `found` (None: unknown), as columns
    (NaN where unknown). `cache` (a node_values() cache) keeps the last list's values: a
    caller that passes the same workload objects again computes only the ages."""
    last = cache.last_workloads if cache is not None else None
    if last is not None and len(last[0]) == len(found) and all(map(is_, last[0], found)):
        values = last[1]
    else:
        values = _workload_values(found)
        if cache is not None:
            cache.last_workloads = (found, values)
    known = np.fromiter((w is not None for w in found), dtype=np.float64, count=len(found))
    return {
        "workload_known": known,
        "youngest_pod_age_seconds": _age(now, values["newest"]),
        "oldest_pod_age_seconds": _age(now, values["oldest"]),
        "job_pod_share": values["job_share"],
        "seconds_since_boot": _age(now, values["ready_since"]),
        "in_scale_down_window": values["window"],
    }


def pod_features_v2(pod: PodInfo) -> Features:
    features = pod_features(pod)
    column = _OWNER_COLUMNS.get(pod.owner_kind or "", "owner_other" if pod.owner_kind else None)
    for name in ("owner_job", "owner_replicaset", "owner_statefulset", "owner_other"):
        features[name] = 1.0 if name == column else 0.0
    p = float(pod.priority)
    features["priority_log10"] = math.copysign(math.log10(1.0 + abs(p)), p)
    return features


def found_workloads(workloads: Workloads, names: Sequence[str]) -> list[NodeWorkload | None]:
    if isinstance(workloads, list):
        if len(workloads) != len(names):
            raise ValueError(f"{len(workloads)} workloads for {len(names)} candidates")
        return workloads
    if workloads is None:
        return [None] * len(names)
    lookup = workloads.get if isinstance(workloads, Mapping) else workloads
    return list(map(lookup, names))


def node_columns_v2(
    pod: PodInfo,
    batch: CandidateBatch,
    energy: EnergyPlugin,
    workloads: Workloads = None,
    scores: EnergyScores | None = None,
) -> dict[str, np.ndarray]:
    """Every candidate's v2 node features as columns (NaN where unknown): node_columns() and
    the workload columns of each node's workload (looked up by name)."""
    columns = node_columns(pod, batch, energy, scores)
    found = found_workloads(workloads, batch.names)
    columns.update(workload_columns(found, batch.now, node_values(energy)))
    return columns


# -- what every caller builds from a schema's columns (v2 and v3 alike) ---------------------------

NodeColumns = Callable[
    [PodInfo, CandidateBatch, EnergyPlugin, Workloads, EnergyScores | None], dict[str, np.ndarray]
]


@dataclass(frozen=True)
class WorkloadSchema:
    """A feature schema whose node features read the nodes' workloads (v2, v3): its node
    columns and pod features, and the one implementation of what the plugin, the decision logs
    and training build from them. `pod_features(pod, lifetimes)`: the pod's features (v2
    ignores `lifetimes`, the predictor of the pod's remaining lifetime)."""

    schema: FeatureSchema
    node_columns: NodeColumns
    pod_features: Callable[[PodInfo, LifetimePredictor | None], Features]

    def rows(
        self,
        pod: PodInfo,
        batch: CandidateBatch,
        energy: EnergyPlugin,
        workloads: Workloads = None,
        lifetimes: LifetimePredictor | None = None,
        scores: EnergyScores | None = None,
    ) -> np.ndarray:
        """Model rows (candidates × schema.width): the node features, then the pod's."""
        columns = self.node_columns(pod, batch, energy, workloads, scores)
        pod_row = encode(self.pod_features(pod, lifetimes), self.schema.pod_features)
        return encode_columns(columns, self.schema.node_features, pod_row)

    def node_features(
        self,
        pod: PodInfo,
        node: NodeState,
        now: float,
        energy: EnergyPlugin,
        workload: NodeWorkload | None,
    ) -> Features:
        """The node features of one candidate (a batch of one; None where unknown)."""
        batch = CandidateBatch.of([node], now)
        return column_features(self.node_columns(pod, batch, energy, [workload], None))

    def batch_features(
        self,
        pod: PodInfo,
        batch: CandidateBatch,
        energy: EnergyPlugin,
        workloads: Workloads = None,
        lifetimes: LifetimePredictor | None = None,
    ) -> list[Features]:
        """The features (node then pod) of every row of `batch`, as the decision log writes
        them (None where unknown): the extender's recorder."""
        columns = self.node_columns(pod, batch, energy, workloads, None)
        pod_part = self.pod_features(pod, lifetimes)
        out = []
        for row in range(len(batch)):
            features = column_features(columns, row)
            features.update(pod_part)
            out.append(features)
        return out

    def candidate_matrix(
        self,
        pod: PodInfo,
        nodes: Sequence[NodeState],
        now: float,
        energy: EnergyPlugin,
        workloads: Workloads = None,
        lifetimes: LifetimePredictor | None = None,
    ) -> np.ndarray:
        """One row per candidate: the encoded node features followed by the pod's."""
        return self.rows(pod, CandidateBatch.of(nodes, now), energy, workloads, lifetimes)


class WorkloadFeatures:
    """The decision log's feature callback: `(pod, node, now) → features` in schema `version`,
    with the node's workload from `workload(name)` and the pod's lifetime predictor from
    `lifetimes()` (the standalone scheduler's cluster cache and its predictor; the
    simulator's). Each schema's subclass names its version (V2Features, V3Features)."""

    version: WorkloadSchema

    def __init__(
        self,
        energy: EnergyPlugin,
        workload: Callable[[str], NodeWorkload | None],
        lifetimes: Callable[[], LifetimePredictor | None] = lambda: None,
    ) -> None:
        self.energy = energy
        self.workload = workload
        self.lifetimes = lifetimes

    @property
    def schema(self) -> FeatureSchema:
        return self.version.schema

    def __call__(self, pod: PodInfo, node: NodeState, now: float) -> Features:
        version = self.version
        features = version.node_features(pod, node, now, self.energy, self.workload(node.info.name))
        features.update(version.pod_features(pod, self.lifetimes()))
        return features


V2 = WorkloadSchema(FEATURE_SCHEMA_V2, node_columns_v2, lambda pod, lifetimes: pod_features_v2(pod))
rows_v2 = V2.rows
candidate_matrix_v2 = V2.candidate_matrix


class V2Features(WorkloadFeatures):
    """The decision log's feature callback, v2."""

    version = V2
