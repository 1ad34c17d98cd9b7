"""Feature schema v1: what a learned scorer (and the decision collector) sees of a pod and of
each candidate node. Versioned and ordered: a model checkpoint stores `FEATURE_SCHEMA.to_dict()`
and is refused when it does not match (`FeatureSchema.check`).

Missing data is never encoded as a plausible value. `node_features()` returns `None` for what is
unknown (the decision collector writes `null`); `encode()` turns that into numbers for a model,
0.0 for the unknown value with the matching `*_known` / `telemetry_fresh` flag at 0, so a model can
tell "unknown" from "zero".

Node features (per candidate, in order):

| name | unit | meaning |
|---|---|---|
| `cpu_cores` | cores | node CPU cores (telemetry, else allocatable) |
| `cpu_requested_ratio` | 0..1+ | CPU requested by bound + assumed pods / allocatable |
| `memory_requested_ratio` | 0..1+ | memory requested / allocatable |
| `pod_count` | pods | pods bound or assumed on the node |
| `empty` | 0/1 | no pods on the node |
| `telemetry_fresh` | 0/1 | telemetry present and younger than the staleness limit |
| `telemetry_age_seconds` | s | age of the sample, capped at 3600; None without telemetry |
| `utilization` | 0..1 | measured CPU utilization at the sample |
| `cpu_since_sample_ratio` | 0..1+ | CPU requested since the sample / cores |
| `watts` | W | node power at the sample |
| `watts_measured` | 0/1 | that power came from RAPL |
| `curve_known` | 0/1 | a power curve is known (exported, configured or fitted) |
| `idle_watts` | W | curve at u = 0 |
| `max_watts` | W | curve at u = 1 |
| `pod_delta_utilization` | 0..1+ | the pod's CPU request / node cores |
| `delta_watts` | W | the heuristic's ΔP for this pod on this node |

Pod features (once per decision, in order): `cpu_request_cores` (cores, 0.1 when the pod
requests nothing, as kube-scheduler scores it), `memory_request_gib` (GiB).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.framework.batch import CandidateBatch
from scheduler.model import REASON_OK, NodeState, PodInfo
from scheduler.plugins.energy import request_cores as pod_request_cores
from scheduler.scorer import HeuristicScorer

SCHEMA_VERSION = "kubejoule.features/v1"

NODE_FEATURES: tuple[str, ...] = (
    "cpu_cores",
    "cpu_requested_ratio",
    "memory_requested_ratio",
    "pod_count",
    "empty",
    "telemetry_fresh",
    "telemetry_age_seconds",
    "utilization",
    "cpu_since_sample_ratio",
    "watts",
    "watts_measured",
    "curve_known",
    "idle_watts",
    "max_watts",
    "pod_delta_utilization",
    "delta_watts",
)
POD_FEATURES: tuple[str, ...] = ("cpu_request_cores", "memory_request_gib")

MAX_AGE_SECONDS = 3600.0
GIB = 2.0**30

Features = dict[str, float | None]


class SchemaMismatch(ValueError):
    """A checkpoint was built for another feature schema."""


@dataclass(frozen=True)
class FeatureSchema:
    version: str
    node_features: tuple[str, ...]
    pod_features: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "node_features": list(self.node_features),
            "pod_features": list(self.pod_features),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureSchema:
        try:
            return cls(
                version=str(data["version"]),
                node_features=tuple(str(n) for n in data["node_features"]),
                pod_features=tuple(str(n) for n in data["pod_features"]),
            )
        except (KeyError, TypeError) as exc:
            raise SchemaMismatch(f"not a feature schema: {exc}") from exc

    def check(self, other: Mapping[str, Any] | FeatureSchema) -> None:
        """Raise SchemaMismatch unless `other` (e.g. a checkpoint's schema) is this one."""
        theirs = other if isinstance(other, FeatureSchema) else FeatureSchema.from_dict(other)
        if theirs.version != self.version:
            raise SchemaMismatch(f"feature schema {theirs.version!r}, expected {self.version!r}")
        if theirs.node_features != self.node_features or theirs.pod_features != self.pod_features:
            raise SchemaMismatch(
                f"feature names or order differ from {self.version}: "
                f"node {list(theirs.node_features)}, pod {list(theirs.pod_features)}"
            )

    @property
    def width(self) -> int:
        """Length of one candidate's encoded vector (node features then pod features)."""
        return len(self.node_features) + len(self.pod_features)


FEATURE_SCHEMA = FeatureSchema(SCHEMA_VERSION, NODE_FEATURES, POD_FEATURES)


def pod_features(pod: PodInfo) -> Features:
    return {
        "cpu_request_cores": pod_request_cores(pod),
        "memory_request_gib": pod.requests.memory_bytes / GIB,
    }


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def energy_deltas(
    pod: PodInfo, nodes: Sequence[NodeState], now: float, scorer: HeuristicScorer
) -> list[tuple[float | None, str]]:
    """The energy plugin's (ΔP, reason) of every candidate, in one batch."""
    scores = scorer.energy.evaluate(pod, CandidateBatch.of(nodes, now))
    return [
        (None if delta != delta else delta, reason)
        for delta, reason in zip(scores.delta_watts.tolist(), scores.reasons(), strict=True)
    ]


def node_features(
    pod: PodInfo,
    node: NodeState,
    now: float,
    scorer: HeuristicScorer,
    energy: tuple[float | None, str] | None = None,
) -> Features:
    """The node features of one candidate; `scorer` supplies curves, staleness limit and ΔP
    (`energy`: the node's (ΔP, reason) from energy_deltas(), when already computed)."""
    telemetry = node.telemetry
    allocatable = node.info.allocatable
    cores = (telemetry.cores if telemetry is not None else None) or node.info.cpu_cores or None
    age = telemetry.age_seconds(now) if telemetry is not None else None
    fresh = (
        telemetry is not None
        and telemetry.utilization is not None
        and age is not None
        and age <= scorer.max_staleness_seconds
    )
    found = scorer.curve_for(node.info.name, telemetry)
    curve = found[0] if found is not None else None
    delta, reason = energy if energy is not None else scorer.delta_watts(pod, node, now)
    request_cores = pod_request_cores(pod)
    return {
        "cpu_cores": cores,
        "cpu_requested_ratio": _ratio(node.requested.cpu_millicores, allocatable.cpu_millicores),
        "memory_requested_ratio": _ratio(node.requested.memory_bytes, allocatable.memory_bytes),
        "pod_count": float(node.pod_count),
        "empty": 1.0 if node.pod_count == 0 else 0.0,
        "telemetry_fresh": 1.0 if fresh else 0.0,
        "telemetry_age_seconds": min(age, MAX_AGE_SECONDS) if age is not None else None,
        "utilization": telemetry.utilization if telemetry is not None else None,
        "cpu_since_sample_ratio": _ratio(node.cpu_since_sample_cores, cores) if cores else None,
        "watts": telemetry.watts if telemetry is not None else None,
        "watts_measured": 1.0 if telemetry is not None and telemetry.source == "rapl" else 0.0,
        "curve_known": 1.0 if curve is not None else 0.0,
        "idle_watts": curve.watts(0.0) if curve is not None else None,
        "max_watts": curve.watts(1.0) if curve is not None else None,
        "pod_delta_utilization": request_cores / cores if cores else None,
        "delta_watts": delta if reason == REASON_OK else None,
    }


def encode(features: Mapping[str, float | None], names: Sequence[str]) -> list[float]:
    """Features as numbers in schema order; unknown → 0.0 (its flag says it is unknown)."""
    out = []
    for name in names:
        value = features[name]
        out.append(0.0 if value is None else float(value))
    return out


def candidate_matrix(
    pod: PodInfo, nodes: Sequence[NodeState], now: float, scorer: HeuristicScorer
) -> list[list[float]]:
    """One row per candidate: encoded node features followed by the pod's features."""
    pod_row = encode(pod_features(pod), POD_FEATURES)
    return [
        encode(node_features(pod, node, now, scorer, energy), NODE_FEATURES) + pod_row
        for node, energy in zip(nodes, energy_deltas(pod, nodes, now, scorer), strict=True)
    ]
