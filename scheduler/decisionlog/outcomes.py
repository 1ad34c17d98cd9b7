"""The outcome tracker: remembers the decision log's placements and writes each one's outcome line
once its window has passed and the node has a sample taken after it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.decisionlog.logfile import DecisionLog
from scheduler.domain.model import NodeTelemetry


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
        decision_log: DecisionLog,
        window_seconds: float,
        give_up_after_seconds: float | None = None,
    ) -> None:
        self.decision_log = decision_log
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
                    self.decision_log.record_outcome(
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
