"""Feature schema v2: v1 (`scheduler.features`) plus what a real scheduler can see that the
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
`NodeWorkload`, or None when unknown (then `workload_known` is 0 and the workload features None).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.features import (
    NODE_FEATURES,
    POD_FEATURES,
    Features,
    FeatureSchema,
    encode,
    energy_deltas,
    node_features,
    pod_features,
)
from scheduler.model import NodeState, PodInfo
from scheduler.scorer import HeuristicScorer

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


@dataclass(frozen=True)
class NodeWorkload:
    """What the scheduler knows of a node's pods and life, DaemonSet pods excepted."""

    pod_start_times: tuple[float, ...] = ()  # when each non-DaemonSet pod was placed
    job_pods: int = 0  # how many of them a Job owns
    ready_since: float | None = None  # when the node became ready; None: unknown
    in_scale_down_window: bool = False


def _age(now: float, since: float) -> float:
    return min(max(0.0, now - since), MAX_WORKLOAD_AGE_SECONDS)


def workload_features(workload: NodeWorkload | None, now: float) -> Features:
    if workload is None:
        return {
            "workload_known": 0.0,
            "youngest_pod_age_seconds": None,
            "oldest_pod_age_seconds": None,
            "job_pod_share": None,
            "seconds_since_boot": None,
            "in_scale_down_window": 0.0,
        }
    starts = workload.pod_start_times
    return {
        "workload_known": 1.0,
        "youngest_pod_age_seconds": _age(now, max(starts)) if starts else None,
        "oldest_pod_age_seconds": _age(now, min(starts)) if starts else None,
        "job_pod_share": workload.job_pods / len(starts) if starts else None,
        "seconds_since_boot": (
            _age(now, workload.ready_since) if workload.ready_since is not None else None
        ),
        "in_scale_down_window": 1.0 if workload.in_scale_down_window else 0.0,
    }


def pod_features_v2(pod: PodInfo) -> Features:
    features = pod_features(pod)
    column = _OWNER_COLUMNS.get(pod.owner_kind or "", "owner_other" if pod.owner_kind else None)
    for name in ("owner_job", "owner_replicaset", "owner_statefulset", "owner_other"):
        features[name] = 1.0 if name == column else 0.0
    p = float(pod.priority)
    features["priority_log10"] = math.copysign(math.log10(1.0 + abs(p)), p)
    return features


def node_features_v2(
    pod: PodInfo,
    node: NodeState,
    now: float,
    scorer: HeuristicScorer,
    workload: NodeWorkload | None,
    energy: tuple[float | None, str] | None = None,
) -> Features:
    features = node_features(pod, node, now, scorer, energy)
    features.update(workload_features(workload, now))
    return features


class V2Features:
    """The collector's feature callback, v2: `(pod, node, now) → features` with the node's
    workload from `workload(name)` (the standalone scheduler's cluster cache)."""

    schema = FEATURE_SCHEMA_V2

    def __init__(self, scorer: HeuristicScorer, workload: Callable[[str], NodeWorkload | None]):
        self.scorer = scorer
        self.workload = workload

    def __call__(self, pod: PodInfo, node: NodeState, now: float) -> Features:
        features = node_features_v2(pod, node, now, self.scorer, self.workload(node.info.name))
        features.update(pod_features_v2(pod))
        return features


def candidate_matrix_v2(
    pod: PodInfo,
    nodes: Sequence[NodeState],
    now: float,
    scorer: HeuristicScorer,
    workloads: Mapping[str, NodeWorkload] | None = None,
) -> list[list[float]]:
    """One row per candidate: encoded v2 node features followed by the pod's v2 features."""
    pod_row = encode(pod_features_v2(pod), POD_FEATURES_V2)
    known = workloads or {}
    return [
        encode(
            node_features_v2(pod, node, now, scorer, known.get(node.info.name), energy),
            NODE_FEATURES_V2,
        )
        + pod_row
        for node, energy in zip(nodes, energy_deltas(pod, nodes, now, scorer), strict=True)
    ]
