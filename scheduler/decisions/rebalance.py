"""The energy rebalancer's decision, one round: which nodes to empty onto running, more efficient
nodes — the one implementation the live rebalancer (scheduler/rebalancer/loop.py) and the
simulator (`+rebalancer`, rl/simulation/controllers/rebalancer.py) run.

For every node (a *source*), in this order, the first that applies skips it (`Skip.reason`):

1. `not_schedulable` (cordoned, not ready, or being removed), `cooldown` (acted on recently),
   `no_pods` (nothing to move: cluster-autoscaler removes empty nodes itself);
2. doubt about the node — `telemetry` (no fresh sample), `curve` (no known power curve);
3. a pod it must never evict (scheduler/cluster/podfacts.py `never_evict_reason`: `bare`,
   `local_storage`, `not_safe_to_evict`, `do_not_disrupt`, `terminating`; the live cluster adds
   `multiple_pdbs` and `unreadable_pod`); DaemonSet and mirror pods stay and never block;
   then doubt about a pod — `prediction` (no predicted lifetime), `prediction_fallback` (a
   prediction from priors only): the rebalancer never evicts on missing data;
4. `autoscaler`: its requests are at or under cluster-autoscaler's scale-down threshold, so
   the autoscaler drains and removes it itself; `pdb`: a workload's PodDisruptionBudget would
   not let all its pods on the node go now;
5. `no_room`: some pod fits no destination — a running, schedulable, non-empty node with fresh
   telemetry and a known curve whose watts per busy core, after the pods it takes, stay below
   the source's now (the pods go, largest CPU request first, each to the destination where it
   adds the fewest watts; the scheduler's filters decide the fit);
6. `not_worth`: the energy saved over the predicted horizon does not exceed the disruption
   cost by the margin (scheduler/decisions/rebalance_prices.py); `score`: Karpenter's balanced score
   with watts for price is under 1/k.

The moves that pass go in descending score order, each placed again against what the moves
before it took (an emptied node is no destination, a node that takes pods is not emptied in the
same round: `destination`), within the round's budget of evicted pods and of nodes (`budget`
when it runs out). The decision never deletes a node: an emptied node is left to cluster-autoscaler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from common.curves import PowerCurve
from scheduler.decisions.rebalance_lifetime import Remaining
from scheduler.decisions.rebalance_prices import (
    balanced_score,
    node_disruption_cost,
    source_energy,
    takeover_time,
)
from scheduler.domain.filters import filter_nodes
from scheduler.domain.model import NodeState, PodInfo


class RebalanceSettings(Protocol):
    """What a round reads of the `rebalancer:` section: the configuration's `RebalancerConfig`
    (scheduler/config/rebalancer.py, which parses and checks it) is one; the decision sits below
    config/, so it names the fields it reads rather than importing the type."""

    @property
    def max_evictions_per_interval(self) -> int: ...
    @property
    def max_nodes_per_interval(self) -> int: ...
    @property
    def margin(self) -> float: ...
    @property
    def balanced_k(self) -> float: ...
    @property
    def pod_startup_seconds(self) -> float: ...
    @property
    def scale_down_utilization_threshold(self) -> float | None: ...
    @property
    def scale_down_unneeded_seconds(self) -> float: ...


@dataclass(frozen=True)
class PodView:
    """One pod of a node's workload (not its DaemonSet or mirror pods) as the decision sees it."""

    key: str
    info: PodInfo
    cpu_cores: float  # the CPU it uses (its share of the node's measured use)
    run_seconds: float  # how long it has run: the work a restart loses
    restarts: bool  # evicted, it starts over (a Job's pod); else its replacement goes on
    remaining: Remaining | None  # predicted remaining lifetime
    eviction_cost: float = 1.0  # Karpenter's EvictionCost
    blocker: str | None = None  # never_evict_reason
    workload: str | None = None  # the PodDisruptionBudget's key
    pdb_room: int | None = None  # its disruptions allowed now; None without a PDB


@dataclass(frozen=True)
class NodeView:
    state: NodeState  # requests of every pod on it, DaemonSet pods included
    curve: PowerCurve | None
    utilization: float | None  # from fresh telemetry; None when there is none
    pods: tuple[PodView, ...] = ()
    schedulable: bool = True
    cooling: bool = False

    @property
    def name(self) -> str:
        return self.state.info.name

    @property
    def cores(self) -> float:
        return self.state.cores

    @property
    def known(self) -> bool:
        return self.curve is not None and self.utilization is not None and self.cores > 0


@dataclass(frozen=True)
class Move:
    node: str
    placements: tuple[tuple[str, str], ...]  # (pod key, destination)
    saving_joules: float
    cost_joules: float
    horizon_seconds: float
    watts_saved: float
    score: float

    @property
    def pods(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.placements)


@dataclass(frozen=True)
class Skip:
    node: str
    reason: str
    move: Move | None = None  # priced but rejected (not_worth, score, budget)


@dataclass
class Plan:
    moves: list[Move] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)

    def reasons(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for skip in self.skipped:
            counts[skip.reason] = counts.get(skip.reason, 0) + 1
        return counts


@dataclass
class _Room:
    """The destinations as the round has filled them so far."""

    states: dict[str, NodeState]
    utilization: dict[str, float]


# A sample this far ahead of our clock is the skew between two hosts' clocks, not a jump.
FUTURE_SKEW_S = 5.0


def fresh_utilization(state: NodeState, now: float, max_staleness_s: float) -> float | None:
    """The node's utilization from a sample no older than `max_staleness_s`, plus the CPU
    requested since it (as the energy plugin counts it, capped at 1); None without one."""
    telemetry = state.telemetry
    if telemetry is None or telemetry.utilization is None or state.cores <= 0:
        return None
    age = now - telemetry.sample_time
    if not -FUTURE_SKEW_S <= age <= max_staleness_s or not 0 <= telemetry.utilization <= 1:
        return None  # stale, or a sample from the future (a clock that jumped)
    return min(1.0, telemetry.utilization + max(0.0, state.cpu_since_sample_cores) / state.cores)


def cpu_shares(busy_cores: float, requests_millicores: Sequence[int]) -> list[float]:
    """The node's measured busy cores split among its pods by their CPU requests (a pod without
    one counts as kube-scheduler's 100 m)."""
    weights = [max(r, 100) for r in requests_millicores]
    total = sum(weights)
    return [busy_cores * w / total for w in weights] if total else []


def watts_per_busy_core(curve: PowerCurve, cores: float, utilization: float) -> float:
    return curve.watts(utilization) / (utilization * cores) if utilization > 0 else float("inf")


def plan(nodes: Sequence[NodeView], config: RebalanceSettings) -> Plan:
    out = Plan()
    views = {n.name: n for n in nodes}
    known = [n for n in nodes if n.known]
    total_watts = 0.0
    utilization: dict[str, float] = {}
    for n in known:
        assert n.curve is not None and n.utilization is not None
        total_watts += n.curve.watts(n.utilization)
        utilization[n.name] = n.utilization
    total_disruption = sum(node_disruption_cost([p.eviction_cost for p in n.pods]) for n in nodes)
    room = _Room(
        {n.name: n.state for n in known if n.schedulable and not n.state.empty},
        utilization,
    )
    priced: list[Move] = []
    for node in nodes:
        reason = _source_skip(node) or _autoscaler_takes(node, config)
        if reason is None:
            move, _ = _price(node, views, room, config, total_watts, total_disruption, {})
            if isinstance(move, str):
                reason = move
            elif not _worth(move, config):
                out.skipped.append(Skip(node.name, "not_worth", move))
                continue
            elif move.score < 1.0 / config.balanced_k:
                out.skipped.append(Skip(node.name, "score", move))
                continue
            else:
                priced.append(move)
                continue
        out.skipped.append(Skip(node.name, reason))
    evictions, pdb_used, receiving = 0, dict[str, int](), set[str]()
    for first in sorted(priced, key=lambda m: (-m.score, m.node)):
        node = views[first.node]
        if node.name in receiving:  # it takes pods this round: not emptied in the same round
            out.skipped.append(Skip(node.name, "destination", first))
            continue
        again, trial = _price(node, views, room, config, total_watts, total_disruption, pdb_used)
        within = (
            len(out.moves) < config.max_nodes_per_interval
            and evictions + len(first.placements) <= config.max_evictions_per_interval
        )
        if isinstance(again, str) or not _worth(again, config) or not within:
            out.skipped.append(Skip(node.name, again if isinstance(again, str) else "budget", first))
            continue
        room.states.update(trial.states)
        room.states.pop(node.name, None)  # being emptied: no destination any more
        room.utilization.update(trial.utilization)
        receiving.update(name for _, name in again.placements)
        for pod in node.pods:
            if pod.pdb_room is not None and pod.workload is not None:
                pdb_used[pod.workload] = pdb_used.get(pod.workload, 0) + 1
        evictions += len(again.placements)
        out.moves.append(again)
    return out


def _worth(move: Move, config: RebalanceSettings) -> bool:
    return move.saving_joules > 0 and move.saving_joules >= (1.0 + config.margin) * move.cost_joules


def _source_skip(node: NodeView) -> str | None:
    if not node.schedulable:
        return "not_schedulable"
    if node.cooling:
        return "cooldown"
    if not node.pods:
        return "no_pods"
    if node.utilization is None or node.cores <= 0:
        return "telemetry"
    if node.curve is None:
        return "curve"
    for pod in node.pods:
        if pod.blocker is not None:
            return pod.blocker
    for pod in node.pods:
        if pod.remaining is None:
            return "prediction"
    if any(pod.remaining is not None and pod.remaining.fallback for pod in node.pods):
        return "prediction_fallback"
    return None


def _autoscaler_takes(node: NodeView, config: RebalanceSettings) -> str | None:
    """`autoscaler` when cluster-autoscaler finds the node under its threshold already: it
    drains and removes it itself (its pods fit elsewhere: they fit the destinations)."""
    threshold = config.scale_down_utilization_threshold
    alloc, requested = node.state.info.allocatable, node.state.requested
    shares = (
        requested.cpu_millicores / max(1, alloc.cpu_millicores),
        requested.memory_bytes / max(1, alloc.memory_bytes),
    )
    return "autoscaler" if threshold is not None and max(shares) <= threshold else None


def _pdb_allows(pods: Sequence[PodView], used: Mapping[str, int]) -> bool:
    wanted: dict[str, int] = {}
    rooms: dict[str, int] = {}
    for pod in pods:
        if pod.pdb_room is not None and pod.workload is not None:
            wanted[pod.workload] = wanted.get(pod.workload, 0) + 1
            rooms[pod.workload] = pod.pdb_room
    return all(rooms[w] - used.get(w, 0) >= count for w, count in wanted.items())


def _price(
    node: NodeView,
    views: Mapping[str, NodeView],
    room: _Room,
    config: RebalanceSettings,
    total_watts: float,
    total_disruption: float,
    pdb_used: Mapping[str, int],
) -> tuple[Move | str, _Room]:
    """The move that empties `node`, priced (or why it cannot be made), and the destinations
    as they would be after it."""
    assert node.curve is not None and node.utilization is not None
    trial = _Room({k: v for k, v in room.states.items() if k != node.name}, dict(room.utilization))
    if not _pdb_allows(node.pods, pdb_used):
        return "pdb", trial
    limit = watts_per_busy_core(node.curve, node.cores, node.utilization)
    placements: list[tuple[str, str]] = []
    added: list[float] = []
    for pod in sorted(node.pods, key=lambda p: (-p.info.requests.cpu_millicores, p.key)):
        best: tuple[float, str] | None = None
        for name in sorted(trial.states):
            dest = views[name]
            assert dest.curve is not None
            u = trial.utilization[name]
            after = u + pod.cpu_cores / dest.cores
            if after > 1.0 or watts_per_busy_core(dest.curve, dest.cores, after) >= limit:
                continue
            if not filter_nodes(pod.info, [trial.states[name]]).feasible:
                continue
            delta = dest.curve.watts(after) - dest.curve.watts(u)
            if best is None or delta < best[0]:
                best = (delta, name)
        if best is None:
            return "no_room", trial
        delta, name = best
        state = trial.states[name]
        trial.states[name] = replace(state, requested=state.requested + pod.info.requests,
                                     pod_count=state.pod_count + 1)
        trial.utilization[name] += pod.cpu_cores / views[name].cores
        placements.append((pod.key, name))
        added.append(delta)
    return _energy(node, placements, added, config, total_watts, total_disruption), trial


def _energy(
    node: NodeView,
    placements: Sequence[tuple[str, str]],
    added: Sequence[float],
    config: RebalanceSettings,
    total_watts: float,
    total_disruption: float,
) -> Move:
    """The move's saving, cost and score (scheduler/decisions/rebalance_prices.py's docstring)."""
    assert node.curve is not None and node.utilization is not None
    curve, cores, u_s = node.curve, node.cores, node.utilization
    by_key = {p.key: p for p in node.pods}
    pods = [by_key[key] for key, _ in placements]
    remaining = [p.remaining.seconds if p.remaining is not None else 0.0 for p in pods]
    alloc, requested = node.state.info.allocatable, node.state.requested
    cpu_alloc = max(1, alloc.cpu_millicores)
    mem_alloc = max(1, alloc.memory_bytes)
    takeover = takeover_time(
        [(r, p.info.requests.cpu_millicores / cpu_alloc, p.info.requests.memory_bytes / mem_alloc)
         for r, p in zip(remaining, pods, strict=True)],
        requested.cpu_millicores / cpu_alloc, requested.memory_bytes / mem_alloc,
        config.scale_down_utilization_threshold,
    )
    unneeded = config.scale_down_unneeded_seconds
    last = max(remaining, default=0.0)
    horizon = last if takeover is None else min(last, takeover + unneeded)
    idle = max(0.0, u_s - sum(p.cpu_cores for p in pods) / cores)
    tail = curve.watts(idle) * unneeded if horizon >= last else 0.0
    without = source_energy(
        curve, cores, u_s, [(r, p.cpu_cores) for r, p in zip(remaining, pods, strict=True)], horizon
    ) + tail
    with_move = curve.watts(idle) * unneeded
    moved = sum(d * min(r, horizon) for d, r in zip(added, remaining, strict=True))
    cost = sum(
        d * (config.pod_startup_seconds + (p.run_seconds if p.restarts else 0.0))
        for d, p in zip(added, pods, strict=True)
    )
    watts_saved = curve.watts(u_s) - sum(added)
    score = balanced_score(
        watts_saved, total_watts, node_disruption_cost([p.eviction_cost for p in node.pods]),
        total_disruption,
    )
    return Move(node.name, tuple(placements), without - with_move - moved, cost, horizon,
                watts_saved, score)
