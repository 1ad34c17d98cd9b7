"""What the extender would have chosen: one `ExtenderCall` per call (what the decision log records of it), and the recorders it goes to."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np

from scheduler.domain.model import REASON_OK, REASONS, NodeState, PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.plugins.energy import EnergyScores

log = logging.getLogger(__name__)


class ExtenderCall:
    """One extender call as the decision log needs it.

    `names` are the nodes asked about, in order; `candidates` their batch (the same rows, at
    the call's time; its columns give the decision log its features); `scores` the energy
    plugin's evaluation of the pod over them (prioritize; None for filter), reasons as codes
    (`REASONS` names them when a line is written). `candidates` may be built lazily: the first
    access pays for it, so a recorder that only counts or samples decisions stays cheap on the
    request path.
    """

    def __init__(
        self,
        verb: str,
        mode: str,
        wall_time: float,
        pod: PodInfo,
        names: Sequence[str],
        candidates: CandidateBatch | Callable[[], CandidateBatch],
        scores: EnergyScores | None,
        recommended: str | None,
        failed: Mapping[str, str] | None = None,
    ) -> None:
        self.verb = verb  # "prioritize" | "filter"
        self.mode = mode
        self.wall_time = wall_time
        self.pod = pod
        self.names = names
        self.scores = scores
        self.recommended = recommended  # the energy-best node (prioritize)
        self.failed: Mapping[str, str] = failed or {}  # filter: node → why it would fail
        self._candidates = candidates

    @cached_property
    def candidates(self) -> CandidateBatch:
        """The batch of `names`, in the same order."""
        found = self._candidates
        return found() if callable(found) else found

    @property
    def nodes(self) -> Sequence[NodeState]:
        """The NodeStates of `names`, in the same order."""
        return self.candidates.states


class CallRecorder(Protocol):
    """Where extender calls go. Called on the request path: must be cheap and must not raise (the
    decision log's ExtenderRecorder only enqueues; a thread of its own does the work, and
    hands the request a `Pending` write to wait for, see `awaiting_writes`).
    A CountingRecorder (counts by name) gets them exported in /metrics."""

    def record(self, decision: ExtenderCall) -> None: ...


@runtime_checkable
class CountingRecorder(CallRecorder, Protocol):
    """A recorder that counts what it did by name (the decision log's ExtenderRecorder)."""

    def stats(self) -> dict[str, int]: ...


@dataclass(frozen=True)
class Pending:
    """A decision line on its way to the decision log: the response waits for `written`
    (True once the line is in the kernel), at most `timeout_seconds`."""

    written: Future[bool]
    timeout_seconds: float


_pending: ContextVar[list[Pending] | None] = ContextVar("kubejoule_pending_decisions", default=None)


@contextmanager
def awaiting_writes() -> Iterator[list[Pending]]:
    """Collects the `Pending` writes recorders announce (`expect_write`) while answering one
    request in this context: the app sends the response once they are done."""
    pending: list[Pending] = []
    token = _pending.set(pending)
    try:
        yield pending
    finally:
        _pending.reset(token)


def expect_write(pending: Pending) -> None:
    """A recorder announces a line the current response should wait for (nothing happens
    outside `awaiting_writes`)."""
    collecting = _pending.get()
    if collecting is not None:
        collecting.append(pending)


@dataclass(frozen=True)
class RecentCall:
    """What MemoryRecorder keeps of a call: a few words, whatever the number of nodes."""

    verb: str
    mode: str
    wall_time: float
    pod: str  # namespace/name
    recommended: str | None
    nodes: int  # nodes asked about
    failed: int  # nodes power caps would exclude (filter)


class MemoryRecorder:
    """Keeps a summary of the last `size` decisions in memory and logs each recommendation.
    Not the calls themselves: each holds its candidates' batch, whose size the caller chooses
    (1,000 calls of 1,000 nodes never sent before held 500 MB)."""

    def __init__(self, size: int = 1000) -> None:
        self.decisions: deque[RecentCall] = deque(maxlen=size)

    def record(self, decision: ExtenderCall) -> None:
        self.decisions.append(RecentCall(
            decision.verb, decision.mode, decision.wall_time, decision.pod.key, decision.recommended,
            len(decision.names), len(decision.failed),
        ))
        if decision.verb == "prioritize":
            log.info(
                "%s %s: energy recommends %s",
                decision.mode, decision.pod.key, decision.recommended,
            )
        elif decision.failed:
            log.info(
                "%s %s: power caps would exclude %s", decision.mode, decision.pod.key,
                sorted(decision.failed),
            )


def recommend_batch(names: Sequence[str], scores: EnergyScores) -> str | None:
    """The best-scored node; ties go to the smaller ΔP, then the name (deterministic).
    None when no node had usable telemetry: there is nothing to recommend on."""
    ok = scores.reason == REASONS.index(REASON_OK)
    if not ok.any():
        return None
    best = scores.score[ok].max()
    tied = np.flatnonzero(ok & (scores.score == best))
    deltas = scores.delta_watts
    return min((float(deltas[i]), names[i]) for i in tied.tolist())[1]
