"""The rebalancer's settings: the `rebalancer:` section of the scheduler's YAML configuration
(docs/rebalancer.md has the reference), every key optional."""

from __future__ import annotations

from dataclasses import dataclass

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
    default = RebalancerConfig()
    numbers: dict[str, float] = {}
    for key, positive in _NUMBERS.items():
        if key in section:
            value = _number(section[key], f"rebalancer.{key}", positive=positive)
            if value < 0:
                raise ConfigError(f"rebalancer.{key}: must be >= 0, got {section[key]!r}")
            numbers[key] = value
    counts: dict[str, int] = {}
    for key in _COUNTS:
        if key in section:
            count = section[key]
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigError(f"rebalancer.{key}: expected an integer >= 1, got {count!r}")
            counts[key] = count
    mode = section.get("mode", default.mode)
    if not isinstance(mode, str) or mode not in MODES:
        raise ConfigError(f"rebalancer.mode: expected one of {list(MODES)}, got {mode!r}")
    threshold = default.scale_down_utilization_threshold
    if "scale_down_utilization_threshold" in section:
        raw = section["scale_down_utilization_threshold"]
        threshold = None
        if raw is not None:
            threshold = _number(raw, "rebalancer.scale_down_utilization_threshold", positive=False)
            if not 0 <= threshold <= 1:
                raise ConfigError(
                    f"rebalancer.scale_down_utilization_threshold: must be in [0, 1], got {threshold!r}"
                )
    annotate = default.annotate_nodes
    if "annotate_nodes" in section:
        annotate = _bool(section["annotate_nodes"], "rebalancer.annotate_nodes")
    lease = {key: _str(section[key], f"rebalancer.{key}") for key in ("lease_namespace", "lease_name") if key in section}
    return RebalancerConfig(
        mode=mode,
        interval_seconds=numbers.get("interval_seconds", default.interval_seconds),
        max_evictions_per_interval=counts.get("max_evictions_per_interval", default.max_evictions_per_interval),
        max_nodes_per_interval=counts.get("max_nodes_per_interval", default.max_nodes_per_interval),
        margin=numbers.get("margin", default.margin),
        balanced_k=numbers.get("balanced_k", default.balanced_k),
        node_cooldown_seconds=numbers.get("node_cooldown_seconds", default.node_cooldown_seconds),
        pod_startup_seconds=numbers.get("pod_startup_seconds", default.pod_startup_seconds),
        scale_down_utilization_threshold=threshold,
        scale_down_unneeded_seconds=numbers.get("scale_down_unneeded_seconds", default.scale_down_unneeded_seconds),
        max_clock_jump_seconds=numbers.get("max_clock_jump_seconds", default.max_clock_jump_seconds),
        annotate_nodes=annotate,
        lease_namespace=lease.get("lease_namespace", default.lease_namespace),
        lease_name=lease.get("lease_name", default.lease_name),
    )


__all__ = ["MODE_ACTIVE", "MODE_SHADOW", "RebalancerConfig", "rebalancer_config"]
