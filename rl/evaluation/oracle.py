"""A physical lower bound on the energy any placement policy can spend on a trace.

The bound ignores integrality (pods may be split across nodes, nodes may be fractionally on)
and timing (work may be moved in time), so it holds for every policy the simulator can run,
whatever it delays, stretches or restarts:

* Work: `W = Σ cpu_usage × duration` core-seconds. Contention stretches a pod but does not
  change its work, and a drained pod's restart only adds work, so every policy serves ≥ W.
* No run ends before the last pod could have finished running undisturbed
  (`T0 = max(submit + duration)`).
* Each node n has a *floor* `f_n` it draws at every instant of [0, T0], whatever happens:
  - a node that is always on (every node without power-off; the first `min_count` of its group
    with it) runs its DaemonSet pods (`d` cores of usage) all along: `f_n = P_n(d / C_n)`;
  - a node that may power off draws at least the least of its standby watts, its boot watts and
    `P_n(d / C_n)` (ready, it runs its DaemonSet pods): `f_n = min(standby, boot, P_n(d / C_n))`.
* Serving work costs at least `k_n = min over 0 < x ≤ 1 of (P_n(min(1, x + d/C_n)) − f_n) /
  (x × C_n)` watts per busy core above the floor (x: the share of the cores the workload pods
  use; a node never serves more than its C_n cores).

So `E ≥ T0 × Σ f_n + W × min_n k_n`. Split as the simulator splits a run's energy
(rl/simulation/engine/energy.py): `W × min k` is work, the always-on nodes' `P_n(0) × T0` idle (of
nodes carrying pods: the bound puts the work on them) and `(P_n(d / C_n) − P_n(0)) × T0`
DaemonSets, the other nodes' floors standby; the bound has no boots and no empty nodes. Without DaemonSets and standby power this is the old bound:
with power-off, `f_n = 0` and `k = e*`, the cheapest total watts per busy core of any node at any
load; always on, `Σ P_n(0) × T0` plus `k*`, the cheapest marginal watts per busy core.

For 11-point curves `(P(x + d) − f) / x` is monotone between the points where `x + d` is a
curve point (and decreasing once `x + d ≥ 1`), so the minimum over x is at one of those points
or at x = 1; for the concave linear and Fan et al. curves it is decreasing in x, so at x = 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from common.curves import UTILIZATION_LEVELS
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from scheduler.domain.cluster_defaults import BOOT_SECONDS

_LOADS = tuple(u for u in UTILIZATION_LEVELS if u > 0)


@dataclass(frozen=True)
class OracleBound:
    energy_joules: float
    work_core_seconds: float
    horizon_s: float  # T0: the earliest any run can end
    idle_joules: float  # T0 × Σ floors: what the nodes draw whatever the placement
    watts_per_core: float  # min_n k_n
    # idle_joules split: the always-on nodes' idle and DaemonSet watts, the others' floors.
    always_on_idle_joules: float = 0.0
    daemon_joules: float = 0.0
    standby_joules: float = 0.0

    @property
    def energy_kwh(self) -> float:
        return self.energy_joules / 3.6e6

    def split_joules(self) -> dict[str, float]:
        """The bound by where its energy goes (module docstring; rl/simulation/engine/energy.py's parts)."""
        return {
            "work": self.energy_joules - self.idle_joules,
            "idle_with_pods": self.always_on_idle_joules,
            "idle_empty": 0.0,
            "daemonsets": self.daemon_joules,
            "boots": 0.0,
            "standby": self.standby_joules,
        }


def mean_bound(bounds: Sequence[OracleBound]) -> OracleBound:
    """The field-by-field mean of several workloads' bounds (a benchmark's seeds)."""
    count = len(bounds)
    return OracleBound(
        *(sum(getattr(b, f) for b in bounds) / count for f in OracleBound.__dataclass_fields__)
    )


def marginal_rate(node: NodeSpec, floor_watts: float, daemon_cores: float = 0.0) -> float:
    """k_n: the least watts above `floor_watts` per busy core of workload on the node, with
    `daemon_cores` of DaemonSet usage always on it (module docstring)."""
    cores = node.cpu_cores
    d = min(1.0, daemon_cores / cores)
    shares = {u - d for u in _LOADS if u - d > 1e-12} | {1.0}
    return min((node.curve.watts(min(1.0, x + d)) - floor_watts) / (x * cores) for x in shares)


def node_floor_watts(
    node: NodeSpec,
    always_on: bool,
    daemon_cores: float = 0.0,
    boot_watts: float | None = None,
) -> float:
    """f_n: what the node draws at every instant, whatever the policy (module docstring)."""
    ready = node.curve.watts(min(1.0, daemon_cores / node.cpu_cores))
    if always_on:
        return ready
    floor = min(node.standby_watts, ready)
    return floor if boot_watts is None else min(floor, boot_watts)


def oracle_bound(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    power_off: bool,
    daemon_cores: float = 0.0,
    boot_seconds: float = BOOT_SECONDS,
    boot_joules: float | None = None,
) -> OracleBound:
    """The bound for the cluster and trace. `power_off`: nodes beyond their group's min_count
    may be off (autoscaler or the visible-power-off ablation); `daemon_cores`: the DaemonSet
    pods' CPU usage on every powered-on node; a boot draws boot_joules / boot_seconds watts
    (boot_joules None: the node's full-load watts)."""
    work = sum(p.work_core_seconds for p in pods)
    horizon = max((p.submit_s + p.duration_s for p in pods), default=0.0)
    floors = []
    on_idle = on_daemon = 0.0
    rate = float("inf")
    for node in nodes:
        boot_watts = None
        if boot_joules is not None and boot_seconds > 0:
            boot_watts = boot_joules / boot_seconds
        always_on = not power_off or node.always_on
        floor = node_floor_watts(node, always_on, daemon_cores, boot_watts)
        floors.append(floor)
        if always_on:
            on_idle += node.curve.watts(0.0)
            on_daemon += floor - node.curve.watts(0.0)
        rate = min(rate, marginal_rate(node, floor, daemon_cores))
    idle = sum(floors) * horizon
    standby = idle - (on_idle + on_daemon) * horizon
    return OracleBound(
        idle + work * rate, work, horizon, idle, rate, on_idle * horizon, on_daemon * horizon,
        standby,
    )
