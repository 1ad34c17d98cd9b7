"""cluster-autoscaler's semantics in the simulator: scans, scale-up options, expanders; the
scale-down is rl/simulation/autoscaler/scaledown.py. The defaults are cluster-autoscaler's as it ships (sources:
kubernetes/autoscaler at f7bb0c3623750695e1bb7f9f52269590f2974cbf, cluster-autoscaler/; the
scale-down's are listed in rl/simulation/autoscaler/scaledown.py):

* When it runs: rl/simulation/autoscaler/trigger.py, cluster-autoscaler's loop trigger
  (loop/trigger.go `LoopTrigger.Wait`, `--frequent-loops-enabled` default true): a loop at t = 0;
  after a productive one (a scale-up, or a scale-down deletion started) two more at once; else the
  next after `scan_interval_s` (`--scan-interval`, config/const.go DefaultScanInterval 10 s) or
  at the first pod the scheduler finds no node for, whichever comes first. With
  `frequent_loops_enabled` off: every `scan_interval_s` (t = 0, 10, 20, …).
* No scale-up while every Pending pod to serve (below) is under `new_pod_wait_s` (2 s) old, and
  no scale-down deletion in that loop (core/static_autoscaler.go `allPodsAreNew`; trigger.py).
* Scale-up: the Pending pods (those the scheduler found no node for) that would not fit on nodes
  already starting (its "upcoming nodes") are the ones to serve. For every node group with
  powered-off nodes it estimates, from the group's template node (its allocatable with the
  DaemonSet pods already on it) and the scheduler's own filter, how many new nodes the pods need
  (first-fit in Pending order, as its binpacking estimator, at most the group's off nodes): an
  *option*. The expander picks one option, and that many nodes of the group boot. One scale-up
  per loop; the loops right after it serve what it left Pending.
* Expanders: `least-waste` (the default: config/flags/flags.go `--expander` defaults to
  expander.LeastWasteExpanderName since kubernetes/autoscaler PR #7631; before it `random`),
  `random`, `most-pods` (the most Pending pods served), `priority` (the group's `priority`; file
  order by default) and `kubejoule` (the least energy by the groups' power curves,
  scheduler/decisions/expansion.py — the same code the gRPC expander serves; the simulator knows
  every group's curve, as the expander's `node_groups:` config would). least-waste is
  expander/waste/waste.go `BestOptions`: for each option, with R the option's pods' container
  requests and C the template node's *capacity* (status.capacity, not allocatable) × the node
  count, score = (C_cpu − R_cpu) / C_cpu + (C_mem − R_mem) / C_mem (millicores, bytes; the
  DaemonSet pods are not in R); the options with the exactly lowest score survive. Ties go to a
  random pick among the tied options (the expander chain's final random fallback).
* Scale-down: rl/simulation/autoscaler/scaledown.py. The settings (`AutoscalerModel`) and `old_defaults`, the
  ablation of this project before issue 22 (the random expander, no utilization-based scale-down:
  only empty nodes, no cool-downs), are in rl/simulation/autoscaler/model.py.

Not modelled: balancing similar node groups, node-group backoff after failed boots,
max-nodes-total, and the time a loop takes (a loop here is instantaneous: the real one takes
0.1–0.6 s of wall clock, which at a replay's speedup is seconds of its trace).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from common.curves import PowerCurve
from rl.simulation.autoscaler.model import EXPANDERS, AutoscalerModel
from rl.simulation.autoscaler.scaledown import ScaleDown, fits
from rl.simulation.autoscaler.trigger import LoopTrigger, all_pods_are_new
from rl.simulation.engine.node import BOOTING, OFF, ClusterAPI
from scheduler.decisions.expansion import GroupOption, best_options
from scheduler.domain.model import APP_CONTAINER, NodeInfo, PodInfo, Resources

if TYPE_CHECKING:
    from rl.simulation.engine.node import SimNode

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
            if fits(info, template, b.requested, b.pods, daemon_pods):
                b.requested = b.requested + info.requests
                b.pods += 1
                placed.append(index)
                break
        else:
            if len(bins) < max_nodes and fits(
                info, template, daemon_requests, daemon_pods, daemon_pods
            ):
                bins.append(_Bin(daemon_requests + info.requests, daemon_pods + 1))
                placed.append(index)
    return len(bins), tuple(placed)


def least_waste_score(option: ScaleUpOption, infos: Callable[[int], PodInfo]) -> float:
    """cluster-autoscaler's least-waste score (module docstring): idle CPU plus idle memory after
    the scale-up, each as a fraction of the new nodes' capacity."""
    capacity = option.template.capacity or option.template.allocatable
    cpu = memory = 0
    for index in option.pods:
        for c in infos(index).container_resources():
            if c.kind == APP_CONTAINER:  # pod.Spec.Containers: no init containers, no overhead
                cpu += c.cpu_request_millicores or 0
                memory += c.memory_request_bytes or 0
    available_cpu = capacity.cpu_millicores * option.node_count
    available_memory = capacity.memory_bytes * option.node_count
    return (available_cpu - cpu) / available_cpu + (available_memory - memory) / available_memory


ExpanderFunction = Callable[[Sequence[ScaleUpOption], random.Random], ScaleUpOption]


def _pick_best(
    options: Sequence[ScaleUpOption], key: Callable[[ScaleUpOption], float], rng: random.Random
) -> ScaleUpOption:
    """The options with the lowest key (exactly equal keys tie, as in waste.go); a random one of
    them on a tie."""
    keys = [key(o) for o in options]
    tied = [o for o, k in zip(options, keys, strict=True) if k == min(keys)]
    return tied[0] if len(tied) == 1 else rng.choice(tied)


def kubejoule_expander(
    curves: Mapping[str, PowerCurve], infos: Callable[[int], PodInfo]
) -> ExpanderFunction:
    """The least-energy option by scheduler/decisions/expansion.py (the gRPC expander's code);
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
    """The scan loop, acting on one simulation through its public node API."""

    sim: ClusterAPI
    model: AutoscalerModel
    scale_down: ScaleDown = field(init=False)
    trigger: LoopTrigger = field(init=False)
    _expander: ExpanderFunction | None = None

    def __post_init__(self) -> None:
        curves = {n.spec.group: n.spec.curve for n in self.sim.nodes}
        self._expander = make_expander(self.model.expander, self.sim.pod_info, curves)
        self.scale_down = ScaleDown(self.sim, self.model)
        self.trigger = LoopTrigger(self.model.scan_interval_s, self.model.frequent_loops_enabled)

    @property
    def wakes_on_unschedulable(self) -> bool:
        return self.trigger.wakes_on_unschedulable

    # -- one loop ---------------------------------------------------------------------------------

    def scan(self, idle: bool) -> float | None:
        """One autoscaler loop at the simulation's current time (static_autoscaler.go `RunOnce`).
        `idle`: no other event is due. Returns the seconds until the next loop (0: at once;
        trigger.py), None when no other loop is worth running."""
        pending = self._unserved()
        waiting = all_pods_are_new(
            (self.sim.created_s(i) for i, _ in pending), self.sim.now, self.model.new_pod_wait_s
        )
        scaled_up = not waiting and self._scale_up(pending)
        deleted = self.scale_down.scan(scaled_up, deletions=not waiting)
        next_s = self.trigger.after_loop(scaled_up or deleted)
        if not idle or scaled_up or deleted or waiting or self.scale_down.draining:
            return next_s
        # Nothing else will happen unless a pod still runs, a node still boots, or a node could
        # still be scaled down: otherwise the Pending pods fit no group and never will.
        if any(n.running or n.state != OFF and not n.spec.always_on for n in self.sim.nodes):
            return next_s
        return None

    # -- scale-up ---------------------------------------------------------------------------------

    def _unserved(self) -> list[tuple[int, PodInfo]]:
        """Pending pods that would not fit on the nodes already booting (first-fit)."""
        sim = self.sim
        daemon_requests, daemons = sim.daemon_requests, len(sim.daemonsets)
        upcoming = [
            _Bin(daemon_requests, daemons) for n in sim.nodes if n.state == BOOTING
        ]
        templates = [n.info for n in sim.nodes if n.state == BOOTING]
        unserved = []
        for index in sim.waiting:
            info = sim.pod_info(index)
            for b, template in zip(upcoming, templates, strict=True):
                if fits(info, template, b.requested, b.pods, daemons):
                    b.requested = b.requested + info.requests
                    b.pods += 1
                    break
            else:
                unserved.append((index, info))
        return unserved

    def options(self, pending: list[tuple[int, PodInfo]] | None = None) -> list[ScaleUpOption]:
        """One option per node group with powered-off nodes that would serve `pending` (by
        default the Pending pods that would not fit on the nodes booting)."""
        if pending is None:
            pending = self._unserved()
        if not pending:
            return []
        sim = self.sim
        groups: dict[str, list[SimNode]] = {}
        for n in sim.nodes:
            if n.state == OFF:
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

    def _scale_up(self, pending: list[tuple[int, PodInfo]]) -> bool:
        options = self.options(pending)
        if not options:
            return False
        assert self._expander is not None
        chosen = self._expander(options, self.sim.rng)
        off = [n for n in self.sim.nodes if n.state == OFF and n.spec.group == chosen.group]
        for node in off[: chosen.node_count]:
            self.sim.boot(node, self.model.boot_seconds, self.model.boot_joules)
        self.sim.scale_ups += 1
        return True


def autoscaling(model: AutoscalerModel) -> Callable[[ClusterAPI], Autoscaler]:
    """What a `Simulation` takes to run cluster-autoscaler with `model`'s settings: it starts
    the autoscaler over the run's actions (`Simulation(…, autoscaler=autoscaling(model))`)."""
    return lambda cluster: Autoscaler(cluster, model)
