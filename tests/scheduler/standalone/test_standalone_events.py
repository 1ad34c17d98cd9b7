"""Events as client-go's event recorder sends them: an identical repeat (same pod, type, reason
and message) raises the first Event's count instead of creating another; an expired one is
created again with the count so far."""

from __future__ import annotations

from typing import Any

from scheduler.cluster import kube
from scheduler.domain.model import PodInfo, Resources
from scheduler.standalone.events import PodEvents

POD = PodInfo("ns", "web-1", "uid-1", Resources(100, 0, 1))


class Api:
    """The ClusterApi calls PodEvents makes, recorded; `expired` Event names answer 404."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.expired: set[str] = set()

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        self.calls.append(("create", event))

    def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        if name in self.expired:
            raise kube.ApiError(404, "Not Found", "events not found")
        self.calls.append(("patch", (name, patch)))

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.calls.append(("status", patch))


def test_an_identical_event_raises_the_count_of_the_first() -> None:
    api = Api()
    clock = iter(float(t) for t in range(100, 200))
    events = PodEvents(api, "kubejoule-scheduler", "replica-a", lambda: next(clock))  # type: ignore[arg-type]
    for _ in range(3):
        events.event(POD, "Warning", "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.")
    events.event(POD, "Warning", "FailedScheduling", "0/4 nodes are available: 4 Insufficient cpu.")
    kinds = [kind for kind, _ in api.calls]
    assert kinds == ["create", "patch", "patch", "create"]
    first = api.calls[0][1]
    assert first["count"] == 1 and first["lastTimestamp"] == "1970-01-01T00:01:40Z"
    assert api.calls[1][1] == (first["metadata"]["name"], {"count": 2, "lastTimestamp": "1970-01-01T00:01:41Z"})
    assert api.calls[2][1][1]["count"] == 3
    assert api.calls[3][1]["metadata"]["name"] != first["metadata"]["name"]  # another message


def test_a_repeat_of_an_expired_event_creates_it_again_with_the_count() -> None:
    api = Api()
    events = PodEvents(api, "kubejoule-scheduler", "replica-a", lambda: 100.0)  # type: ignore[arg-type]
    events.event(POD, "Normal", "Scheduled", "Successfully assigned ns/web-1 to n1")
    api.expired.add(api.calls[0][1]["metadata"]["name"])
    events.event(POD, "Normal", "Scheduled", "Successfully assigned ns/web-1 to n1")
    (kind, event) = api.calls[1]
    assert kind == "create" and event["count"] == 2
    assert event["metadata"]["name"] == api.calls[0][1]["metadata"]["name"]
