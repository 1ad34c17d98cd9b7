"""The energy plugin's v3 levers: what a placement changes under cluster-autoscaler.

On nodes that are either off or on, marginal watts barely differ between nodes; what placement
changes is how long each node must stay on. Three levers, each a `KubejouleEnergy` argument in
the profile (`args:`), on top of the consolidation price (`scheduler.plugins.energy`):

* `lifetimes` — node-time pricing with predicted lifetimes (scheduler/lifetimes). With `L` the
  pod's predicted lifetime and `T` the time until the node's other pods are all predicted to
  have ended (0 on an empty node), the pod keeps the node on for `max(0, L − T)` beyond what it
  would otherwise be on. It pays its marginal watts while the node runs anyway and, for the
  extension, its share of the node at the reference load (`Δu × a_n`, the empty node's price,
  which holds the node's idle power):

      price = (min(L, T) × running + max(0, L − T) × share) / L

  A pod that ends before the node's other pods costs only its marginal watts (`running`, v2's
  `min(P(u + Δu) − P(u), share)`); one that outlives them all pays the share, as if it opened
  the node. Without a prediction (or without the lever) a running node costs `running`, as in v2.
* `protectRemoval` — a node cluster-autoscaler is about to remove (it carries the
  `DeletionCandidateOfClusterAutoscaler` taint, or its requests are at or below the scale-down
  utilization threshold while its unneeded timer runs) is priced as a node the pod alone keeps
  on (`T = 0`): a pod that would end soon goes to a node that stays on anyway instead of
  reviving it (or being evicted by its drain), while a long pod, which keeps some node on
  whichever it takes, may still use it.
* `efficiency` — a running node costs the pod's share of the node's power at its expected
  utilization, `Δu × P(v) / v` with `v = max(u + Δu, efficiencyUtilization)` (default 1: a node
  packed to its requests is expected to run full), instead of its marginal watts (capped, like
  the marginal, at the empty node's share): load goes first to the nodes with the fewest watts
  per unit of work, and nodes of a wasteful kind (high idle power for their capacity) receive
  less and drain first.

`scale` sets how a price becomes a score. `pod` (v3): the price per core of the pod's request,
`p = price / cores`, scores `100 × R / (R + p)` with `R` = 10 W per core — strictly decreasing in
the price for every pod, never saturating, so any two nodes whose prices differ score apart
for a pod of 0.1 or of 64 cores. `fixed` (v2): `100 × clamp(1 − ΔP / ΔP_ref, 0, 1)` with the
`scorer:` section's ΔP_ref, which saturates for large pods. With any lever or the `pod` scale,
equal prices are told apart by fullness: the price of a node is raised by 0.1 % × its share of
allocatable CPU not requested, so of two nodes of a kind the fuller one wins (bin packing among
equals).

Scores stay per node and candidate-independent: every input is the node's own (its curve, its
state, its pods' predicted lifetimes, its taints and requests) or the pod's.

Where the inputs come from (`Outlook`): the standalone scheduler's cluster cache and its
predictor (learned from pods that end in the cluster), the simulator's running pods and a
predictor learned from pods that end in the simulation (`rl/policies/outlook_sim.py`) — never from a
trace's durations. A node's `unneeded` column is what the simulator knows of cluster-autoscaler's
timer; a live scheduler sees only the taint CA puts on the nodes it marks unneeded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from common.curves import columns_watts
from scheduler.domain.cluster_defaults import SCALE_DOWN_UTILIZATION_THRESHOLD
from scheduler.domain.model import NodeState, PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.lifetimes import LifetimePredictor
from scheduler.plugins.energy.price import amortized_rate

LIFETIMES = "lifetimes"
PROTECT_REMOVAL = "protectRemoval"
EFFICIENCY = "efficiency"
SCALE = "scale"
THRESHOLD = "scaleDownUtilizationThreshold"
EFFICIENCY_UTILIZATION = "efficiencyUtilization"
LEVER_ARGS = (LIFETIMES, PROTECT_REMOVAL, EFFICIENCY, SCALE, THRESHOLD, EFFICIENCY_UTILIZATION)
SCALE_POD = "pod"
SCALE_FIXED = "fixed"
SCALES = (SCALE_POD, SCALE_FIXED)

# The `pod` scale's reference: a price of 10 W per requested core scores 50.
REFERENCE_WATTS_PER_CORE = 10.0
# Equal prices are told apart by fullness: + this share of the price per unit of free CPU.
PACKING_TIE = 1e-3
# cluster-autoscaler's soft taint on the nodes it finds unneeded (PreferNoSchedule).
DELETION_CANDIDATE_TAINT = "DeletionCandidateOfClusterAutoscaler"
# The utilization a node packed to its requests is expected to reach, where `efficiency`
# compares nodes' watts per unit of work: full load, the point SPECpower and vendors rate.
DEFAULT_EFFICIENCY_UTILIZATION = 1.0


@dataclass(frozen=True)
class Levers:
    """Which v3 levers the plugin uses (module docstring); all off is the v2 plugin."""

    lifetimes: bool = False
    protect_removal: bool = False
    efficiency: bool = False
    scale: str = SCALE_FIXED
    scale_down_utilization_threshold: float = SCALE_DOWN_UTILIZATION_THRESHOLD
    efficiency_utilization: float = DEFAULT_EFFICIENCY_UTILIZATION

    def __post_init__(self) -> None:
        for key, field in ((LIFETIMES, "lifetimes"), (PROTECT_REMOVAL, "protect_removal"),
                           (EFFICIENCY, "efficiency")):
            _flag(key, getattr(self, field))
        for key, field in ((THRESHOLD, "scale_down_utilization_threshold"),
                           (EFFICIENCY_UTILIZATION, "efficiency_utilization")):
            object.__setattr__(self, field, _number(key, getattr(self, field)))
        if self.scale not in SCALES:
            raise ValueError(f"{SCALE} must be one of {list(SCALES)}, got {self.scale!r}")
        if not 0.0 <= self.scale_down_utilization_threshold <= 1.0:
            raise ValueError(f"{THRESHOLD} must be in [0, 1], got {self.scale_down_utilization_threshold}")
        if not 0.0 < self.efficiency_utilization <= 1.0:
            raise ValueError(f"{EFFICIENCY_UTILIZATION} must be in (0, 1], got {self.efficiency_utilization}")

    @classmethod
    def from_config(cls, config: Mapping[str, object], base: Levers | None = None) -> Levers:
        """Levers from `KubejouleEnergy`'s profile args; what they leave out is `base`'s
        (DEFAULT_ARGS_LEVERS: every lever on). ValueError names a bad key or value."""
        unknown = sorted(set(config) - set(LEVER_ARGS))
        if unknown:
            raise ValueError(f"unknown args {unknown}; known: {list(LEVER_ARGS)}")
        base = DEFAULT_ARGS_LEVERS if base is None else base
        # Checked in __post_init__'s order: the switches, the numbers, the scale.
        lifetimes = _flag(LIFETIMES, config.get(LIFETIMES, base.lifetimes))
        protect_removal = _flag(PROTECT_REMOVAL, config.get(PROTECT_REMOVAL, base.protect_removal))
        efficiency = _flag(EFFICIENCY, config.get(EFFICIENCY, base.efficiency))
        threshold = _number(THRESHOLD, config.get(THRESHOLD, base.scale_down_utilization_threshold))
        utilization = _number(EFFICIENCY_UTILIZATION, config.get(EFFICIENCY_UTILIZATION, base.efficiency_utilization))
        scale = config.get(SCALE, base.scale)
        if not isinstance(scale, str):
            raise ValueError(f"{SCALE} must be one of {list(SCALES)}, got {scale!r}")
        return cls(lifetimes, protect_removal, efficiency, scale, threshold, utilization)

    @property
    def v3(self) -> bool:
        """Anything beyond the v2 plugin."""
        return self.lifetimes or self.protect_removal or self.efficiency or self.scale == SCALE_POD

    @property
    def needs_outlook(self) -> bool:
        return self.lifetimes or self.protect_removal


def _flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return value


def _number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number, got {value!r}")
    return float(value)


# The shipped `kubejoule` profile's levers (chosen by measurement: docs/standalone.md).
SHIPPED_LEVERS = Levers(lifetimes=True, scale=SCALE_POD)
# What a profile entry's args leave out: every lever on. The v2 plugin is
# `{lifetimes: false, protectRemoval: false, efficiency: false, scale: fixed}`.
DEFAULT_ARGS_LEVERS = Levers(lifetimes=True, protect_removal=True, efficiency=True, scale=SCALE_POD)


@dataclass(frozen=True)
class EnergyArgs:
    """`KubejouleEnergy`'s arguments in a profile entry: its v3 levers, those left out on
    (`Levers.from_config`); no args at all (`levers` None): the plugin as the configuration's
    `scorer:` section sets it up, levers and all."""

    levers: Levers | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> EnergyArgs:
        return cls(Levers.from_config(config) if config else None)


class Outlook(Protocol):
    """Where the v3 levers' inputs come from (module docstring)."""

    def pod_lifetime(self, pod: PodInfo) -> float | None:
        """The pod's predicted lifetime in seconds from its start, None if unknown."""

    def nodes(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per node, what the scheduler expects of it, as two columns: `empty_in_s` (float),
        predicted seconds until its pods other than DaemonSet pods have all ended (0: none;
        NaN: not known), and `unneeded` (bool), cluster-autoscaler's unneeded timer running for
        it (known to the simulator only)."""


def node_empty_in(
    pods: Sequence[tuple[PodInfo, float]], now: float, remaining: Callable[[PodInfo, float], float]
) -> float:
    """Seconds until the last of `pods` ((pod, start time)) is predicted to end: the longest
    predicted remaining lifetime at each pod's age (0 without pods)."""
    longest = 0.0
    for info, started in pods:
        left = remaining(info, max(0.0, now - started))
        if left == left and left > longest:  # NaN: no answer
            longest = left
    return longest


class NodeEnds:
    """Per node, when its last pod is predicted to end (absolute time), remembered until its
    pods change (`mark`), the predictor learns (`version`) or that time has passed (a pod that
    outlives its prediction is predicted again at its age)."""

    def __init__(self, remaining: Callable[[PodInfo, float], float]) -> None:
        self._remaining = remaining
        self._ends: dict[str, tuple[int, int, float]] = {}

    def empty_in(
        self, names: Sequence[str], marks: Sequence[int], version: int, now: float,
        pods: Callable[[str], Sequence[tuple[PodInfo, float]]],
    ) -> np.ndarray:
        """Seconds until each node's last pod is predicted to end (`marks[i]`: node i's
        current mark; `pods(name)` read only where the end must be predicted again)."""
        ends = self._ends
        out = np.empty(len(names))
        for i, name in enumerate(names):
            known = ends.get(name)
            mark = marks[i]
            if known is None or known[0] != mark or known[1] != version or known[2] <= now:
                known = ends[name] = (mark, version, now + node_empty_in(pods(name), now, self._remaining))
            out[i] = known[2]
        return np.maximum(out - now, 0.0)

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop the nodes `keep` refuses (nodes gone from the cluster)."""
        for name in [n for n in self._ends if not keep(n)]:
            del self._ends[name]


class PodsByNode(Protocol):
    """What the live outlook reads of the standalone scheduler's cluster cache
    (scheduler/cluster/cache.py's ClusterCache)."""

    def node_marks(self, nodes: Sequence[str]) -> list[int]:
        """Per node, a number that changes whenever its pods do."""

    def node_pods(self, node: str) -> tuple[int, list[tuple[PodInfo, float]]]:
        """(its mark, its pods other than DaemonSet and mirror pods with their placement times)."""


class CacheOutlook:
    """The live outlook: the standalone scheduler's cluster cache (its pods, their placement
    times) and a lifetime predictor the cache teaches (`ClusterCache(lifetimes=…)`). The
    unneeded timer is cluster-autoscaler's own and not visible: the taint it puts on those
    nodes is (read by the plugin from the node)."""

    def __init__(self, cache: PodsByNode, predictor: LifetimePredictor, clock: Callable[[], float]) -> None:
        self.cache = cache
        self.predictor = predictor
        self._clock = clock
        self._ends = NodeEnds(predictor.predict_remaining)

    def pod_lifetime(self, pod: PodInfo) -> float | None:
        return self.predictor.predict_remaining(pod, 0.0)

    def nodes(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        # The marks are cheap; a node's pods are read only when its end must be predicted
        # again (a pod placed or removed in between changes its mark: predicted again next time).
        marks = self.cache.node_marks(names)
        ends = self._ends.empty_in(names, marks, self.predictor.version, self._clock(),
                                   lambda name: self.cache.node_pods(name)[1])
        return ends, np.zeros(len(names), dtype=bool)


def _removal_candidates(
    states: Sequence[NodeState], unneeded: np.ndarray, cols: Mapping[str, np.ndarray], threshold: float,
) -> np.ndarray:
    """Nodes cluster-autoscaler is about to remove: its taint, or unneeded and at or below the
    threshold by requests (the larger of CPU and memory, DaemonSet pods counted, as CA does)."""
    tainted = np.fromiter(
        (any(t.key == DELETION_CANDIDATE_TAINT for t in s.info.taints) for s in states),
        dtype=bool, count=len(states),
    )
    if not unneeded.any():
        return tainted
    with np.errstate(divide="ignore", invalid="ignore"):
        cpu = np.where(cols["alloc_cpu"] > 0, cols["req_cpu"] / cols["alloc_cpu"], 1.0)
        mem = np.where(cols["alloc_mem"] > 0, cols["req_mem"] / cols["alloc_mem"], 1.0)
    return tainted | (unneeded & (np.maximum(cpu, mem) <= threshold))


def v3_price(
    levers: Levers,
    outlook: Outlook | None,
    pod: PodInfo,
    names: Sequence[str],
    states: Sequence[NodeState],
    cols: Mapping[str, np.ndarray],
    core: Mapping[str, np.ndarray],
    delta_u: np.ndarray,
    marginal: np.ndarray,
    share: np.ndarray,
    u_ref: float,
) -> np.ndarray:
    """The v3 price of every row (module docstring). `cols` are the plugin's derived columns,
    `core` the batch's resource columns (the same rows), `share` the empty node's price
    `Δu × a_n` and `marginal` `P(u + Δu) − P(u)`."""
    empty = cols["empty"]
    u = cols["utilization"]
    if levers.efficiency:
        v = np.maximum(u + delta_u, levers.efficiency_utilization)
        running = np.minimum(delta_u * columns_watts(cols, v) / v, share)
    else:
        running = np.minimum(marginal, share)
    # The share of the pod's life it keeps the node on by itself: 1 on an empty node.
    alone = empty.astype(np.float64)
    ends = np.full(len(names), np.nan)
    unneeded = np.zeros(len(names), dtype=bool)
    if outlook is not None and levers.needs_outlook:
        ends, unneeded = outlook.nodes(names)
    if outlook is not None and levers.lifetimes:
        life = outlook.pod_lifetime(pod)
        if life is not None and life > 0 and life == life:
            known = ~np.isnan(ends) & ~empty
            alone[known] = np.clip((life - ends[known]) / life, 0.0, 1.0)
    if levers.protect_removal:
        doomed = _removal_candidates(states, unneeded, core, levers.scale_down_utilization_threshold)
        alone[doomed] = 1.0
    price = (1.0 - alone) * running + alone * share
    return np.maximum(price, 0.0)


def batch_v3_price(
    levers: Levers, outlook: Outlook | None, pod: PodInfo, batch: CandidateBatch, rows: np.ndarray | None,
    cols: Mapping[str, np.ndarray], delta_u: np.ndarray, marginal: np.ndarray, u_ref: float,
) -> np.ndarray:
    """v3_price() of a CandidateBatch's rows (all, or `rows` in that order), `cols` the energy
    plugin's derived columns of those rows."""
    states: Sequence[NodeState] = batch.states
    names: Sequence[str] = batch.names
    core = {"alloc_cpu": batch.alloc_cpu, "req_cpu": batch.req_cpu,
            "alloc_mem": batch.alloc_mem, "req_mem": batch.req_mem}
    if rows is not None:
        picked = rows.tolist()
        states = [states[i] for i in picked]
        names = [names[i] for i in picked]
        core = {name: values[rows] for name, values in core.items()}
    share = delta_u * amortized_rate(cols, cols["rates"], np.maximum(u_ref, delta_u))
    return v3_price(levers, outlook, pod, names, states, cols, core, delta_u, marginal, share, u_ref)


def requested_share(batch: CandidateBatch, rows: np.ndarray | None) -> np.ndarray:
    """CPU requested over allocatable of a batch's rows (all, or `rows`)."""
    req, alloc = batch.req_cpu, batch.alloc_cpu
    if rows is not None:
        req, alloc = req[rows], alloc[rows]
    return np.where(alloc > 0, req / np.maximum(alloc, 1), 0.0)


def tie_by_fullness(price: np.ndarray, requested: np.ndarray) -> np.ndarray:
    """Equal prices told apart by fullness, `requested` the CPU requested over allocatable
    (module docstring)."""
    return price * (1.0 + PACKING_TIE * (1.0 - np.clip(requested, 0.0, 1.0)))


def pod_scale_score(price: np.ndarray, cores: float) -> np.ndarray:
    """`100 × R / (R + price / cores)`: strictly decreasing in the price, never saturating."""
    per_core = np.maximum(price, 0.0) / max(cores, 1e-3)
    return 100.0 * REFERENCE_WATTS_PER_CORE / (REFERENCE_WATTS_PER_CORE + per_core)
