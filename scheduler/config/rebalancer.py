"""The rebalancer's settings: the `rebalancer:` section of the scheduler's YAML configuration
(docs/rebalancer.md has the reference), every key optional."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.config.fields import ConfigError, _bool, _number, _section, _str
from scheduler.domain.cluster_defaults import (
    SCALE_DOWN_UNNEEDED_S,
    SCALE_DOWN_UTILIZATION_THRESHOLD,
)
from scheduler.framework.decision import MODE_ACTIVE, MODE_SHADOW, MODES

LEASE_NAME = "kubejoule-rebalancer"


@dataclass(frozen=True)
class RebalancerConfig:
    mode: str = MODE_SHADOW  # shadow: annotate, record, never evict; active: evict
    interval_seconds: float = 60.0  # one round per interval
    max_evictions_per_interval: int = 3  # pods evicted per round, all nodes together
    max_nodes_per_interval: int = 1  # nodes emptied per round
    margin: float = 1.0  # the saving must be ≥ (1 + margin) × the disruption's energy
    balanced_k: float = 2.0  # Karpenter's Balanced consolidation: score ≥ 1/k
    node_cooldown_seconds: float = 1800.0  # a node acted on is left alone this long
    pod_startup_seconds: float = 10.0  # a replacement's time from placement to Ready
    # cluster-autoscaler's --scale-down-utilization-threshold: below it, the autoscaler would take
    # the node itself (null: the autoscaler scales down only empty nodes)
    scale_down_utilization_threshold: float | None = SCALE_DOWN_UTILIZATION_THRESHOLD
    # cluster-autoscaler's --scale-down-unneeded-time: how long an emptied node stays before it goes
    scale_down_unneeded_seconds: float = SCALE_DOWN_UNNEEDED_S
    max_clock_jump_seconds: float = 5.0  # wall and monotonic clocks disagree more: no round
    annotate_nodes: bool = True  # shadow mode: write the recommendation on the node
    lease_namespace: str = "kube-system"  # the Lease's namespace when $POD_NAMESPACE is not set
    lease_name: str = LEASE_NAME  # the Lease replicas elect a leader with

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"rebalancer.mode: expected one of {list(MODES)}, got {self.mode!r}")
        if self.max_evictions_per_interval < 1 or self.max_nodes_per_interval < 1:
            raise ValueError("rebalancer: the per-interval budgets must be at least 1")
        if self.margin < 0 or self.balanced_k <= 0:
            raise ValueError("rebalancer: margin must be >= 0 and balanced_k > 0")
        threshold = self.scale_down_utilization_threshold
        if threshold is not None and not 0 <= threshold <= 1:
            raise ValueError("rebalancer.scale_down_utilization_threshold: must be in [0, 1]")
        for name in ("interval_seconds", "max_clock_jump_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"rebalancer.{name}: must be positive")
        for name in ("node_cooldown_seconds", "pod_startup_seconds", "scale_down_unneeded_seconds"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"rebalancer.{name}: must be >= 0")

    @property
    def active(self) -> bool:
        return self.mode == MODE_ACTIVE


_NUMBERS = {
    "interval_seconds": True, "margin": False, "balanced_k": True,
    "node_cooldown_seconds": False, "pod_startup_seconds": False,
    "scale_down_unneeded_seconds": False, "max_clock_jump_seconds": True,
}
_COUNTS = ("max_evictions_per_interval", "max_nodes_per_interval")


def rebalancer_config(data: object) -> RebalancerConfig:
    """The `rebalancer:` section; ConfigError naming the key on a bad value."""
    allowed = {
        *_NUMBERS, *_COUNTS, "mode", "scale_down_utilization_threshold", "annotate_nodes",
        "lease_namespace", "lease_name",
    }
    section = _section(data, "rebalancer", allowed)
    given: dict[str, Any] = {}
    for key, positive in _NUMBERS.items():
        if key in section:
            value = _number(section[key], f"rebalancer.{key}", positive=positive)
            if value < 0:
                raise ConfigError(f"rebalancer.{key}: must be >= 0, got {section[key]!r}")
            given[key] = value
    for key in _COUNTS:
        if key in section:
            count = section[key]
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigError(f"rebalancer.{key}: expected an integer >= 1, got {count!r}")
            given[key] = count
    if "mode" in section:
        mode = section["mode"]
        if mode not in MODES:
            raise ConfigError(f"rebalancer.mode: expected one of {list(MODES)}, got {mode!r}")
        given["mode"] = mode
    if "scale_down_utilization_threshold" in section:
        raw = section["scale_down_utilization_threshold"]
        threshold = None
        if raw is not None:
            threshold = _number(raw, "rebalancer.scale_down_utilization_threshold", positive=False)
            if not 0 <= threshold <= 1:
                raise ConfigError(
                    f"rebalancer.scale_down_utilization_threshold: must be in [0, 1], got {threshold!r}"
                )
        given["scale_down_utilization_threshold"] = threshold
    if "annotate_nodes" in section:
        given["annotate_nodes"] = _bool(section["annotate_nodes"], "rebalancer.annotate_nodes")
    for key in ("lease_namespace", "lease_name"):
        if key in section:
            given[key] = _str(section[key], f"rebalancer.{key}")
    return RebalancerConfig(**given)


__all__ = ["MODE_ACTIVE", "MODE_SHADOW", "RebalancerConfig", "rebalancer_config"]
