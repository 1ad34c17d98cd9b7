"""The BMC's platform reading, polled on its own schedule and cached for the sampler.

A BMC answers in hundreds of milliseconds to seconds and refreshes its sensors every few seconds,
so it is never read on the sampling path: a background thread polls it every `interval` (walking
from the service root once, and again when a resource disappears), each poll bounded by the
client's deadline. The sampler takes the latest good reading with its age (`state()`): a reading
older than `max_age` is a gap (`stale`), and so is a BMC that never answered — with the reason of
its latest failure. A BMC that is down is a gap, never a stop: the agent goes on with RAPL and the
GPUs. One log line when the BMC fails, one when it answers again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.device.gaps import GAP_INCOMPLETE, GAP_UNKNOWN, GAP_UNREADABLE
from agent.device.redfish import (
    PowerSource,
    Reading,
    RedfishClient,
    RedfishError,
    find_sources,
    read_platform,
)

log = logging.getLogger("kubejoule.agent.platform")

DEFAULT_INTERVAL_SECONDS = 10.0


@dataclass(frozen=True)
class PlatformState:
    """The BMC's latest reading as the sampler saw it: watts (None: a gap, `reason` says why),
    its age, where it came from."""

    watts: float | None
    age_seconds: float | None
    reading: str | None  # "EnvironmentMetrics" or "PowerControl"
    chassis: str | None
    reason: str | None = None
    kind: str = GAP_INCOMPLETE
    energy_kwh: float | None = None


class PlatformPoller:
    def __init__(self, client: RedfishClient, interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
                 max_age_seconds: float | None = None, chassis_id: str | None = None,
                 on_error: Callable[[], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 on_reading: Callable[[Reading], None] | None = None) -> None:
        self.client = client
        self.interval_seconds = interval_seconds
        # a reading stays usable for three polls (one slow or failed poll is no gap), at least 30 s
        self.max_age_seconds = max_age_seconds or max(30.0, 3 * interval_seconds)
        self.chassis_id = chassis_id
        self._on_error = on_error
        self._on_reading = on_reading  # every good reading, as it comes (the calibration keeps them all)
        self._clock = clock
        self._lock = threading.Lock()
        self._sources: list[PowerSource] | None = None
        self._latest: tuple[Reading, float] | None = None  # the last good reading, when it was taken
        self._failure: RedfishError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bmc", daemon=True)

    def poll(self) -> None:
        """One poll: walk if needed, read, keep the reading or the failure."""
        try:
            if self._sources is None:
                self._sources = find_sources(self.client, self.chassis_id)
            reading = read_platform(self.client, self._sources)
        except RedfishError as exc:
            if exc.rediscover:
                self._sources = None
            with self._lock:
                first = self._failure is None
                self._failure = exc
            if first:
                log.warning("cannot read platform power from the BMC; node power comes from RAPL and the GPUs "
                            "until it answers", extra={"fields": {"bmc": self.client.url, "reason": str(exc)}})
            if self._on_error is not None:
                self._on_error()
            return
        with self._lock:
            recovered = self._failure is not None
            self._latest, self._failure = (reading, self._clock()), None
        if recovered:
            log.info("the BMC answers again", extra={"fields": {"bmc": self.client.url}})
        if self._on_reading is not None:
            self._on_reading(reading)

    def state(self) -> PlatformState:
        """What the sampler uses now: the latest reading while it is fresh, else a gap saying why."""
        with self._lock:
            latest, failure = self._latest, self._failure
        age = None if latest is None else self._clock() - latest[1]
        if latest is not None and age is not None and age <= self.max_age_seconds:
            reading = latest[0]
            return PlatformState(reading.watts, age, reading.source.reading, reading.source.chassis,
                                 energy_kwh=reading.energy_kwh)
        if failure is not None:
            reason = str(failure) + (f" (the last reading is {age:.0f} s old)" if age is not None else "")
            return PlatformState(None, age, None, None, reason, failure.kind)
        if latest is not None:
            return PlatformState(None, age, None, None, f"the BMC's latest reading is {age:.0f} s old (at most "
                                                       f"{self.max_age_seconds:g} s is used)", GAP_UNKNOWN)
        return PlatformState(None, None, None, None, f"no reading from the BMC at {self.client.url} yet", GAP_UNREADABLE)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.client.timeout_seconds + 1.0)
        self.client.close()

    def _loop(self) -> None:
        while True:
            try:
                self.poll()
            except Exception:  # a bug must not end the polling: the next poll may work
                log.exception("polling the BMC failed")
            if self._stop.wait(self.interval_seconds):
                return
