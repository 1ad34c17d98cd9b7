"""Feature schema v1: names, order, missing values, checkpoint compatibility."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.curves import PowerCurve
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources
from scheduler.learning import features as features_module
from scheduler.learning.features import (
    FEATURE_SCHEMA,
    NODE_FEATURES,
    POD_FEATURES,
    FeatureSchema,
    SchemaMismatch,
    candidate_matrix,
    encode,
    node_features,
    pod_features,
)
from scheduler.plugins.energy import EnergyPlugin

NOW = 5000.0
GIB = 2**30


def make_pod() -> PodInfo:
    return pod_info_from_k8s(
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]
            },
        }
    )


def state(telemetry: NodeTelemetry | None, pods: int = 2) -> NodeState:
    return NodeState(
        info=NodeInfo("n1", Resources(cpu_millicores=8000, memory_bytes=16 * GIB, pods=110)),
        requested=Resources(cpu_millicores=2000, memory_bytes=4 * GIB, pods=pods),
        telemetry=telemetry,
        cpu_since_sample_cores=1.0,
        pod_count=pods,
    )


def test_features_of_a_node_with_fresh_telemetry() -> None:
    telemetry = NodeTelemetry(
        "n1", NOW - 3, watts=150.0, source="rapl", utilization=0.25, cores=8,
        curve_points=PowerCurve.linear(80, 240).as_points(),
    )
    features = node_features(make_pod(), state(telemetry), NOW, EnergyPlugin())
    assert list(features) == list(NODE_FEATURES)
    assert features["cpu_requested_ratio"] == pytest.approx(0.25)
    assert features["memory_requested_ratio"] == pytest.approx(0.25)
    assert features["telemetry_fresh"] == 1.0
    assert features["telemetry_age_seconds"] == pytest.approx(3.0)
    assert features["cpu_since_sample_ratio"] == pytest.approx(1 / 8)
    assert features["watts_measured"] == 1.0
    assert (features["idle_watts"], features["max_watts"]) == pytest.approx((80.0, 240.0))
    assert features["pod_delta_utilization"] == pytest.approx(0.5 / 8)
    assert features["delta_watts"] == pytest.approx(160 * 0.5 / 8)
    assert pod_features(make_pod()) == {"cpu_request_cores": 0.5, "memory_request_gib": 1.0}


def test_missing_telemetry_is_none_not_zero() -> None:
    features = node_features(make_pod(), state(None, pods=0), NOW, EnergyPlugin())
    for name in ("telemetry_age_seconds", "utilization", "watts", "idle_watts", "delta_watts"):
        assert features[name] is None, name
    assert features["telemetry_fresh"] == 0.0
    assert features["curve_known"] == 0.0
    assert features["empty"] == 1.0
    # Encoded, unknown values become 0.0 and their flags say so.
    row = encode(features, NODE_FEATURES)
    assert len(row) == len(NODE_FEATURES)
    assert row[NODE_FEATURES.index("watts")] == 0.0


def test_stale_telemetry_is_flagged() -> None:
    telemetry = NodeTelemetry("n1", NOW - 120, watts=150.0, source="estimated", utilization=0.5, cores=8)
    features = node_features(make_pod(), state(telemetry), NOW, EnergyPlugin())
    assert features["telemetry_fresh"] == 0.0
    assert features["watts_measured"] == 0.0
    assert features["delta_watts"] is None


def test_candidate_matrix_rows() -> None:
    telemetry = NodeTelemetry("n1", NOW - 1, watts=100.0, source="rapl", utilization=0.1, cores=8)
    rows = candidate_matrix(make_pod(), [state(telemetry), state(None)], NOW, EnergyPlugin())
    assert [len(r) for r in rows] == [FEATURE_SCHEMA.width] * 2
    assert rows[0][-len(POD_FEATURES):] == [0.5, 1.0]


def test_schema_round_trip_and_mismatch() -> None:
    saved = FEATURE_SCHEMA.to_dict()
    FEATURE_SCHEMA.check(saved)  # same schema: accepted
    FEATURE_SCHEMA.check(FeatureSchema.from_dict(saved))
    reordered = dict(saved, node_features=list(reversed(saved["node_features"])))
    with pytest.raises(SchemaMismatch, match="order"):
        FEATURE_SCHEMA.check(reordered)
    with pytest.raises(SchemaMismatch, match="v0"):
        FEATURE_SCHEMA.check(dict(saved, version="kubejoule.features/v0"))
    with pytest.raises(SchemaMismatch):
        FEATURE_SCHEMA.check({"version": "kubejoule.features/v1"})


def _documented(text: str, heading: str) -> list[str]:
    """Feature names of the Markdown table whose header row contains `heading`, in order."""
    names: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("|") and heading in line:
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside:
            match = re.match(r"^\|(?:[^|`]*\|)? `(\w+)` \|", line)  # "| 3 | `x` |" or "| `x` |"
            if match:
                names.append(match.group(1))
    return names


def test_the_schema_is_documented_in_order() -> None:
    """DESIGN.md's tables and this module's docstring list the features the code encodes, in
    the code's order (a model trained from the docs' order would read the wrong columns)."""
    design = (Path(__file__).resolve().parents[3] / "docs" / "DESIGN.md").read_text()
    assert _documented(design, "node feature") == list(NODE_FEATURES)
    assert _documented(design, "pod feature") == list(POD_FEATURES)
    assert features_module.__doc__ is not None
    assert _documented(features_module.__doc__, "| name |") == list(NODE_FEATURES)
    assert "kubejoule.features/v1" in design and FEATURE_SCHEMA.version == "kubejoule.features/v1"
