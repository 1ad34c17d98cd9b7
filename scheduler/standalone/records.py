"""The decision line of a placement (`collector.py`), and the outcome it is tracked for."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scheduler.collector import CandidateRecord, DecisionCollector, OutcomeTracker
from scheduler.decide import Decision
from scheduler.model import NodeState, PodInfo

Features = Callable[[PodInfo, NodeState, float], Mapping[str, float | None]]


def _schema(features: Features | None) -> dict[str, str]:
    """The feature schema the candidates' features follow, when the callback says."""
    schema = getattr(features, "schema", None)
    return {"feature_schema": schema.version} if schema is not None else {}


def record_decision(
    collector: DecisionCollector,
    outcomes: OutcomeTracker | None,
    features: Features | None,
    scorer_name: str,
    mode: str,
    pod: PodInfo,
    decision: Decision,
    wall: float,
) -> None:
    """Write the decision: the top candidates plus the chosen, recommended and default nodes."""
    names = decision.names
    keep = [
        names.index(n)
        for n in {decision.chosen, decision.recommended, decision.default_choice}
        if n is not None
    ]
    indices = decision.ranked(collector.config.max_candidates)
    indices += [i for i in keep if i not in indices]
    candidates = []
    for i in indices:
        state = decision.states[i]
        t = state.telemetry
        delta = float(decision.delta_watts[i])
        candidates.append(
            CandidateRecord(
                node=names[i],
                score=float(decision.score[i]),
                delta_watts=None if delta != delta else delta,
                reason=decision.reason(i),
                default_score=int(decision.default_total[i]),
                telemetry_age_seconds=t.age_seconds(wall) if t is not None else None,
                features=features(pod, state, wall) if features else None,
            )
        )
    decision_id = collector.record_decision(
        source="standalone",
        mode=mode,
        pod=pod,
        candidates=candidates,
        chosen=decision.chosen,
        recommended=decision.recommended,
        default_choice=decision.default_choice,
        scorer=scorer_name,
        wall_time=wall,
        extra={"candidate_count": len(names), **_schema(features)},
    )
    if outcomes is not None and decision.chosen is not None:
        before = decision.states[names.index(decision.chosen)].telemetry
        outcomes.track(decision_id, decision.chosen, wall, before)
