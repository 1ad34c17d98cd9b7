"""A physical lower bound on the energy any placement policy can spend on a trace.

The bound ignores integrality (pods may be split across nodes, nodes may be fractionally on)
and timing (work may be moved in time), so it holds for every policy the simulator can run,
whatever it delays or stretches:

* Work: `W = Σ cpu_usage × duration` core-seconds. Contention stretches a pod but does not
  change its work, so every policy serves exactly W.
* With power-off: serving W costs at least `W × e*` where
  `e* = min over nodes and loads u of P(u) / (u × cores)`, the cheapest watts per busy core any
  node reaches at any load (idle included, because a node serving work is on). Boots are free
  and nothing else must stay on.
* Without power-off: every node is on from 0 until the run ends, and no run ends before the last
  pod could have finished running undisturbed (`T0 = max(submit + duration)`), so idle costs at
  least `Σ P_n(0) × T0`; on top, W costs at least `W × k*` where
  `k* = min over nodes and loads u of (P(u) − P(0)) / (u × cores)`, the cheapest marginal
  watts per busy core.

For 11-point curves `P(u)/u` and `(P(u) − P(0))/u` are monotone between the points, so the
minimum over u is at one of u = 0.1 … 1.0; the linear and Fan et al. curves reach it at u = 1,
which is among those points too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.curves import UTILIZATION_LEVELS
from rl.scenario import NodeSpec, PodSpec

_LOADS = tuple(u for u in UTILIZATION_LEVELS if u > 0)


@dataclass(frozen=True)
class OracleBound:
    energy_joules: float
    work_core_seconds: float
    horizon_s: float  # T0: the earliest any run can end
    idle_joules: float  # the part from nodes that must stay on (0 with power-off)
    watts_per_core: float  # e* (power-off) or k* (always on)

    @property
    def energy_kwh(self) -> float:
        return self.energy_joules / 3.6e6


def best_watts_per_core(nodes: Sequence[NodeSpec]) -> float:
    """e*: the least total watts per busy core over nodes and loads."""
    return min(n.curve.watts(u) / (u * n.cpu_cores) for n in nodes for u in _LOADS)


def best_marginal_watts_per_core(nodes: Sequence[NodeSpec]) -> float:
    """k*: the least watts above idle per busy core over nodes and loads."""
    return min(
        (n.curve.watts(u) - n.curve.watts(0.0)) / (u * n.cpu_cores) for n in nodes for u in _LOADS
    )


def oracle_bound(
    nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], power_off: bool
) -> OracleBound:
    work = sum(p.work_core_seconds for p in pods)
    horizon = max((p.submit_s + p.duration_s for p in pods), default=0.0)
    if power_off:
        rate = best_watts_per_core(nodes)
        return OracleBound(work * rate, work, horizon, 0.0, rate)
    rate = best_marginal_watts_per_core(nodes)
    idle = sum(n.curve.watts(0.0) for n in nodes) * horizon
    return OracleBound(idle + work * rate, work, horizon, idle, rate)
