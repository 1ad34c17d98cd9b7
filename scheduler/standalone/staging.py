"""New node states staged off the decision path after each telemetry refresh.

A refresh gives every node a new sample, so every node's state — and every plugin's per-node
columns (the energy plugin's curves and prices, the feature values) — must be made again. Done
in the decision loop, the first decision after a refresh paid for all of it (85–110 ms at 5,000
nodes). The `Stager` does it in a thread of its own: it stages the cache's table for the new
view (`ClusterCache.stage`), builds the decider's batch over it and fills every plugin's
columns (`ProfileDecider.prepare`), then offers the table; meanwhile decisions keep reading the
previous view, whole. The next decision adopts the staged generation and patches only the
nodes whose pods changed since it was staged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from scheduler.cluster.cache import ClusterCache
from scheduler.decisions.placement import ProfileDecider
from scheduler.domain.model import NodeTelemetry, PodInfo, Resources
from scheduler.telemetry.samples import NodeSample

log = logging.getLogger(__name__)

# The pod the plugins' columns are filled with when no pod has been decided yet.
WARM_UP_POD = PodInfo("", "warm-up", "", Resources(100, 128 * 2**20, 1))

Lookup = Callable[[str], NodeTelemetry | None]


def _lookup(view: Mapping[str, NodeSample | NodeTelemetry]) -> Lookup:
    """Node → telemetry in one view (a TelemetryStore's NodeSamples, or NodeTelemetry)."""

    def telemetry(node: str) -> NodeTelemetry | None:
        found = view.get(node)
        return found.telemetry if isinstance(found, NodeSample) else found

    return telemetry


class Stager:
    """Stages each new telemetry view (module docstring). `current` is the view decisions read:
    (token, lookup) of the last view staged, None before the first."""

    def __init__(
        self,
        cache: ClusterCache,
        decider: ProfileDecider,
        snapshot: Callable[[], Mapping[str, NodeSample | NodeTelemetry]],
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.decider = decider
        self.snapshot = snapshot
        self.wall_clock = wall_clock
        self.current: tuple[object, Lookup] | None = None
        self.staged = 0
        self.last_cpu_seconds = 0.0
        self._wake = threading.Event()

    def on_refresh(self, view: object = None) -> None:
        """The telemetry store's listener (its refresh thread): wake the stager, no more."""
        self._wake.set()

    def stage_once(self) -> None:
        """Stage the store's current view (if new)."""
        view = self.snapshot()
        current = self.current
        if current is not None and current[0] is view:
            return
        started = time.thread_time()
        lookup = _lookup(view)
        staged = self.cache.stage(lookup, view)
        self.decider.prepare(staged.table, self.wall_clock(), self.decider.last_pod or WARM_UP_POD)
        self.cache.offer(staged)
        self.current = (view, lookup)
        self.staged += 1
        self.last_cpu_seconds = time.thread_time() - started

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._wake.wait(1.0)
            if stop.is_set():
                return
            if not self._wake.is_set():
                continue
            self._wake.clear()
            try:
                self.stage_once()
            except Exception:  # decisions go on with the view they have; next refresh retries
                log.exception("staging the node states of a telemetry refresh failed")

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="scheduler-stage", daemon=True)
        thread.start()
        return thread
