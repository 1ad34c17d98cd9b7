"""Feature schema v3: v2 (`scheduler.learning.features_v2`) plus what decides a placement's energy under
cluster-autoscaler — how long the work on a node and the pod itself will last (the lifetime
predictor, `scheduler.lifetimes`), what the autoscaler thinks of the node, and how many watts the
node spends per unit of load.

Node features, after v2's (in order):

| name | unit | meaning |
|---|---|---|
| `lifetimes_known` | 0/1 | a lifetime predictor answered for the node's pods |
| `predicted_seconds_until_pods_end` | s | predicted time until the last of the node's pods (DaemonSet pods excepted) ends, capped at 86 400; 0 without such pods; None unknown |
| `below_scale_down_threshold` | 0/1 | the larger of the node's CPU and memory requests over allocatable is at or below cluster-autoscaler's shipped threshold (0.5): a candidate for scale-down once its pods can move |
| `autoscaler_known` | 0/1 | the scheduler knows the autoscaler's marks on the node |
| `deletion_candidate` | 0/1 | cluster-autoscaler considers the node unneeded (its `DeletionCandidateOfClusterAutoscaler` soft taint); None unknown |
| `unneeded_seconds` | s | for how long it has (the taint's value is the time it was marked), capped at 86 400; 0 when not unneeded; None unknown |
| `seconds_since_scale_up` | s | time since the cluster's last scale-up, capped at 86 400; None unknown |
| `full_load_watts_per_core` | W | the curve's full-load power over the node's cores; None without a curve |
| `watts_per_busy_core` | W | the sampled power over the busy cores (utilization × cores); None without fresh-enough telemetry or below 1 % utilization |

Pod features, after v2's: `predicted_lifetime_seconds` (the pod's predicted remaining lifetime
at its age, 0 for a new pod, capped at 86 400; None without a predictor) and
`lifetime_from_history` (0/1: that prediction rests on finished pods of its workload, not only
on its owner kind's prior).

Where the values come from: the lifetime and autoscaler fields of a node are filled into its
`NodeWorkload` by whoever knows them — the standalone scheduler's cluster cache
(`ClusterCache.workload`: its lifetime predictor, the taint and its value, the newest node's
ready time as the last scale-up) and the simulator (`rl.policies.sim_features`: the simulator's
autoscaler and a predictor learning from the pods that finish) — and the pod's prediction from
the `LifetimePredictor` passed in. Everything else is computed here from the batch's columns, one
implementation for the plugin, the decision logs and training.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.domain.cluster_defaults import SCALE_DOWN_UTILIZATION_THRESHOLD
from scheduler.domain.model import NodeWorkload, PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.learning.features import Features, FeatureSchema
from scheduler.learning.features_v2 import (
    MAX_WORKLOAD_AGE_SECONDS,
    NODE_FEATURES_V2,
    POD_FEATURES_V2,
    WorkloadFeatures,
    Workloads,
    WorkloadSchema,
    clip_seconds,
    found_workloads,
    node_columns_v2,
    pod_features_v2,
)
from scheduler.lifetimes import LEVEL_PRIOR, LifetimePredictor
from scheduler.plugins.energy import EnergyPlugin, EnergyScores

SCHEMA_VERSION_V3 = "kubejoule.features/v3"
MAX_SECONDS = MAX_WORKLOAD_AGE_SECONDS  # the same one-day cap as v2
MIN_BUSY_UTILIZATION = 0.01

NODE_FEATURES_V3: tuple[str, ...] = NODE_FEATURES_V2 + (
    "lifetimes_known",
    "predicted_seconds_until_pods_end",
    "below_scale_down_threshold",
    "autoscaler_known",
    "deletion_candidate",
    "unneeded_seconds",
    "seconds_since_scale_up",
    "full_load_watts_per_core",
    "watts_per_busy_core",
)
POD_FEATURES_V3: tuple[str, ...] = POD_FEATURES_V2 + (
    "predicted_lifetime_seconds",
    "lifetime_from_history",
)
FEATURE_SCHEMA_V3 = FeatureSchema(SCHEMA_VERSION_V3, NODE_FEATURES_V3, POD_FEATURES_V3)

_NAN = float("nan")


def _v3_values(found: Sequence[NodeWorkload | None]) -> np.ndarray:
    """Per node: lifetimes known, pods' end, autoscaler known, candidate, unneeded since, last
    scale-up (NaN where unknown)."""
    rows = []
    for w in found:
        if w is None:
            rows.append((0.0, _NAN, 0.0, _NAN, _NAN, _NAN))
            continue
        known = w.pods_end_at is not None
        marks = w.autoscaler_known
        rows.append((
            1.0 if known else 0.0,
            w.pods_end_at if w.pods_end_at is not None else _NAN,
            1.0 if marks else 0.0,
            (1.0 if w.deletion_candidate else 0.0) if marks else _NAN,
            (w.unneeded_since if w.unneeded_since is not None else np.inf) if marks else _NAN,
            w.last_scale_up if w.last_scale_up is not None else _NAN,
        ))
    return np.array(rows, dtype=np.float64).reshape(len(found), 6)


def node_columns_v3(
    pod: PodInfo,
    batch: CandidateBatch,
    energy: EnergyPlugin,
    workloads: Workloads = None,
    scores: EnergyScores | None = None,
) -> dict[str, np.ndarray]:
    """Every candidate's v3 node features as columns (NaN where unknown)."""
    found = found_workloads(workloads, batch.names)
    columns = node_columns_v2(pod, batch, energy, found, scores)
    now = batch.now
    values = _v3_values(found)
    cpu, mem = columns["cpu_requested_ratio"], columns["memory_requested_ratio"]
    with np.errstate(invalid="ignore"):
        below = np.fmax(cpu, mem) <= SCALE_DOWN_UTILIZATION_THRESHOLD
    cores = columns["cpu_cores"]
    busy = columns["utilization"] * cores
    fresh = columns["telemetry_fresh"] > 0.5
    with np.errstate(invalid="ignore", divide="ignore"):
        per_core = np.where(cores > 0, columns["max_watts"] / cores, np.nan)
        ok = fresh & (columns["utilization"] >= MIN_BUSY_UTILIZATION) & (cores > 0)
        per_busy = np.where(ok, columns["watts"] / np.where(ok, busy, 1.0), np.nan)
        unneeded = np.where(np.isinf(values[:, 4]), 0.0, clip_seconds(now - values[:, 4]))
    columns.update({
        "lifetimes_known": values[:, 0],
        "predicted_seconds_until_pods_end": clip_seconds(values[:, 1] - now),
        "below_scale_down_threshold": below.astype(np.float64),
        "autoscaler_known": values[:, 2],
        "deletion_candidate": values[:, 3],
        "unneeded_seconds": unneeded,
        "seconds_since_scale_up": clip_seconds(now - values[:, 5]),
        "full_load_watts_per_core": per_core,
        "watts_per_busy_core": per_busy,
    })
    return columns


def pod_features_v3(
    pod: PodInfo, lifetimes: LifetimePredictor | None, age_s: float = 0.0
) -> Features:
    """The pod's v3 features: v2's and its predicted remaining lifetime at `age_s`."""
    features = pod_features_v2(pod)
    if lifetimes is None:
        features["predicted_lifetime_seconds"] = None
        features["lifetime_from_history"] = None
        return features
    prediction = lifetimes.predict(pod, age_s)
    seconds = prediction.remaining_s
    ok = seconds == seconds
    features["predicted_lifetime_seconds"] = min(max(seconds, 0.0), MAX_SECONDS) if ok else None
    features["lifetime_from_history"] = 0.0 if prediction.level == LEVEL_PRIOR else 1.0
    return features


V3 = WorkloadSchema(FEATURE_SCHEMA_V3, node_columns_v3, pod_features_v3)
rows_v3 = V3.rows
batch_features_v3 = V3.batch_features
candidate_matrix_v3 = V3.candidate_matrix


class V3Features(WorkloadFeatures):
    """The decision log's feature callback, v3 (the pod's lifetime from `lifetimes()`)."""

    version = V3
