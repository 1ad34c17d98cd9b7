"""Times as Unix seconds: Kubernetes' timestamps (metav1.Time: RFC 3339, "2024-05-01T10:00:00Z")
— one reader for the agent's Metrics Server windows and the scheduler's pod and node times — and
the times users write in files (`parse_time`: the wall meter's log, carbon intensity series).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime


def parse_timestamp(value: object) -> float | None:
    """RFC 3339 as Unix seconds; None when absent, not a string or unreadable."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def parse_time(text: str, naive_is_utc: bool = True) -> float:
    """Unix seconds or an ISO 8601 time ("Z" accepted) as Unix seconds; ValueError if neither or not
    finite. An ISO time without an offset is UTC, or this machine's local time with
    `naive_is_utc=False` (a wall meter's own log)."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise ValueError(f"not a finite time: {text!r}")
        return value
    when = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if when.tzinfo is None and naive_is_utc:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
