"""cluster-autoscaler's semantics in the simulator: scans, scale-up options, expanders, scale-down.

Modelled on cluster-autoscaler's documented behaviour (its FAQ and flags):

* It runs every `scan_interval_s` (`--scan-interval`, default 10 s); scans at t = 0, 10, 20, ….
* Scale-up: the Pending pods (those the scheduler found no node for) that would not fit on nodes
  already starting (its "upcoming nodes") are the ones to serve. For every node group with
  powered-off nodes it estimates, from the group's template node (its allocatable with the
  DaemonSet pods already on it) and the scheduler's own filter, how many new nodes the pods need
  (first-fit in Pending order, as its binpacking estimator, at most the group's off nodes): an
  *option*. The expander picks one option, and that many nodes of the group boot. One scale-up
  per scan.
* Expanders: `random` (its default), `least-waste` (the least idle CPU plus idle memory, as
  fractions of what the new nodes add), `most-pods` (the most Pending pods served), `priority`
  (the group's `priority`; file order by default) and `kubejoule` (the least energy by the
  groups' power curves, scheduler/autoscaler/choice.py — the same code the gRPC expander
  serves; the simulator knows every group's curve, as the expander's `node_groups:` config
  would). Ties go to a random
  pick among the tied options, as cluster-autoscaler falls back to `random`.
* Scale-down: a ready node whose group keeps more than `min_count` powered nodes and that has run
  no pods other than DaemonSet pods for `scale_down_unneeded_s`
  (`--scale-down-unneeded-time`, default 10 min) powers off at the scan. With
  `utilization_threshold` (`--scale-down-utilization-threshold`; off by default here, 0.5 in
  cluster-autoscaler) a node whose requests (DaemonSet pods included, the larger of CPU and
  memory, over allocatable) stay below the threshold and whose pods would all fit on other ready
  nodes is unneeded too; when it has been so for `scale_down_unneeded_s` it is drained — its pods
  restart elsewhere from scratch (counted) — and powered off, one such node per scan.

Not modelled: `--scale-down-delay-after-add` and the other cool-downs, balancing similar node
groups, node-group backoff after failed boots, max-nodes-total.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.curves import PowerCurve
from scheduler.autoscaler.choice import GroupOption, best_options
from scheduler.filters import filter_nodes
from scheduler.model import NodeInfo, NodeState, PodInfo, Resources

if TYPE_CHECKING:
    from rl.simulator import Simulation, _Node

EXPANDERS = ("random", "least-waste", "most-pods", "priority", "kubejoule")
DEFAULT_EXPANDER = "random"


@dataclass(frozen=True)
class AutoscalerModel:
    scan_interval_s: float = 10.0
    expander: str = DEFAULT_EXPANDER
    boot_seconds: float = 120.0
    boot_joules: float | None = None  # None: boot seconds × the node's full-load watts
    scale_down_unneeded_s: float = 600.0
    utilization_threshold: float | None = None

    def __post_init__(self) -> None:
        if self.scan_interval_s <= 0:
            raise ValueError("scan interval must be > 0")
        if self.boot_seconds < 0 or self.scale_down_unneeded_s < 0:
            raise ValueError("boot and unneeded times must be >= 0")
        if self.boot_joules is not None and self.boot_joules < 0:
            raise ValueError("boot_joules must be >= 0")
        if self.utilization_threshold is not None and not 0 < self.utilization_threshold <= 1:
            raise ValueError("the scale-down utilization threshold must be in (0, 1]")
        if self.expander not in EXPANDERS:
            raise ValueError(f"unknown expander {self.expander!r}; known: {', '.join(EXPANDERS)}")


@dataclass(frozen=True)
class ScaleUpOption:
    """`node_count` new nodes of `group` would run `pods` (Pending pod indices)."""

    group: str
    node_count: int
    pods: tuple[int, ...]
    template: NodeInfo
    priority: int = 0


@dataclass
class _Bin:
    requested: Resources
    pods: int


def _fits(info: PodInfo, template: NodeInfo, requested: Resources, pods: int, daemons: int) -> bool:
    state = NodeState(info=template, requested=requested, pod_count=pods, daemon_pod_count=daemons)
    return bool(filter_nodes(info, [state]).feasible)


def binpack(
    pods: Sequence[tuple[int, PodInfo]],
    template: NodeInfo,
    daemon_requests: Resources,
    daemon_pods: int,
    max_nodes: int,
) -> tuple[int, tuple[int, ...]]:
    """First-fit of `pods` (in order) onto at most `max_nodes` new template nodes that already
    run the DaemonSet pods: (nodes used, pods placed)."""
    bins: list[_Bin] = []
    placed: list[int] = []
    for index, info in pods:
        for b in bins:
            if _fits(info, template, b.requested, b.pods, daemon_pods):
                b.requested = b.requested + info.requests
                b.pods += 1
                placed.append(index)
                break
        else:
            if len(bins) < max_nodes and _fits(
                info, template, daemon_requests, daemon_pods, daemon_pods
            ):
                bins.append(_Bin(daemon_requests + info.requests, daemon_pods + 1))
                placed.append(index)
    return len(bins), tuple(placed)


def least_waste_score(option: ScaleUpOption, infos: Callable[[int], PodInfo]) -> float:
    """Idle CPU plus idle memory after the scale-up, each as a fraction of what the new nodes
    add (cluster-autoscaler's least-waste expander)."""
    alloc = option.template.allocatable
    cpu = sum(infos(i).requests.cpu_millicores for i in option.pods)
    memory = sum(infos(i).requests.memory_bytes for i in option.pods)
    score = 0.0
    for used, each in ((cpu, alloc.cpu_millicores), (memory, alloc.memory_bytes)):
        total = each * option.node_count
        if total > 0:
            score += (total - used) / total
    return score


ExpanderFunction = Callable[[Sequence[ScaleUpOption], random.Random], ScaleUpOption]


def _pick_best(
    options: Sequence[ScaleUpOption], key: Callable[[ScaleUpOption], float], rng: random.Random
) -> ScaleUpOption:
    """The options with the lowest key; a random one of them on a tie."""
    best = min(key(o) for o in options)
    tied = [o for o in options if key(o) <= best + 1e-12]
    return tied[0] if len(tied) == 1 else rng.choice(tied)


def kubejoule_expander(
    curves: Mapping[str, PowerCurve], infos: Callable[[int], PodInfo]
) -> ExpanderFunction:
    """The least-energy option by scheduler/autoscaler/choice.py (the gRPC expander's code);
    a random pick among the options it returns when no group's curve is known."""

    def choose(options: Sequence[ScaleUpOption], rng: random.Random) -> ScaleUpOption:
        by_group = {o.group: o for o in options}
        offered = [
            GroupOption(o.group, o.node_count, tuple(infos(i) for i in o.pods), o.template)
            for o in options
        ]
        best = best_options(offered, {o.group: curves.get(o.group) for o in options})
        return by_group[best[0].group_id if len(best) == 1 else rng.choice(best).group_id]

    return choose


def make_expander(
    name: str, infos: Callable[[int], PodInfo], curves: Mapping[str, PowerCurve] | None = None
) -> ExpanderFunction:
    if name == "kubejoule":
        return kubejoule_expander(curves or {}, infos)
    if name == "random":
        return lambda options, rng: options[0] if len(options) == 1 else rng.choice(list(options))
    if name == "least-waste":
        return lambda options, rng: _pick_best(options, lambda o: least_waste_score(o, infos), rng)
    if name == "most-pods":
        return lambda options, rng: _pick_best(options, lambda o: -float(len(o.pods)), rng)
    if name == "priority":
        return lambda options, rng: _pick_best(options, lambda o: -float(o.priority), rng)
    raise ValueError(f"unknown expander {name!r}; known: {', '.join(EXPANDERS)}")


@dataclass
class Autoscaler:
    """The scan loop, acting on one Simulation."""

    sim: Simulation
    model: AutoscalerModel
    _unneeded_since: dict[str, float] = field(default_factory=dict)
    _expander: ExpanderFunction | None = None

    def __post_init__(self) -> None:
        curves = {n.spec.group: n.spec.curve for n in self.sim.nodes}
        self._expander = make_expander(self.model.expander, self.sim.pod_info, curves)

    # -- one scan ---------------------------------------------------------------------------------

    def scan(self, idle: bool) -> bool:
        """One autoscaler loop at the simulation's current time. `idle`: no other event is due.
        Returns whether another scan is worth scheduling."""
        scaled_up = self._scale_up()
        self._scale_down()
        if not idle or scaled_up:
            return True
        # Nothing else will happen unless a pod still runs, a node still boots, or a node could
        # still be scaled down: otherwise the Pending pods fit no group and never will.
        return any(n.running or n.state != "off" and not n.spec.always_on for n in self.sim.nodes)

    # -- scale-up ---------------------------------------------------------------------------------

    def _unserved(self) -> list[tuple[int, PodInfo]]:
        """Pending pods that would not fit on the nodes already booting (first-fit)."""
        sim = self.sim
        daemon_requests, daemons = sim.daemon_requests, len(sim.daemonsets)
        upcoming = [
            _Bin(daemon_requests, daemons) for n in sim.nodes if n.state == "booting"
        ]
        templates = [n.info for n in sim.nodes if n.state == "booting"]
        unserved = []
        for index in sim.waiting:
            info = sim.pod_info(index)
            for b, template in zip(upcoming, templates, strict=True):
                if _fits(info, template, b.requested, b.pods, daemons):
                    b.requested = b.requested + info.requests
                    b.pods += 1
                    break
            else:
                unserved.append((index, info))
        return unserved

    def options(self) -> list[ScaleUpOption]:
        """One option per node group with powered-off nodes that would serve Pending pods."""
        pending = self._unserved()
        if not pending:
            return []
        sim = self.sim
        groups: dict[str, list[_Node]] = {}
        for n in sim.nodes:
            if n.state == "off":
                groups.setdefault(n.spec.group, []).append(n)
        options = []
        for group, off in groups.items():
            template = off[0].info
            count, pods = binpack(
                pending, template, sim.daemon_requests, len(sim.daemonsets), len(off)
            )
            if count:
                options.append(ScaleUpOption(group, count, pods, template, off[0].spec.priority))
        return options

    def _scale_up(self) -> bool:
        options = self.options()
        if not options:
            return False
        assert self._expander is not None
        chosen = self._expander(options, self.sim.rng)
        off = [n for n in self.sim.nodes if n.state == "off" and n.spec.group == chosen.group]
        for node in off[: chosen.node_count]:
            self.sim.boot(node, self.model.boot_seconds, self.model.boot_joules)
        self.sim.scale_ups += 1
        return True

    # -- scale-down -------------------------------------------------------------------------------

    def _powered(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.sim.nodes:
            if n.state != "off":
                counts[n.spec.group] = counts.get(n.spec.group, 0) + 1
        return counts

    def _scale_down(self) -> None:
        sim, now = self.sim, self.sim.now
        powered = self._powered()
        drained = False
        for node in sim.nodes:
            name = node.spec.name
            if node.state != "on" or powered[node.spec.group] <= node.spec.min_count:
                self._unneeded_since.pop(name, None)
                continue
            if node.empty:
                since = node.empty_since_s
            elif self._underutilized_and_movable(node):
                since = self._unneeded_since.setdefault(name, now)
            else:
                self._unneeded_since.pop(name, None)
                continue
            if now - since < self.model.scale_down_unneeded_s:
                continue
            if not node.empty:
                if drained:
                    continue  # one non-empty node per scan
                drained = True
                sim.drain(node)
            else:
                sim.power_down(node)
            self._unneeded_since.pop(name, None)
            powered[node.spec.group] -= 1
            sim.scale_downs += 1

    def _underutilized_and_movable(self, node: _Node) -> bool:
        threshold = self.model.utilization_threshold
        if threshold is None:
            return False
        alloc = node.info.allocatable
        shares = [
            node.requested.cpu_millicores / alloc.cpu_millicores if alloc.cpu_millicores else 0.0,
            node.requested.memory_bytes / alloc.memory_bytes if alloc.memory_bytes else 0.0,
        ]
        if max(shares) >= threshold:
            return False
        # Every pod must fit on the other ready nodes, placed one after another (first-fit).
        others = [
            (n.info, _Bin(n.requested, len(n.running) + n.daemon_pods), n.daemon_pods)
            for n in self.sim.nodes
            if n.state == "on" and n is not node
        ]
        for index in node.running:
            info = self.sim.pod_info(index)
            for template, b, daemons in others:
                if _fits(info, template, b.requested, b.pods, daemons):
                    b.requested = b.requested + info.requests
                    b.pods += 1
                    break
            else:
                return False
        return True
