"""A node's workload as feature schemas v2 and v3 see it (`NodeWorkload`), from the cluster
cache's pods placed on it: their placement times and Job share, the predicted end of the last of
them, and cluster-autoscaler's marks on the node (ClusterCache.workload)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.cluster.node_table import Placed
from scheduler.domain.model import NodeInfo, NodeWorkload
from scheduler.lifetimes.predictor import LifetimePredictor

# cluster-autoscaler's soft taint (PreferNoSchedule) on nodes it found unneeded.
SCALE_DOWN_CANDIDATE_TAINT = "DeletionCandidateOfClusterAutoscaler"


def taint_time(value: str, now: float) -> float:
    """A cluster-autoscaler taint's value: the Unix second it was set; `now` if not one."""
    try:
        seconds = float(int(value.strip()))
    except ValueError:
        return now
    return seconds if seconds <= now else now


def node_workload(
    info: NodeInfo | None,
    pods: Sequence[Placed],
    now: float,
    lifetimes: LifetimePredictor | None,
    last_scale_up: float | None,
) -> NodeWorkload:
    """The workload of node `info` (None: not known) whose pods other than DaemonSet and mirror
    pods are `pods`: placement times and Job share of those pods; in the scale-down window when
    cluster-autoscaler has marked it a deletion candidate (its soft taint); ready since its
    Ready condition's last transition to True (None: unknown). v3: the predicted end of the
    last of those pods (`lifetimes`, at each pod's age now; None without a predictor), the
    deletion-candidate taint and its value (the Unix time cluster-autoscaler marked the node,
    as its `GetTaintTime` reads it; a value that is not one: marked now), and
    `last_scale_up`, the newest node's ready time."""
    taint = next(
        (t for t in info.taints if t.key == SCALE_DOWN_CANDIDATE_TAINT), None
    ) if info is not None else None
    end = None
    if lifetimes is not None:
        predict = lifetimes.predict_remaining
        end = max((p.placed_at + predict(p.info, now - p.placed_at) for p in pods), default=now)
        end = max(end, now)
    return NodeWorkload(
        pod_start_times=tuple(p.placed_at for p in pods),
        job_pods=sum(1 for p in pods if p.info.owner_kind == "Job"),
        ready_since=info.ready_since if info is not None else None,
        in_scale_down_window=taint is not None,
        pods_end_at=end,
        autoscaler_known=info is not None,
        deletion_candidate=taint is not None,
        unneeded_since=taint_time(taint.value, now) if taint is not None else None,
        last_scale_up=last_scale_up,
    )
