"""A carbon intensity CSV that a long-running agent re-reads when it changes (a ConfigMap updated
by a job that fetches the coming hours, a file rewritten in place): at most every
`check_every_s` seconds it compares the file's modification time and size with those it loaded,
and loads it again when they differ (common/carbon.py's rules).

A changed file that cannot be used (unreadable, no header, a time that does not parse) does not
replace the series: the previous one is kept — its values are still the intensity of their
times — and `refresh` says why, once per change of the file (`(False, why)`; a reload that
worked is `(True, what)`). Where the previous series ends, the
intensity is a gap as always; nothing is carried past it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from common.carbon import (
    DEFAULT_MAX_AGE_S,
    SOURCE_CSV,
    CarbonIntensityError,
    IntensitySeries,
    Reading,
    load_intensity_csv,
)

DEFAULT_CHECK_EVERY_S = 30.0


class IntensityFile:
    """The series in `path`, re-read when the file changes. The first load's errors are raised
    (a usage error at start); later ones are returned by `refresh`."""

    source = SOURCE_CSV

    def __init__(
        self, path: Path | str, basis: str = "direct", max_age_s: float = DEFAULT_MAX_AGE_S,
        check_every_s: float = DEFAULT_CHECK_EVERY_S, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.basis = basis
        self.max_age_s = max_age_s
        self.check_every_s = check_every_s
        self._clock = clock
        self._stamp = self._stat()
        self.series = load_intensity_csv(self.path, basis, max_age_s)
        self._checked = clock()

    @property
    def zone(self) -> str:
        return self.series.zone

    @property
    def name(self) -> str:
        return self.series.name

    def _stat(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.path)  # follows the ConfigMap's ..data link to the current file
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def refresh(self) -> tuple[bool, str] | None:
        """Re-read the file if it changed: (reloaded, what happened), or None when nothing
        changed or it is not time to look yet."""
        now = self._clock()
        if now - self._checked < self.check_every_s:
            return None
        self._checked = now
        stamp = self._stat()
        if stamp == self._stamp:
            return None
        self._stamp = stamp  # a bad file is reported once, not at every look
        if stamp is None:
            return False, f"carbon intensity CSV {self.path} is gone: keeping the series loaded before"
        try:
            series: IntensitySeries = load_intensity_csv(self.path, self.basis, self.max_age_s)
        except CarbonIntensityError as exc:
            return False, f"{exc}: keeping the series loaded before"
        self.series = series
        return True, f"carbon intensity CSV {self.path} reloaded: {len(series.times)} rows"

    def at(self, t: float) -> Reading:
        return self.series.at(t)

    def integral(self, t0: float, t1: float) -> Reading:
        return self.series.integral(t0, t1)

    def start(self) -> float:
        return self.series.start()
