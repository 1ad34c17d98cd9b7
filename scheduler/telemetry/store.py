"""TelemetryStore: per-node samples merged from the sources, refreshed by a background thread
and published as an immutable view."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from scheduler.domain.model import NodeTelemetry
from scheduler.telemetry.samples import ClosableSource, NodeSample, TelemetrySource

log = logging.getLogger(__name__)

def merge_samples(
    per_source: Sequence[Mapping[str, NodeSample]],
    now: float,
    max_staleness_seconds: float,
    cores: Mapping[str, float],
) -> dict[str, NodeSample]:
    """One sample per node: the first source (in priority order) whose data is fresh, else the
    freshest; static facts (cores, curve points) are filled in from any source or `cores`. A
    sample that needs nothing filled in is kept as it is (no copy: thousands of nodes a
    refresh)."""
    merged: dict[str, NodeSample] = {}
    if len(per_source) == 1:  # nothing to choose between: fill in the cores, no more
        for node, sample in per_source[0].items():
            telemetry = sample.telemetry
            if telemetry.cores is None and cores.get(node):
                sample = replace(sample, telemetry=replace(telemetry, cores=cores[node]))
            merged[node] = sample
        return merged
    nodes = {node for samples in per_source for node in samples}
    for node in nodes:
        candidates = [samples[node] for samples in per_source if node in samples]
        fresh = [
            c
            for c in candidates
            if c.telemetry.utilization is not None
            and c.telemetry.age_seconds(now) <= max_staleness_seconds
        ]
        chosen = fresh[0] if fresh else max(candidates, key=lambda c: c.telemetry.sample_time)
        telemetry = chosen.telemetry
        if telemetry.cores is None:
            known = next((c.telemetry.cores for c in candidates if c.telemetry.cores), None)
            if known or cores.get(node):
                telemetry = replace(telemetry, cores=known or cores.get(node))
        if telemetry.curve_points is None:
            curve = next((c.telemetry.curve_points for c in candidates if c.telemetry.curve_points), None)
            if curve is not None:
                telemetry = replace(telemetry, curve_points=curve)
        merged[node] = chosen if telemetry is chosen.telemetry else replace(chosen, telemetry=telemetry)
    return merged


FORGET_AFTER_SECONDS = 600.0
# Sample times further ahead of the scheduler's clock than this are counted as errors
# ("clock_ahead"); any future time is clamped, this only keeps NTP-sized skew out of the counts.
CLOCK_AHEAD_REPORT_SECONDS = 1.0

Listener = Callable[[Mapping[str, NodeSample]], None]


class TelemetryStore:
    """Per-node telemetry with its age, refreshed by a background thread."""

    def __init__(
        self,
        sources: Sequence[TelemetrySource],
        refresh_seconds: float = 5.0,
        max_staleness_seconds: float = 30.0,
        node_cores: Callable[[], Mapping[str, float]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sources = list(sources)
        self.refresh_seconds = refresh_seconds
        self.max_staleness_seconds = max_staleness_seconds
        self._node_cores = node_cores
        self._clock = clock
        self._samples: Mapping[str, NodeSample] = {}
        self._per_source: dict[str, dict[str, NodeSample]] = {}
        # (source, node) → (reported future sample time, local time it was first fetched)
        self._ahead: dict[tuple[str, str], tuple[float, float]] = {}
        self._listeners: list[Listener] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one refresh at a time
        self.refreshes = 0
        self.last_refresh_time: float | None = None
        self.errors: dict[tuple[str, str], int] = {}  # (source, kind) → count
        self.last_errors: list[tuple[str, str, str]] = []

    # -- reading (the scoring path: no I/O, no locks) --

    def get(self, node: str) -> NodeSample | None:
        return self._samples.get(node)

    def telemetry(self, node: str) -> NodeTelemetry | None:
        sample = self._samples.get(node)
        return sample.telemetry if sample is not None else None

    def snapshot(self) -> Mapping[str, NodeSample]:
        """The current view; never mutated once published."""
        return self._samples

    def ages(self, now: float | None = None) -> dict[str, float]:
        now = self._clock() if now is None else now
        return {node: s.telemetry.age_seconds(now) for node, s in self._samples.items()}

    @property
    def ready(self) -> bool:
        """At least one refresh completed (it may have found nothing)."""
        return self.refreshes > 0

    def add_listener(self, listener: Listener) -> None:
        """Called with the new view after each refresh (from the refresh thread)."""
        self._listeners.append(listener)

    # -- refreshing --

    def refresh_once(self) -> None:
        with self._lock:
            errors: list[tuple[str, str, str]] = []
            for source in self.sources:
                try:
                    result = source.fetch()
                except Exception as exc:  # a broken source must not stop the others
                    log.warning("telemetry source %s failed: %s", source.name, exc)
                    errors.append((source.name, "fetch", str(exc)))
                    continue
                samples = self._clamp_future(source.name, result.samples, self._clock(), errors)
                # Keep the last known samples of nodes this round missed: they age out by time.
                previous = self._per_source.get(source.name, {})
                self._per_source[source.name] = {**previous, **samples}
                errors.extend((source.name, kind, detail) for kind, detail in result.errors)
            now = self._clock()
            self._forget_old(now)
            cores: Mapping[str, float] = {}
            if self._node_cores is not None:
                try:
                    cores = self._node_cores()
                except Exception as exc:
                    errors.append(("node_cores", "fetch", str(exc)))
            ordered = [self._per_source.get(s.name, {}) for s in self.sources]
            self._samples = merge_samples(ordered, now, self.max_staleness_seconds, cores)
            for source_name, kind, _ in errors:
                self.errors[(source_name, kind)] = self.errors.get((source_name, kind), 0) + 1
            self.last_errors = errors
            self.last_refresh_time = now
            self.refreshes += 1
            view = self._samples
        for listener in self._listeners:
            try:
                listener(view)
            except Exception:
                log.exception("telemetry listener failed")

    def _clamp_future(
        self,
        source_name: str,
        samples: Mapping[str, NodeSample],
        fetched_at: float,
        errors: list[tuple[str, str, str]],
    ) -> dict[str, NodeSample]:
        """Samples with a time in the future get the time the store first fetched them (kept
        while the source repeats the same sample, so a stuck agent ahead still ages)."""
        out = dict(samples)
        for node, sample in samples.items():
            key = (source_name, node)
            reported = sample.telemetry.sample_time
            if reported <= fetched_at:
                self._ahead.pop(key, None)
                continue
            seen = self._ahead.get(key)
            if seen is None or seen[0] != reported:
                seen = self._ahead[key] = (reported, fetched_at)
            out[node] = replace(sample, telemetry=replace(sample.telemetry, sample_time=seen[1]))
            if reported - fetched_at > CLOCK_AHEAD_REPORT_SECONDS:
                errors.append(
                    (source_name, "clock_ahead", f"{node}: sample {reported - fetched_at:.1f} s ahead")
                )
        return out

    def _forget_old(self, now: float) -> None:
        """Drop nodes not heard of for a long time (deleted nodes, retired agents)."""
        horizon = max(FORGET_AFTER_SECONDS, 10 * self.max_staleness_seconds)
        for name, samples in self._per_source.items():
            self._per_source[name] = {
                node: s for node, s in samples.items() if s.telemetry.age_seconds(now) <= horizon
            }
        self._ahead = {
            key: seen for key, seen in self._ahead.items() if key[1] in self._per_source.get(key[0], {})
        }

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.refresh_once()
            self._stop.wait(max(0.0, self.refresh_seconds - (time.monotonic() - started)))

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_seconds)
            self._thread = None
        for source in self.sources:
            if isinstance(source, ClosableSource):
                source.close()
