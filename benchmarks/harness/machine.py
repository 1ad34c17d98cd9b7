"""What a benchmark prints about the machine it ran on, beside its numbers."""

from __future__ import annotations

from pathlib import Path


def cpu_model() -> str:
    """The first CPU's model name from /proc/cpuinfo ("unknown" where it cannot be read)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"
