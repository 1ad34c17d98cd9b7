"""The standalone scheduler's settings and constants."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.framework.decision import MODE_ACTIVE, MODE_SHADOW, MODES
from scheduler.framework.nodes_to_score import num_feasible_nodes_to_find

__all__ = ["MODE_ACTIVE", "MODE_SHADOW", "MODES", "StandaloneConfig"]

DEFAULT_SCHEDULER_NAME = "kubejoule-scheduler"
# Shadow mode tells its recommendation in an Event on the pod (and the decision log), never by
# patching the pod: the right to patch pods is the right to change any pod's image.
EVENT_RECOMMENDATION = "EnergyRecommendation"
RECOMMENDED_SCORES = 10  # top-N energy scores in the Event's message
EVENT_MESSAGE_MAX_CHARS = 1024  # the API server truncates longer Event messages

GIL_SWITCH_INTERVAL_SECONDS = 0.0005

RESULT_SCHEDULED = "scheduled"
RESULT_UNSCHEDULABLE = "unschedulable"
RESULT_ERROR = "error"
RESULT_SKIPPED = "skipped"


@dataclass(frozen=True)
class StandaloneConfig:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    mode: str = MODE_SHADOW  # shadow | active
    annotate: bool = True  # shadow mode: tell the recommendation in an Event on the pod
    initial_backoff_seconds: float = 1.0  # kube-scheduler's podInitialBackoffSeconds
    max_backoff_seconds: float = 10.0  # kube-scheduler's podMaxBackoffSeconds
    unschedulable_retry_seconds: float = 60.0  # retry a parked pod at least this often
    # concurrent binding calls (0: bind inline). kube-scheduler binds each pod in a goroutine
    # of its own (v1.36 pkg/scheduler/schedule_one.go ScheduleOne: `go sched.runBindingCycle`);
    # 4 left up to 2,500 decided pods waiting for a binder at 1,000 KWOK nodes
    # (benchmarks/bench_k8s_throughput.py)
    bind_workers: int = 16
    api_timeout_seconds: float = 10.0
    watch_timeout_seconds: int = 300
    seed: int | None = None  # tie-breaking randomness (None: unpredictable)
    event_queue_size: int = 10000  # Events and status patches waiting to be sent
    # kube-scheduler's percentageOfNodesToScore (0: its adaptive default); None: score every
    # feasible node
    percentage_of_nodes_to_score: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        if not 0 < self.initial_backoff_seconds <= self.max_backoff_seconds:
            raise ValueError(
                f"the pod backoff must be > 0 s and the initial one at most the maximum, not "
                f"{self.initial_backoff_seconds:g} s and {self.max_backoff_seconds:g} s"
            )
        if self.percentage_of_nodes_to_score is not None:
            num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, 0)  # validates
