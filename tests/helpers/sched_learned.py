"""A small learned model written for the tests, and the pod and nodes they score, shared by
tests/scheduler/learning/test_sched_learned*.py and tests/rl/policies/test_rl_features_v3.py."""

from __future__ import annotations

import numpy as np

from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources
from scheduler.learning.features_v2 import FEATURE_SCHEMA_V2
from scheduler.learning.numpy_model import (
    save_numpy_model,
)

WIDTH = FEATURE_SCHEMA_V2.width
CURVE = (50.0, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150)


def write_model(path, schema=FEATURE_SCHEMA_V2, kind="dqn", width=WIDTH, seed=0):
    rng = np.random.default_rng(seed)
    layers = [
        (rng.normal(size=(8, width)), rng.normal(size=8)),
        (rng.normal(size=(1, 8)), rng.normal(size=1)),
    ]
    meta = {
        "kind": kind,
        "feature_schema": schema.to_dict(),
        "score_map": {"center": 0.0, "spread": 2.0, "sign": 1.0},
    }
    save_numpy_model(path, layers, np.zeros(width), np.full(width, 10.0), meta)
    return path


def node(name, cores=8, utilization=0.3, requested_cpu=2000, sample_time=100.0, pods=2):
    return NodeState(
        info=NodeInfo(name, Resources(cores * 1000, 32 * 2**30, 110)),
        requested=Resources(requested_cpu, 2**30, pods),
        telemetry=NodeTelemetry(
            name,
            sample_time,
            watts=90.0,
            source="rapl",
            utilization=utilization,
            cores=cores,
            curve_points=CURVE,
        ),
        pod_count=pods,
    )


POD = PodInfo("ns", "p", "u", Resources(500, 2**29, 1), owner_kind="Job")
NODES = [
    node("a"),
    node("b", cores=16, utilization=0.7),
    node("c", utilization=0.0, pods=0),
    node("d", cores=4, requested_cpu=3000),
]
