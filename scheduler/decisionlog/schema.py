"""The decision log's records (schema `kubejoule.decision/v1`): one builder per line kind, so every
writer (standalone scheduler, extender, simulator) writes the same keys in the same order.

* `"type": "decision"` — a pod placed (or, for the extender in shadow mode, a recommendation):
  time, pod, every candidate (up to `max_candidates`, best first, plus the chosen, recommended
  and default nodes) with its energy score, ΔP, reason, default kube-scheduler score,
  feature-schema features and telemetry age; the node chosen, the recommendation, the default
  choice, the mode.
* `"type": "outcome"` — the chosen node's power before (at the decision) and after (the first
  sample at least the window later), their sources, and `"measured": true` only when both powers
  came from RAPL.
* `"type": "abandoned"` — a decision whose binding failed, with the reason.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.domain.model import NodeTelemetry, PodInfo
from scheduler.framework.decision import ranked

SCHEMA = "kubejoule.decision/v1"
GIB = 2.0**30


@dataclass(frozen=True)
class CandidateRecord:
    node: str
    score: float  # the energy scorer's 0–100
    delta_watts: float | None = None
    reason: str = "ok"
    default_score: int | None = None  # kube-scheduler's fit + balanced (0–200)
    telemetry_age_seconds: float | None = None
    features: Mapping[str, float | None] | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "score": self.score,
            "delta_watts": self.delta_watts,
            "reason": self.reason,
            "default_score": self.default_score,
            "telemetry_age_seconds": self.telemetry_age_seconds,
            "features": dict(self.features) if self.features is not None else None,
        }


def _known(value: float | None) -> float | None:
    return None if value is None or value != value else float(value)  # NaN: unknown


def candidate_record(
    node: str,
    score: float,
    delta_watts: float | None,
    reason: str,
    *,
    default_score: int | None = None,
    telemetry_age_seconds: float | None = None,
    features: Mapping[str, float | None] | None = None,
) -> CandidateRecord:
    """One candidate of a decision line, as every writer records it (NaN watts or age: unknown)."""
    return CandidateRecord(
        node=node,
        score=float(score),
        delta_watts=_known(delta_watts),
        reason=reason,
        default_score=default_score,
        telemetry_age_seconds=_known(telemetry_age_seconds),
        features=features,
    )


def kept_candidates(
    score: np.ndarray, names: Sequence[str], limit: int, keep: Iterable[str | None]
) -> list[int]:
    """Indices of the candidates a decision line keeps, best first (ties by node name): the
    `limit` best scores plus the nodes named in `keep` (chosen, recommended, default choice) —
    computed before the candidates' features, which cost the most to record."""
    indices = ranked(score, names, limit)
    present = {names[i] for i in indices}
    for name in keep:
        if name is None or name in present:
            continue
        index = next((i for i, n in enumerate(names) if n == name), None)
        if index is not None:
            indices.append(index)
            present.add(name)
    indices.sort(key=lambda i: (-float(score[i]), names[i]))
    return indices


def decision_extra(candidate_count: int, feature_schema: str | None) -> dict[str, object]:
    """The fields every writer adds to its decision lines: how many nodes were candidates (before
    the line kept its best) and the feature schema of the candidates' features, when they have
    some."""
    extra: dict[str, object] = {"candidate_count": candidate_count}
    if feature_schema is not None:
        extra["feature_schema"] = feature_schema
    return extra


def _line(kind: str, decision_id: str, wall_time: float | None) -> dict[str, object]:
    """What every line starts with: the schema, its kind, the decision's id and the time."""
    return {
        "schema": SCHEMA,
        "type": kind,
        "id": decision_id,
        "time": time.time() if wall_time is None else wall_time,
    }


def decision_record(
    *,
    source: str,
    mode: str,
    pod: PodInfo,
    candidates: Sequence[CandidateRecord],
    chosen: str | None,
    recommended: str | None,
    default_choice: str | None,
    scorer: str,
    max_candidates: int,
    wall_time: float | None = None,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """One decision line, with a new id (`record["id"]`, for its outcome line)."""
    decision_id = uuid.uuid4().hex
    keep = {n for n in (chosen, recommended, default_choice) if n}
    ranked = sorted(candidates, key=lambda c: (-c.score, c.node))
    kept = ranked[:max_candidates]
    kept_names = {c.node for c in kept}
    kept += [c for c in ranked[max_candidates:] if c.node in keep - kept_names]
    record: dict[str, object] = {
        **_line("decision", decision_id, wall_time),
        "source": source,
        "mode": mode,
        "scorer": scorer,
        "pod": {
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
            "cpu_request_cores": pod.requests.cpu_millicores / 1000.0,
            "memory_request_gib": pod.requests.memory_bytes / GIB,
        },
        "chosen": chosen,
        "recommended": recommended,
        "default_choice": default_choice,
        "candidate_count": len(candidates),
        "candidates": [c.to_json() for c in kept],
    }
    if extra:
        record.update(extra)
    return record


def abandoned_record(decision_id: str, reason: str, wall_time: float | None = None) -> dict[str, object]:
    """The decision `decision_id` did not take effect (its binding failed)."""
    return {**_line("abandoned", decision_id, wall_time), "reason": reason}


def outcome_record(
    decision_id: str,
    node: str,
    window_seconds: float,
    before: NodeTelemetry | None,
    after: NodeTelemetry | None,
    wall_time: float | None = None,
) -> dict[str, object]:
    """What happened on the chosen node `window_seconds` after the decision."""
    measured = (
        before is not None
        and after is not None
        and before.watts is not None
        and after.watts is not None
        and before.source == "rapl"
        and after.source == "rapl"
    )
    return {
        **_line("outcome", decision_id, wall_time),
        "node": node,
        "window_seconds": window_seconds,
        "watts_before": before.watts if before is not None else None,
        "source_before": before.source if before is not None else "none",
        "sample_time_before": before.sample_time if before is not None else None,
        "watts_after": after.watts if after is not None else None,
        "source_after": after.source if after is not None else "none",
        "sample_time_after": after.sample_time if after is not None else None,
        "measured": measured,
    }
