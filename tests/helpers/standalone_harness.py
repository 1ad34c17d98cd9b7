"""Run the standalone scheduler in a thread against an EmulatedCluster."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.cluster import kube
from scheduler.decisionlog.logfile import DecisionLog
from scheduler.domain.model import NodeTelemetry
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.scheduling_profile import SchedulingProfile
from scheduler.standalone.binding import KubeClusterApi
from scheduler.standalone.loop import StandaloneScheduler
from scheduler.standalone.settings import StandaloneConfig


@dataclass
class StaticTelemetry:
    """A TelemetryView with fixed samples (tests set them directly)."""

    samples: dict[str, NodeTelemetry] = field(default_factory=dict)

    def telemetry(self, node: str) -> NodeTelemetry | None:
        return self.samples.get(node)

    def snapshot(self) -> Mapping[str, NodeTelemetry]:
        """Like TelemetryStore.snapshot(): the same object until the samples are replaced."""
        return self.samples


def api_client(url: str, user_agent: str = "kubejoule-test") -> Any:
    api = kube.make_api_client(url)
    api.user_agent = user_agent
    return api


def make_scheduler(
    url: str,
    scoring: SchedulingProfile | ScorePlugin,
    config: StandaloneConfig,
    telemetry: Any = None,
    decision_log: DecisionLog | None = None,
    is_leader: Callable[[], bool] | None = None,
    user_agent: str = "kubejoule-test",
    **kwargs: Any,
) -> StandaloneScheduler:
    api = KubeClusterApi(api_client(url, user_agent), timeout_seconds=5.0, watch_timeout_seconds=60)
    return StandaloneScheduler(
        api,
        scoring,
        config,
        telemetry=telemetry,
        decision_log=decision_log,
        is_leader=is_leader,
        identity=user_agent,
        **kwargs,
    )


@contextlib.contextmanager
def running(scheduler: StandaloneScheduler) -> Iterator[StandaloneScheduler]:
    """Run `scheduler.run` in a thread until the block ends."""
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), name="scheduler", daemon=True)
    thread.start()
    try:
        assert scheduler.synced.wait(15), "the scheduler never synced its caches"
        yield scheduler
    finally:
        stop.set()
        thread.join(20)
        assert not thread.is_alive(), "the scheduler did not stop"


@contextlib.contextmanager
def running_scheduler(*args: Any, **kwargs: Any) -> Iterator[StandaloneScheduler]:
    """`make_scheduler(*args, **kwargs)`, run until the block ends."""
    with running(make_scheduler(*args, **kwargs)) as scheduler:
        yield scheduler


def wait_for(predicate: Callable[[], Any], timeout_seconds: float = 20.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.05)


def placements(pods: list[Mapping[str, Any]]) -> dict[str, str | None]:
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in pods}
