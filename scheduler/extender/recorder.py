"""The extender's decisions in the decision log (`scheduler/decisionlog/schema.py`): shadow-mode
recommendations become decision lines, written before their response is sent."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from scheduler.decisionlog.logfile import DecisionLog
from scheduler.decisionlog.schema import (
    CandidateRecord,
    candidate_record,
    decision_extra,
    kept_candidates,
)
from scheduler.domain.model import REASONS, PodInfo
from scheduler.extender.calls import CallRecorder, ExtenderCall, Pending, expect_write
from scheduler.framework.batch import CandidateBatch
from scheduler.learning.features import Features, telemetry_ages
from scheduler.plugins.energy import EnergyPlugin
from scheduler.service.background import BackgroundQueue

log = logging.getLogger(__name__)

# Extender decisions waiting for the recorder thread. At ~1–10 ms of recording per decision
# (thousands of candidates with features), 1,024 absorbs bursts of several seconds.
DEFAULT_RECORDER_QUEUE_SIZE = 1024
# How long a response waits for its decision line before it is sent anyway (the line is then
# counted `late`): well inside kube-scheduler's extender httpTimeout (1 s in our example).
DEFAULT_WRITE_WAIT_SECONDS = 0.5


class ExtenderRecorder:
    """Sends the extender's prioritize decisions to a DecisionLog (`"source":
    "extender"`, `"chosen": null`: the extender does not learn where kube-scheduler finally put
    the pod).

    `record()` runs on the request path: it puts the decision on a bounded queue
    (`queue_size`) and announces the pending line (`expect_write`), so the app sends the
    response only once one background thread has sorted the candidates, computed their
    features and written the line (a `write(2)`: `kill -9` then loses nothing answered). Under
    overload the guarantee gives way, counted, never the request: a full queue drops the
    decision at once (`dropped`), and a response waits at most `write_wait_seconds` for its
    line (`late` lines are still written). Never raises. `close()` records what is queued (up
    to a timeout) before the caller closes the decision log, so a clean shutdown loses nothing.
    """

    def __init__(
        self,
        decision_log: DecisionLog,
        energy: EnergyPlugin,
        also: CallRecorder | None = None,
        features: Callable[[PodInfo, CandidateBatch], Sequence[Features]] | None = None,
        scorer: str = "heuristic",
        feature_schema: str | None = None,
        queue_size: int = DEFAULT_RECORDER_QUEUE_SIZE,
        write_wait_seconds: float = DEFAULT_WRITE_WAIT_SECONDS,
    ) -> None:
        self.decision_log = decision_log
        self.energy = energy  # the extender's: its columns give the telemetry ages
        self.also = also  # another recorder to forward to (e.g. the extender's MemoryRecorder)
        self.features = features
        self.feature_schema = feature_schema  # written on every line when features are
        self.scorer = scorer
        self.write_wait_seconds = write_wait_seconds
        self.late = 0
        self._worker: BackgroundQueue[tuple[ExtenderCall, Future[bool], float]] = BackgroundQueue(
            "decision-recorder", queue_size, self._record, self._failed
        )

    def record(self, decision: ExtenderCall) -> None:
        """On the request path: forward to `also`, enqueue, announce the pending line."""
        if self.also is not None:
            self.also.record(decision)
        if decision.verb != "prioritize":
            return
        written: Future[bool] = Future()
        if self._worker.submit((decision, written, time.monotonic())):
            expect_write(Pending(written, self.write_wait_seconds))

    def stats(self) -> dict[str, int]:
        """Counts for the extender's metrics: recorded, dropped, failed, late, queued."""
        worker = self._worker
        return {
            "recorded": worker.done,
            "dropped": worker.dropped,
            "failed": worker.failed,
            "late": self.late,
            "queued": len(worker),
        }

    @property
    def errors(self) -> int:
        """Decisions whose recording failed."""
        return self._worker.failed

    @staticmethod
    def _failed(exc: Exception) -> None:
        log.debug("recording a decision failed", exc_info=exc)

    def drain(self, timeout_seconds: float = 5.0) -> bool:
        """Wait until every decision queued so far is recorded; False on timeout."""
        return self._worker.drain(timeout_seconds)

    def close(self, timeout_seconds: float = 10.0) -> None:
        """Record what is queued (up to the timeout), then stop the thread. Later decisions
        are dropped. Close the decision log after this."""
        self._worker.stop(timeout_seconds)

    def _record(self, item: tuple[ExtenderCall, Future[bool], float]) -> None:
        decision, written, queued_at = item
        try:
            self._write(decision)
        except BaseException:
            written.set_result(False)
            raise
        if time.monotonic() - queued_at > self.write_wait_seconds:
            self.late += 1
        written.set_result(True)

    def _schema(self) -> str | None:
        return self.feature_schema if self.features is not None else None

    def _write(self, decision: ExtenderCall) -> None:
        wall = float(decision.wall_time)
        scores = decision.scores
        assert scores is not None  # prioritize calls only
        names = decision.names
        limit = self.decision_log.config.max_candidates
        kept = kept_candidates(scores.score, names, limit, (decision.recommended,))
        candidates: list[CandidateRecord] = []
        if kept:
            chosen = decision.candidates.take(kept)
            ages = telemetry_ages(chosen, self.energy)
            features = self.features(decision.pod, chosen) if self.features is not None else None
            for k, i in enumerate(kept):
                candidates.append(
                    candidate_record(
                        names[i],
                        scores.score[i],
                        float(scores.delta_watts[i]),
                        REASONS[int(scores.reason[i])],
                        telemetry_age_seconds=float(ages[k]),
                        features=features[k] if features is not None else None,
                    )
                )
        self.decision_log.record_decision(
            source="extender",
            mode=str(decision.mode),
            pod=decision.pod,
            candidates=candidates,
            chosen=None,
            recommended=decision.recommended,
            default_choice=None,
            scorer=self.scorer,
            wall_time=wall,
            extra=decision_extra(len(names), self._schema()),
        )
