"""cluster-autoscaler's settings in the simulator (`AutoscalerModel`: each default is the one it
ships with, cited in rl/simulation/autoscaler/scan.py and rl/simulation/autoscaler/scaledown.py), its expanders'
names and the old-defaults ablation (`old_defaults`). Imports nothing of the simulator: the run's state, the scan
loop and the scale-down all read it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from scheduler.domain.cluster_defaults import (
    BOOT_SECONDS,
    MAX_POD_EVICTION_S,
    NEW_POD_WAIT_S,
    SCALE_DOWN_DELAY_AFTER_ADD_S,
    SCALE_DOWN_DELAY_AFTER_FAILURE_S,
    SCALE_DOWN_UNNEEDED_S,
    SCALE_DOWN_UTILIZATION_THRESHOLD,
    SCAN_INTERVAL_S,
    UNREMOVABLE_NODE_RECHECK_S,
)

EXPANDERS = ("random", "least-waste", "most-pods", "priority", "kubejoule")
DEFAULT_EXPANDER = "least-waste"


@dataclass(frozen=True)
class AutoscalerModel:
    """cluster-autoscaler's settings; every default is its shipped one (the docstrings of
    rl/simulation/autoscaler/scan.py and rl/simulation/autoscaler/scaledown.py)."""

    scan_interval_s: float = SCAN_INTERVAL_S  # --scan-interval
    expander: str = DEFAULT_EXPANDER  # --expander
    boot_seconds: float = BOOT_SECONDS
    boot_joules: float | None = None  # None: boot seconds × the node's full-load watts
    scale_down_unneeded_s: float = SCALE_DOWN_UNNEEDED_S  # --scale-down-unneeded-time
    # --scale-down-utilization-threshold; None: only empty nodes (the old_defaults ablation)
    utilization_threshold: float | None = SCALE_DOWN_UTILIZATION_THRESHOLD
    ignore_daemonsets_utilization: bool = False  # --ignore-daemonsets-utilization
    delay_after_add_s: float = SCALE_DOWN_DELAY_AFTER_ADD_S  # --scale-down-delay-after-add
    delay_after_delete_s: float = 0.0  # --scale-down-delay-after-delete
    delay_after_failure_s: float = SCALE_DOWN_DELAY_AFTER_FAILURE_S  # --scale-down-delay-after-failure
    max_scale_down_parallelism: int = 10  # --max-scale-down-parallelism
    max_drain_parallelism: int = 1  # --max-drain-parallelism
    max_pod_eviction_s: float = MAX_POD_EVICTION_S  # --max-pod-eviction-time
    # --unremovable-node-recheck-timeout: a node the removal simulation refused (a PDB without
    # room, pods with nowhere to go) is not considered again for this long
    unremovable_recheck_s: float = UNREMOVABLE_NODE_RECHECK_S
    # --frequent-loops-enabled: a loop at once after a productive one or on an unschedulable
    # pod (rl/simulation/autoscaler/trigger.py); False: one every scan interval
    frequent_loops_enabled: bool = True
    # --max-bulk-soft-taint-count: most nodes a loop puts the DeletionCandidate soft taint on or
    # takes it off (rl/simulation/autoscaler/softtaint.py); 0: no soft taint
    max_bulk_soft_taint_count: int = 10
    # no scale-up while every Pending pod to help is younger than this (static_autoscaler.go
    # unschedulablePodTimeBuffer: 2 s of wall clock, a constant; rl/simulation/autoscaler/trigger.py)
    new_pod_wait_s: float = NEW_POD_WAIT_S

    def __post_init__(self) -> None:
        if self.scan_interval_s <= 0:
            raise ValueError("scan interval must be > 0")
        times = (
            self.boot_seconds, self.scale_down_unneeded_s, self.delay_after_add_s,
            self.delay_after_delete_s, self.delay_after_failure_s, self.max_pod_eviction_s,
            self.new_pod_wait_s, self.unremovable_recheck_s,
        )
        if not all(t >= 0 for t in times):
            raise ValueError("boot, unneeded, delay, eviction, new-pod wait and recheck times must be >= 0")
        if self.boot_joules is not None and self.boot_joules < 0:
            raise ValueError("boot_joules must be >= 0")
        if self.utilization_threshold is not None and not 0 <= self.utilization_threshold <= 1:
            raise ValueError("the scale-down utilization threshold must be in [0, 1]")
        if self.max_scale_down_parallelism < 1 or self.max_drain_parallelism < 1:
            raise ValueError("the scale-down parallelism limits must be >= 1")
        if self.max_bulk_soft_taint_count < 0:
            raise ValueError("the soft-taint count must be >= 0")
        if self.expander not in EXPANDERS:
            raise ValueError(f"unknown expander {self.expander!r}; known: {', '.join(EXPANDERS)}")


def old_defaults(model: AutoscalerModel) -> AutoscalerModel:
    """`model` with the old-defaults ablation's scale-down rules and expander.

    ABLATION: the autoscaler of this project before issue 22 (and, for the expander, of clusters
    before kubernetes/autoscaler PR #7631): random expander, only empty nodes scaled down, no
    scale-down cool-downs, a loop every scan interval only (no frequent loops: the simulator
    before the loop trigger; cluster-autoscaler before `--frequent-loops-enabled`), no soft
    taint on unneeded nodes (the simulator before it modelled one). The wait for new pods stays:
    cluster-autoscaler has had it in every version."""
    return replace(
        model,
        expander="random",
        utilization_threshold=None,
        delay_after_add_s=0.0,
        delay_after_failure_s=0.0,
        frequent_loops_enabled=False,
        max_bulk_soft_taint_count=0,
    )

