"""Kubernetes' timestamps (metav1.Time: RFC 3339, "2024-05-01T10:00:00Z") as Unix seconds.

One reader for the agent's Metrics Server windows and the scheduler's pod and node times."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def parse_timestamp(value: Any) -> float | None:
    """RFC 3339 as Unix seconds; None when absent, not a string or unreadable."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None
