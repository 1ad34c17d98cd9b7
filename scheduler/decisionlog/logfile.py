"""The decision log's file: what the scheduler decided and what happened next, as JSON lines
(the records: `scheduler.decisionlog.schema`; outcomes: `scheduler.decisionlog.outcomes`).

Two kinds of line (schema `kubejoule.decision/v1`), one JSON object per line:

* `"type": "decision"` — written when a pod is placed (or, for the extender in shadow mode, when
  a recommendation is made): time, pod, every candidate (up to `max_candidates`, best first)
  with its energy score, ΔP, reason, default kube-scheduler score, feature-schema features and
  telemetry age; the node chosen, the energy recommendation, the default choice, the mode.
* `"type": "outcome"` — written `window_seconds` later for the same `id`: the chosen node's
  power before (at the decision) and after (the first sample at least the window later), their
  sources, and `"measured": true` only when both powers came from RAPL.

Durability: each record is one `write(2)` on an `O_APPEND` descriptor before `write()` returns,
so once a caller has its line it is in the kernel and a crash of the process (even `kill -9`)
loses nothing written; the standalone scheduler writes a placement's line before it binds the
pod, the extender's recorder before the response is sent. For power loss a background thread
fsyncs in groups: at most `flush_interval_seconds` after a record, sooner once `batch_records`
records wait (a power cut loses at most that window). The file is rotated by size (`path` →
`path.1` → … → `path.N`) and never truncated: on restart the log appends, and if the
previous process died mid-line it first ends that fragment with a newline, so the fragment is
one unreadable line that `read_records` skips and counts, and every later line is whole.

A decision whose binding then fails is followed by an `"type": "abandoned"` line with its `id`
and the reason; a process killed between the two leaves a decision without outcome, and the pod
gets a decision of its own when it is scheduled again (readers key placements by pod uid).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec

from scheduler.decisionlog.schema import (
    CandidateRecord,
    abandoned_record,
    decision_record,
    outcome_record,
)
from scheduler.domain.model import PodInfo

log = logging.getLogger(__name__)


P = ParamSpec("P")


def _writes(make: Callable[P, Mapping[str, object]]) -> Callable[Concatenate[DecisionLog, P], None]:
    """A DecisionLog method that writes the line `make` (a builder of `schema`) makes of its
    arguments."""

    def write(self: DecisionLog, /, *args: P.args, **kwargs: P.kwargs) -> None:
        self.write(make(*args, **kwargs))

    write.__doc__ = make.__doc__
    return write


@dataclass(frozen=True)
class DecisionLogConfig:
    path: str
    max_bytes: int = 64 * 1024 * 1024  # rotate when the file would grow past this
    backups: int = 5  # rotated files kept: path.1 … path.N
    # Group fsync: once this many records were written since the last fsync …
    batch_records: int = 64
    # … or this long after the first of them (0: fsync after every record, in the writer).
    flush_interval_seconds: float = 0.1
    max_candidates: int = 100  # candidates recorded per decision (best first + chosen ones)
    outcome_window_seconds: float = 60.0  # how long after a decision its outcome is measured


class DecisionLog:
    """Appends JSON records to a file: written through (one `write(2)` per record), fsynced in
    groups by a background thread, rotated by size. Thread-safe."""

    def __init__(self, config: DecisionLogConfig, clock: Callable[[], float] = time.monotonic):
        if config.backups < 1:
            raise ValueError("backups must be at least 1: rotation must not delete the live file")
        self.config = config
        self.path = Path(config.path)
        self._clock = clock
        self._lock = threading.Condition()
        self._unsynced = 0  # records written since the last fsync
        self._oldest: float | None = None  # when the first of them was written
        self._closing = False
        self._fd = -1
        self._size = 0
        self.records_written = 0
        self.records_dropped = 0  # written after close
        self.batches_written = 0  # fsyncs
        self.sync_errors = 0
        self.rotations = 0
        self._open()
        self._syncer: threading.Thread | None = None
        if config.flush_interval_seconds > 0:
            self._syncer = threading.Thread(target=self._sync_loop, name="decision-fsync", daemon=True)
            self._syncer.start()

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
        self._sync_locked()  # the old file's last records reach the disk before it is renamed
        os.close(self._fd)
        for index in range(self.config.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{index + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self.rotations += 1
        self._open()

    # -- writing --

    def write(self, record: Mapping[str, object]) -> None:
        """Write one record through to the kernel; when this returns, a crash of the process
        cannot lose it (power loss: until the next group fsync)."""
        line = (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()
        with self._lock:
            if self._fd < 0:
                self.records_dropped += 1
                return
            if self._size > 0 and self._size + len(line) > self.config.max_bytes:
                self._rotate()
            self._write_all(line)
            self.records_written += 1
            self._unsynced += 1
            if self._oldest is None:
                self._oldest = self._clock()
            if self._syncer is None:
                self._sync_locked()
            elif self._unsynced == 1 or self._unsynced >= self.config.batch_records:
                self._lock.notify()

    def _due(self) -> bool:
        return self._oldest is not None and (
            self._unsynced >= self.config.batch_records
            or self._clock() - self._oldest >= self.config.flush_interval_seconds
        )

    def flush_if_due(self) -> None:
        """fsync if the group is due (the background thread does this on its own)."""
        with self._lock:
            if self._due():
                self._sync_locked()

    def flush(self) -> int:
        """fsync what is written now; returns the number of records it covered."""
        with self._lock:
            return self._sync_locked()

    def _sync_locked(self) -> int:
        count = self._unsynced
        if not count or self._fd < 0:
            return 0
        try:
            os.fsync(self._fd)
        except OSError:
            self.sync_errors += 1
            log.exception("fsync of the decision log failed")
            return 0
        self._unsynced = 0
        self._oldest = None
        self.batches_written += 1
        return count

    def _sync_loop(self) -> None:
        interval = self.config.flush_interval_seconds
        while True:
            with self._lock:
                while not self._closing and not self._due():
                    wait = None
                    if self._oldest is not None:
                        wait = max(0.001, self._oldest + interval - self._clock())
                    self._lock.wait(wait)
                if self._closing:
                    return
                # fsync on a duplicate outside the lock: writers go on meanwhile (a rotation
                # syncs the old file itself before closing it).
                fd = os.dup(self._fd)
                count = self._unsynced
                self._unsynced = 0
                self._oldest = None
            try:
                os.fsync(fd)
                self.batches_written += 1
            except OSError:
                with self._lock:
                    self.sync_errors += 1
                    self._unsynced += count  # retried with the next group
                    if self._oldest is None:
                        self._oldest = self._clock()
                log.exception("fsync of the decision log failed")
            finally:
                os.close(fd)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        if self._syncer is not None:
            self._syncer.join(10.0)
        with self._lock:
            self._sync_locked()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    # -- the record kinds (scheduler.decisionlog.schema builds them) --

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
        extra: Mapping[str, object] | None = None,
    ) -> str:
        """Write one decision line (`schema.decision_record`'s keywords but `max_candidates`,
        which is this log's); returns its id (for the outcome line)."""
        record = decision_record(
            source=source, mode=mode, pod=pod, candidates=candidates, chosen=chosen,
            recommended=recommended, default_choice=default_choice, scorer=scorer,
            max_candidates=self.config.max_candidates, wall_time=wall_time, extra=extra,
        )
        self.write(record)
        return str(record["id"])

    record_abandoned = _writes(abandoned_record)
    record_outcome = _writes(outcome_record)


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
