"""Decision collector: what the scheduler decided and what happened next, as JSON lines.

Two kinds of line (schema `kubejoule.decision/v1`), one JSON object per line:

* `"type": "decision"` — written when a pod is placed (or, for the extender in shadow mode, when
  a recommendation is made): time, pod, every candidate (up to `max_candidates`, best first)
  with its energy score, ΔP, reason, default kube-scheduler score, feature-schema features and
  telemetry age; the node chosen, the energy recommendation, the default choice, the mode.
* `"type": "outcome"` — written `window_seconds` later for the same `id`: the chosen node's
  power before (at the decision) and after (the first sample at least the window later), their
  sources, and `"measured": true` only when both powers came from RAPL.

Durability: records are buffered and written in batches; each batch is one `write()` on an
`O_APPEND` descriptor followed by `fsync`, so a crash (even `kill -9`) loses at most the batch
in memory and never corrupts a line already written. The file is rotated by size (`path` →
`path.1` → … → `path.N`) and never truncated: on restart the collector appends, and if the
previous process died mid-line it first ends that fragment with a newline, so the fragment is
one unreadable line that `read_records` skips and counts, and every later line is whole.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.background import BackgroundQueue
from scheduler.model import NodeTelemetry, PodInfo

SCHEMA = "kubejoule.decision/v1"
GIB = 2.0**30
# Extender decisions waiting for the recorder thread. At ~1–10 ms of recording per decision
# (thousands of candidates with features), 1,024 absorbs bursts of several seconds.
DEFAULT_RECORDER_QUEUE_SIZE = 1024

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CollectorConfig:
    path: str
    max_bytes: int = 64 * 1024 * 1024  # rotate when the file would grow past this
    backups: int = 5  # rotated files kept: path.1 … path.N
    batch_records: int = 64  # write + fsync once this many records are buffered
    flush_interval_seconds: float = 1.0  # … or when the oldest buffered record is this old
    max_candidates: int = 100  # candidates recorded per decision (best first + chosen ones)
    outcome_window_seconds: float = 60.0  # how long after a decision its outcome is measured


class DecisionCollector:
    """Appends JSON records to a file, batched, fsynced, rotated by size. Thread-safe."""

    def __init__(self, config: CollectorConfig, clock: Callable[[], float] = time.monotonic):
        if config.backups < 1:
            raise ValueError("backups must be at least 1: rotation must not delete the live file")
        self.config = config
        self.path = Path(config.path)
        self._clock = clock
        self._lock = threading.Lock()
        self._buffer: list[bytes] = []
        self._oldest: float | None = None
        self._fd = -1
        self._size = 0
        self.records_written = 0
        self.batches_written = 0
        self.rotations = 0
        self._open()

    # -- file handling --

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        if self._size > 0 and not self._ends_with_newline():
            self._write_all(b"\n")  # end a fragment left by a crash; keep it, never truncate
            os.fsync(self._fd)

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._size += len(data)

    def _rotate(self) -> None:
        os.close(self._fd)
        for index in range(self.config.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{index + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self.rotations += 1
        self._open()

    # -- writing --

    def write(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()
        with self._lock:
            self._buffer.append(line)
            if self._oldest is None:
                self._oldest = self._clock()
            if len(self._buffer) >= self.config.batch_records:
                self._flush_locked()

    def flush_if_due(self) -> None:
        with self._lock:
            if self._oldest is not None and (
                self._clock() - self._oldest >= self.config.flush_interval_seconds
            ):
                self._flush_locked()

    def flush(self) -> int:
        """Write and fsync what is buffered; returns the number of records written."""
        with self._lock:
            return self._flush_locked()

    def _flush_locked(self) -> int:
        if not self._buffer or self._fd < 0:
            return 0
        batch = b"".join(self._buffer)
        count = len(self._buffer)
        if self._size > 0 and self._size + len(batch) > self.config.max_bytes:
            self._rotate()
        self._write_all(batch)
        os.fsync(self._fd)
        self._buffer.clear()
        self._oldest = None
        self.records_written += count
        self.batches_written += 1
        return count

    def close(self) -> None:
        with self._lock:
            self._flush_locked()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    # -- the two record kinds --

    def record_decision(
        self,
        *,
        source: str,
        mode: str,
        pod: PodInfo,
        candidates: Sequence[CandidateRecord],
        chosen: str | None,
        recommended: str | None,
        default_choice: str | None,
        scorer: str,
        wall_time: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """Write one decision line; returns its id (for the outcome line)."""
        decision_id = uuid.uuid4().hex
        keep = {n for n in (chosen, recommended, default_choice) if n}
        ranked = sorted(candidates, key=lambda c: (-c.score, c.node))
        kept = ranked[: self.config.max_candidates]
        kept_names = {c.node for c in kept}
        kept += [c for c in ranked[self.config.max_candidates :] if c.node in keep - kept_names]
        record: dict[str, Any] = {
            "schema": SCHEMA,
            "type": "decision",
            "id": decision_id,
            "time": time.time() if wall_time is None else wall_time,
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
        self.write(record)
        return decision_id

    def record_outcome(
        self,
        decision_id: str,
        node: str,
        window_seconds: float,
        before: NodeTelemetry | None,
        after: NodeTelemetry | None,
        wall_time: float | None = None,
    ) -> None:
        measured = (
            before is not None
            and after is not None
            and before.watts is not None
            and after.watts is not None
            and before.source == "rapl"
            and after.source == "rapl"
        )
        self.write(
            {
                "schema": SCHEMA,
                "type": "outcome",
                "id": decision_id,
                "time": time.time() if wall_time is None else wall_time,
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
        )


@dataclass(frozen=True)
class CandidateRecord:
    node: str
    score: float  # the energy scorer's 0–100
    delta_watts: float | None = None
    reason: str = "ok"
    default_score: int | None = None  # kube-scheduler's fit + balanced (0–200)
    telemetry_age_seconds: float | None = None
    features: Mapping[str, float | None] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "score": self.score,
            "delta_watts": self.delta_watts,
            "reason": self.reason,
            "default_score": self.default_score,
            "telemetry_age_seconds": self.telemetry_age_seconds,
            "features": dict(self.features) if self.features is not None else None,
        }


@dataclass(order=True)
class _PendingOutcome:
    due: float
    decision_id: str = field(compare=False)
    node: str = field(compare=False)
    decided_at: float = field(compare=False)
    before: NodeTelemetry | None = field(compare=False)


class OutcomeTracker:
    """Remembers placed pods and writes their outcome line once the window has passed and the
    node has a sample taken at least `window_seconds` after the decision (wall-clock)."""

    def __init__(
        self,
        collector: DecisionCollector,
        window_seconds: float,
        give_up_after_seconds: float | None = None,
    ) -> None:
        self.collector = collector
        self.window_seconds = window_seconds
        # Without a new sample for this long past the window, write the outcome without "after".
        self.give_up_after_seconds = (
            give_up_after_seconds if give_up_after_seconds is not None else 2 * window_seconds + 30
        )
        self._pending: list[_PendingOutcome] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._pending)

    def track(
        self, decision_id: str, node: str, decided_at: float, before: NodeTelemetry | None
    ) -> None:
        with self._lock:
            self._pending.append(
                _PendingOutcome(
                    decided_at + self.window_seconds, decision_id, node, decided_at, before
                )
            )

    def poll(self, now: float, telemetry: Callable[[str], NodeTelemetry | None]) -> int:
        """Write the outcomes that are due; returns how many were written."""
        with self._lock:
            due = [p for p in self._pending if p.due <= now]
            if not due:
                return 0
            written: set[int] = set()
            for item in due:
                after = telemetry(item.node)
                fresh = after is not None and after.sample_time >= item.due
                if fresh or now >= item.due + self.give_up_after_seconds:
                    self.collector.record_outcome(
                        item.decision_id,
                        item.node,
                        self.window_seconds,
                        item.before,
                        after if fresh else None,
                        wall_time=now,
                    )
                    written.add(id(item))
            self._pending = [p for p in self._pending if id(p) not in written]
            return len(written)


def collector_files(path: str | Path) -> list[Path]:
    """The live file and its rotations, oldest first."""
    base = Path(path)
    rotated = sorted(
        (p for p in base.parent.glob(base.name + ".*") if p.suffix[1:].isdigit()),
        key=lambda p: int(p.suffix[1:]),
        reverse=True,
    )
    return rotated + ([base] if base.exists() else [])


def read_records(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """Every readable record of one file, and the number of lines that were not JSON objects
    (fragments left by a crash)."""
    records: list[dict[str, Any]] = []
    bad = 0
    for line in _lines(Path(path)):
        try:
            value = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(value, dict):
            records.append(value)
        else:
            bad += 1
    return records, bad


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        for raw in f:
            line = raw.strip()
            if line:
                yield line


class ExtenderRecorder:
    """Sends the extender's prioritize decisions to a DecisionCollector (shadow-mode
    recommendations become decision lines with `"source": "extender"`, `"chosen": null`: the
    extender does not learn where kube-scheduler finally put the pod). Duck-typed on the
    extender's `Decision` (verb, mode, wall_time, pod, nodes, results, recommended), so this
    module does not import the extender.

    Off the request path: `record()` only puts the decision on a bounded queue (`queue_size`);
    one background thread sorts the candidates, computes their features and hands the line to
    the collector. When the queue is full the decision is dropped and counted, never waited
    for. Never raises: recording must not fail a request. `close()` records what is queued
    (up to a timeout) before the caller closes the collector, so a clean shutdown loses
    nothing; the collector's own guarantees (batched, fsynced, never truncated) are unchanged.
    """

    def __init__(
        self,
        collector: DecisionCollector,
        also: Any = None,
        features: Callable[[PodInfo, Any, float], Mapping[str, float | None]] | None = None,
        scorer: str = "heuristic",
        queue_size: int = DEFAULT_RECORDER_QUEUE_SIZE,
    ) -> None:
        self.collector = collector
        self.also = also  # another recorder to forward to (e.g. the extender's MemoryRecorder)
        self.features = features
        self.scorer = scorer
        self._worker: BackgroundQueue[Any] = BackgroundQueue(
            "decision-recorder", queue_size, self._record, self._failed
        )

    def record(self, decision: Any) -> None:
        """On the request path: forward to `also`, enqueue, return."""
        if self.also is not None:
            self.also.record(decision)
        if decision.verb == "prioritize":
            self._worker.submit(decision)

    def stats(self) -> dict[str, int]:
        """Counts for the extender's metrics: recorded, dropped, failed, queued."""
        worker = self._worker
        return {
            "recorded": worker.done,
            "dropped": worker.dropped,
            "failed": worker.failed,
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
        are dropped. Close the collector after this."""
        self._worker.stop(timeout_seconds)

    def _record(self, decision: Any) -> None:
        wall = float(decision.wall_time)
        results = sorted(decision.results, key=lambda r: (-r.score, r.node))
        limit = self.collector.config.max_candidates
        kept = [r for i, r in enumerate(results) if i < limit or r.node == decision.recommended]
        states = {n.info.name: n for n in decision.nodes} if kept else {}
        candidates = []
        for result in kept:
            state = states.get(result.node)
            telemetry = state.telemetry if state is not None else None
            candidates.append(
                CandidateRecord(
                    node=result.node,
                    score=result.score,
                    delta_watts=result.delta_watts,
                    reason=result.reason,
                    telemetry_age_seconds=(
                        telemetry.age_seconds(wall) if telemetry is not None else None
                    ),
                    features=(
                        self.features(decision.pod, state, wall)
                        if self.features is not None and state is not None
                        else None
                    ),
                )
            )
        self.collector.record_decision(
            source="extender",
            mode=str(decision.mode),
            pod=decision.pod,
            candidates=candidates,
            chosen=None,
            recommended=decision.recommended,
            default_choice=None,
            scorer=self.scorer,
            wall_time=wall,
            extra={"candidate_count": len(results)},
        )
