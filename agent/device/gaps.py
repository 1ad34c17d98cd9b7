"""Gaps: what could not be measured this interval, and why — the one vocabulary of missing values
from the readers up to the exporters (DESIGN.md, "Gaps"). Plain data; imports nothing of the agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# Gap kinds (DESIGN.md, "Gaps"): why a value is missing, for machines; `reason` says it in words.
GAP_UNREADABLE = "unreadable"  # a file could not be read or parsed (permissions, EIO, garbage, gone)
GAP_IMPLAUSIBLE = "implausible"  # a value was read but cannot be right (out of range, beyond a bound)
GAP_INCOMPLETE = "incomplete"  # a whole that needs a part that has a gap (node power, a pod's interval)
GAP_UNKNOWN = "unknown"  # anything else (an interval too long for the counter, no CPU time passed)
GAP_KINDS = (GAP_UNREADABLE, GAP_IMPLAUSIBLE, GAP_INCOMPLETE, GAP_UNKNOWN)


class Subject(StrEnum):
    """What a gap is about, by kind: typed, so that nothing downstream parses `Gap.what`'s text
    (which one — a zone, a pod, a GPU — is `Gap.name`)."""

    NODE = "node"  # node power
    RAPL = "rapl"  # the RAPL side of a node whose power the platform (BMC) composes
    ZONE = "zone"  # one RAPL zone; name: its id and name
    GPU = "gpu"  # one GPU; name: its index and uuid
    PLATFORM = "platform"  # the BMC's reading
    HOST_ENERGY = "host energy"  # a VM node's counter from its host, not written since the last read
    ESTIMATE = "estimate"  # a cloud instance's estimated curve
    CPU = "cpu"  # /proc/stat
    CGROUPS = "cgroups"
    PROCESSES = "processes"
    VMS = "vms"
    POD = "pod"  # name: its uid
    CONTAINER = "container"  # name: its id
    HOST = "host"  # the host's share (what no pod ran)
    IDLE_SPLIT = "idle split"
    ATTRIBUTION = "attribution"
    NETWORK = "network"
    POD_NETWORK = "pod network"
    FIELD = "field"  # a value of the record that is not a finite number; name: its path


@dataclass(frozen=True)
class Gap:
    """Something that could not be measured this interval, and why."""

    subject: Subject
    reason: str
    kind: str = GAP_UNKNOWN
    name: str = ""  # which one of the subject's kind, where there are several

    @property
    def what(self) -> str:
        """As people read it: "node", "zone intel-rapl:0 (package-0)", "pod <uid>"; a record
        field is named by its path alone."""
        if self.subject is Subject.FIELD:
            return self.name
        return f"{self.subject.value} {self.name}" if self.name else self.subject.value

    def to_record(self) -> dict[str, str]:
        return {"what": self.what, "reason": self.reason, "kind": self.kind}
