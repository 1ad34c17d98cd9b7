"""Telemetry sources for the scheduler's tests: fixed samples instead of scraped ones."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.telemetry.samples import FetchResult, NodeSample


class FixedSource:
    """A TelemetrySource that returns the same samples at every refresh (the test may change
    `samples` between refreshes)."""

    def __init__(self, samples: Mapping[str, NodeSample], name: str = "fixed") -> None:
        self.name = name
        self.samples = dict(samples)

    def fetch(self) -> FetchResult:
        return FetchResult(samples=dict(self.samples))
