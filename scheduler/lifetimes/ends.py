"""When a pod ended, read from its last Kubernetes object (the watch's DELETED object, or a pod
that reached Succeeded/Failed), and whether it ended on its own.

The end is the latest `finishedAt` of its containers' terminated states where the kubelet wrote
one, else the time the watch told us. A pod carrying the `DisruptionTarget` condition (status
True: evicted through the Eviction API, preempted, deleted by the taint manager or terminated by
the kubelet under pressure) did not end on its own: its lifetime was cut, and is not learned.
"""

from __future__ import annotations

from collections.abc import Mapping

from common.kubetime import parse_timestamp

DISRUPTION_TARGET = "DisruptionTarget"


def _items(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def disrupted(obj: Mapping[str, object]) -> bool:
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return False
    return any(
        c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"
        for c in _items(status.get("conditions"))
    )


def finished_at(obj: Mapping[str, object]) -> float | None:
    """The latest container finishedAt (epoch seconds), None when no container says."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return None
    times = []
    for key in ("containerStatuses", "initContainerStatuses"):
        for container in _items(status.get(key)):
            state = container.get("state")
            terminated = state.get("terminated") if isinstance(state, Mapping) else None
            if isinstance(terminated, Mapping):
                t = parse_timestamp(terminated.get("finishedAt"))
                if t is not None:
                    times.append(t)
    return max(times) if times else None


def pod_end(obj: Mapping[str, object], now: float) -> tuple[float, bool]:
    """(when the pod ended, whether it was disrupted) — see the module docstring."""
    end = finished_at(obj)
    return (now if end is None else end), disrupted(obj)
