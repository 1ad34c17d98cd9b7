"""Gaps: what could not be measured this interval, and why — the one vocabulary of missing values
from the readers up to the exporters (DESIGN.md, "Gaps"). Plain data; imports nothing of the agent.
"""

from __future__ import annotations

from dataclasses import dataclass

# Gap kinds (DESIGN.md, "Gaps"): why a value is missing, for machines; `reason` says it in words.
GAP_UNREADABLE = "unreadable"  # a file could not be read or parsed (permissions, EIO, garbage, gone)
GAP_IMPLAUSIBLE = "implausible"  # a value was read but cannot be right (out of range, beyond a bound)
GAP_INCOMPLETE = "incomplete"  # a whole that needs a part that has a gap (node power, a pod's interval)
GAP_UNKNOWN = "unknown"  # anything else (an interval too long for the counter, no CPU time passed)
GAP_KINDS = (GAP_UNREADABLE, GAP_IMPLAUSIBLE, GAP_INCOMPLETE, GAP_UNKNOWN)


@dataclass(frozen=True)
class Gap:
    """Something that could not be measured this interval, and why."""

    what: str
    reason: str
    kind: str = GAP_UNKNOWN

    def to_record(self) -> dict[str, str]:
        return {"what": self.what, "reason": self.reason, "kind": self.kind}
