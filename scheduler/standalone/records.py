"""The decision line of a placement (`scheduler.decisionlog`), and the outcome it is tracked for."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from scheduler.decisionlog.logfile import DecisionLog
from scheduler.decisionlog.outcomes import OutcomeTracker
from scheduler.decisionlog.schema import (
    CandidateRecord,
    candidate_record,
    decision_extra,
    kept_candidates,
)
from scheduler.decisions.placement import Decision
from scheduler.domain.model import NodeState, PodInfo

if TYPE_CHECKING:
    from scheduler.learning.features import FeatureSchema

log = logging.getLogger(__name__)


class Features(Protocol):
    """The decision log's feature callback (`scheduler.learning`'s WorkloadFeatures): a node's
    features for a pod at a time, in the schema it names."""

    @property
    def schema(self) -> FeatureSchema: ...

    def __call__(self, pod: PodInfo, node: NodeState, now: float) -> Mapping[str, float | None]: ...


def _schema(features: Features | None) -> str | None:
    """The feature schema the candidates' features follow."""
    return features.schema.version if features is not None else None


def _candidates(
    decision: Decision, features: Features | None, pod: PodInfo, wall: float, max_candidates: int
) -> list[CandidateRecord]:
    """The candidates a decision line keeps: the top ones plus the chosen, recommended and
    default nodes."""
    names = decision.names
    indices = kept_candidates(
        decision.score,
        names,
        max_candidates,
        (decision.chosen, decision.recommended, decision.default_choice),
    )
    candidates = []
    for i in indices:
        state = decision.states[i]
        t = state.telemetry
        candidates.append(
            candidate_record(
                names[i],
                decision.score[i],
                float(decision.delta_watts[i]),
                decision.reason(i),
                default_score=int(decision.default_total[i]),
                telemetry_age_seconds=t.age_seconds(wall) if t is not None else None,
                features=features(pod, state, wall) if features else None,
            )
        )
    return candidates


def track_outcome(
    outcomes: OutcomeTracker | None, decision: Decision, decision_id: str, wall: float
) -> None:
    if outcomes is not None and decision.chosen is not None:
        before = decision.states[decision.names.index(decision.chosen)].telemetry
        outcomes.track(decision_id, decision.chosen, wall, before)


@contextmanager
def recorded_before_binding(
    decision_log: DecisionLog | None,
    outcomes: OutcomeTracker | None,
    features: Features | None,
    scorer_name: str,
    mode: str,
    pod: PodInfo,
    decision: Decision,
    wall: float,
) -> Iterator[None]:
    """Around the bind call: the decision line is written (through to the kernel) before the
    block runs, so no bound pod lacks its line whatever kills the process; if the block raises
    (the binding failed) an `abandoned` line follows, else the outcome is tracked. A log that
    cannot be written (a full disk) is logged and the pod still bound: scheduling never stops
    for the decision log."""
    if decision_log is None:
        yield
        return
    try:
        decision_id: str | None = decision_log.record_decision(
            source="standalone",
            mode=mode,
            pod=pod,
            candidates=_candidates(decision, features, pod, wall, decision_log.config.max_candidates),
            chosen=decision.chosen,
            recommended=decision.recommended,
            default_choice=decision.default_choice,
            scorer=scorer_name,
            wall_time=wall,
            extra=decision_extra(len(decision.names), _schema(features)),
        )
    except OSError:
        log.exception("decision log not written; binding %s without its line", pod.key)
        decision_id = None
    try:
        yield
    except BaseException as exc:
        if decision_id is not None:
            try:
                decision_log.record_abandoned(decision_id, f"binding failed: {type(exc).__name__}: {exc}")
            except OSError:
                log.exception("decision log not written (abandoned line of %s)", pod.key)
        raise
    if decision_id is not None:
        track_outcome(outcomes, decision, decision_id, wall)
