"""A dependency-free progress bar for stderr (redrawn in place on a terminal, sparse otherwise)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(self, total: int, label: str = "", stream: TextIO | None = None, width: int = 30):
        self.total = max(1, total)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.done = 0
        self._started = time.monotonic()
        self._last_percent = -1
        self._tty = self.stream.isatty()

    def advance(self, steps: int = 1, note: str = "") -> None:
        self.done = min(self.total, self.done + steps)
        percent = self.done * 100 // self.total
        # On a terminal redraw every percent; in a log file, every 10 %.
        step = 1 if self._tty else 10
        if percent // step == self._last_percent // step:
            return
        self._last_percent = percent
        filled = self.width * self.done // self.total
        elapsed = time.monotonic() - self._started
        line = (
            f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {percent:3d}% "
            f"{elapsed:5.1f}s {note}"
        )
        if self._tty:
            self.stream.write("\r" + line.ljust(self.width + 60))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()
