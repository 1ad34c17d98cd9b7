"""What a telemetry source returns: one `NodeSample` per node, and the errors it met."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from scheduler.domain.model import NodeTelemetry


@dataclass(frozen=True)
class NodeSample:
    """What one source knows of one node."""

    telemetry: NodeTelemetry
    # Pods the node's agent saw at the sample (None when the source cannot tell).
    pod_count: int | None = None
    source_name: str = ""
    # Of pod_count, the DaemonSet and mirror pods (by the pod series' `owner_kind` label, where
    # the agent exports one): they never make the node non-empty.
    daemon_pod_count: int = 0


@dataclass
class FetchResult:
    samples: dict[str, NodeSample] = field(default_factory=dict)
    # Partial failures: (kind, detail), e.g. one agent that did not answer.
    errors: list[tuple[str, str]] = field(default_factory=list)


class TelemetrySource(Protocol):
    name: str

    def fetch(self) -> FetchResult:
        """Blocking; called from the store's background thread only."""
        ...


@runtime_checkable
class ClosableSource(TelemetrySource, Protocol):
    """A source holding connections (a pool of HTTP clients): the store closes it on stop."""

    def close(self) -> None: ...
