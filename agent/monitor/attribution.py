"""Attribution of node power to idle, pods, the host and, as views, VMs and processes.

Pure arithmetic on one interval's numbers, exactly as DESIGN.md defines it:

* idle: the calibrated static power, clamped to node power, when a profile is loaded; else
  `P_node × (1 − u)`. `P_active = P_node − P_idle`.
* pod i: `P_active × c_i / B` (B = busy CPU seconds from /proc/stat, c_i = the pod cgroup's CPU
  seconds). If read skew makes Σc_i > B, the pods are scaled down together to fit and the
  interval is flagged.
* host: `P_active × (B − Σc_i) / B`, clamped at 0. With B = 0 there is no CPU time to divide by:
  all active power (only non-zero with a calibrated idle) is the host's.
* views (containers in a pod, VMs and processes in a pod or in the host part): the part's watts
  shared by CPU time; if the members' CPU adds up to more than the part's (clock-tick rounding,
  read skew) they are scaled to fit, so a view never exceeds what contains it.
* the invariant Σpods + host + idle = node, to 1e-6 relative, checked every interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.monitor.snapshot import IDLE_FROM_CALIBRATION, IDLE_FROM_UTILIZATION

INVARIANT_RELATIVE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class IdleSplit:
    idle_watts: float | None
    active_watts: float | None
    idle_source: str


def split_idle(
    node_watts: float | None, utilization: float | None, calibrated_idle_watts: float | None = None
) -> IdleSplit:
    """Idle and active power. Without node power both are unknown; without utilization only
    a calibrated idle can be given."""
    if calibrated_idle_watts is not None:
        if node_watts is None:
            return IdleSplit(None, None, IDLE_FROM_CALIBRATION)
        idle = min(max(calibrated_idle_watts, 0.0), max(node_watts, 0.0))
        return IdleSplit(idle, node_watts - idle, IDLE_FROM_CALIBRATION)
    if node_watts is None or utilization is None:
        return IdleSplit(None, None, IDLE_FROM_UTILIZATION)
    idle = node_watts * (1.0 - utilization)
    return IdleSplit(idle, node_watts - idle, IDLE_FROM_UTILIZATION)


@dataclass(frozen=True)
class PodSplit:
    pod_watts: Mapping[str, float | None]
    host_watts: float | None
    host_cpu_seconds: float | None  # B − Σc_i, clamped at 0; the host part's CPU time
    skew_scaled: bool  # Σc_i > B: pods were scaled down to fit


def split_pods(
    active_watts: float | None, busy_seconds: float | None, pod_cpu_seconds: Mapping[str, float]
) -> PodSplit:
    """Active power shared between pods by cgroup CPU time over busy time; the rest is the host's."""
    if busy_seconds is None:
        return PodSplit(dict.fromkeys(pod_cpu_seconds), None, None, False)
    total_pods = sum(pod_cpu_seconds.values())
    skewed = total_pods > busy_seconds
    host_cpu = max(busy_seconds - total_pods, 0.0)
    if active_watts is None:
        return PodSplit(dict.fromkeys(pod_cpu_seconds), None, host_cpu, skewed)
    if busy_seconds <= 0.0:
        return PodSplit(dict.fromkeys(pod_cpu_seconds, 0.0), active_watts, 0.0, skewed)
    # With skew the pods share all of B in proportion to c_i: Σ pods = P_active, host = 0.
    # Shares are taken before multiplying: a share is at most 1, so a tiny B (subnormal floats)
    # cannot round a part above the whole.
    denominator = total_pods if skewed else busy_seconds
    pods: dict[str, float | None] = {
        uid: active_watts * (cpu / denominator) for uid, cpu in pod_cpu_seconds.items()
    }
    host = 0.0 if skewed else max(active_watts * (host_cpu / busy_seconds), 0.0)
    return PodSplit(pods, host, host_cpu, skewed)


def share_within(
    part_watts: float | None, part_cpu_seconds: float | None, member_cpu_seconds: Mapping[int | str, float]
) -> dict[int | str, float | None]:
    """Members' watts inside a part (a pod or the host), by CPU time; never more than the part."""
    if part_watts is None or part_cpu_seconds is None:
        return dict.fromkeys(member_cpu_seconds)
    denominator = max(part_cpu_seconds, sum(member_cpu_seconds.values()))
    if denominator <= 0.0:
        return dict.fromkeys(member_cpu_seconds, 0.0)
    return {key: part_watts * (cpu / denominator) for key, cpu in member_cpu_seconds.items()}


def invariant_error(
    node_watts: float, idle_watts: float, pod_watts: list[float], host_watts: float
) -> float:
    """Relative error of Σpods + host + idle against node power."""
    total = sum(pod_watts) + host_watts + idle_watts
    scale = max(abs(node_watts), 1e-12)
    return abs(total - node_watts) / scale


def invariant_holds(
    node_watts: float, idle_watts: float, pod_watts: list[float], host_watts: float
) -> bool:
    if node_watts == 0.0:
        return abs(sum(pod_watts) + host_watts + idle_watts) <= 1e-9
    return invariant_error(node_watts, idle_watts, pod_watts, host_watts) <= INVARIANT_RELATIVE_TOLERANCE
