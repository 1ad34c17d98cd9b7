"""cluster-autoscaler's scale-down as it ships: which nodes are unneeded, when they may go, how they
are emptied. One `ScaleDown` per simulation, run at every autoscaler scan (rl/simulation/autoscaler/scan.py).

Sources: kubernetes/autoscaler at CA_COMMIT (f7bb0c3623750695e1bb7f9f52269590f2974cbf, the last
commit with the core packages in that repository, 2026-07-20; paths under cluster-autoscaler/),
and FAQ.md ("How does scale-down work?") at 55c37cd5eb550756c5ccc5a89e9068d77797e575:

1. Defaults — config/flags/flags.go and config/const.go: --scale-down-utilization-threshold 0.5,
   --scale-down-unneeded-time 10 min, --scale-down-delay-after-add 10 min, -after-delete 0,
   -after-failure 3 min, --max-scale-down-parallelism 10, --max-drain-parallelism 1,
   --max-pod-eviction-time 2 min, --ignore-daemonsets-utilization false (rl/simulation/autoscaler/scan.py).
2. Candidates — processors/nodes/pre_filtering_processor.go: the ready nodes of groups above
   their minimum size; builder/autoscaler.go sorts them empty first (emptycandidates), then those
   unneeded in the previous loop (previouscandidates); otherwise node order (ours: file order).
3. Utilization — simulator/utilization/info.go `Calculate`: per resource the requests of the
   node's pods (DaemonSet pods included unless --ignore-daemonsets-utilization, which takes them
   out of both sides) over allocatable; the node's is the larger of CPU and memory.
   core/scaledown/eligibility/eligibility.go: underutilized when at or below the threshold
   (`Utilization > threshold` → NotUnderutilized).
4. Removal simulation — core/scaledown/planner/planner.go `categorizeNodes`, simulator/cluster.go
   `SimulateNodeRemoval`: for each underutilized candidate in order, its pods to move
   (simulator/drain.go `GetPodsToMove`: all but DaemonSet pods) pass the drainability rules
   (rl/simulation/engine/workloads.py) against the PDB room the nodes already chosen left (core/scaledown/pdb/
   basic.go `RemovePods` decrements it), and must fit, by the scheduler's filters, on the other
   ready nodes not themselves chosen; a success stays in the snapshot for the next node
   (`NewRemovalSimulator(…, true)`: persistSuccessfulSimulations). We place first-fit in node
   order (CA tries a hinted node first, then the others). A node whose PDBs allow fewer
   evictions than it has pods of their workloads is risky (`CanRemovePods` → inParallel false)
   and goes after the others (planner.go `sortByRisk`).
   Recheck — planner.go `categorizeNodes` (`AddTimeout(unremovable, latestUpdate +
   UnremovableNodeRecheckTimeout)`), core/scaledown/unremovable/nodes.go (`Update` keeps a
   timeout while it is after now), core/scaledown/eligibility/eligibility.go (`IsRecent` →
   RecentlyUnremovable, checked before utilization): a node the removal simulation refused — a
   PDB without room, a pod the rules block, pods with nowhere to go — is not considered again
   until --unremovable-node-recheck-timeout (5 min, config/flags/flags.go) has passed, so a
   PDB's short block costs it that long and a fresh unneeded time (5).
5. Unneeded time — core/scaledown/unneeded/nodes.go: a node is unneeded since the first loop that
   found it removable (kept while it stays removable, dropped when it does not); it may go once
   `since + unneeded-time` is strictly before now, and only while its group keeps more than its
   minimum size after the deletions in progress (`verifyMinSize`).
6. Cool-downs — core/static_autoscaler.go `isScaleDownInCooldown`: no deletion starts while
   lastScaleUp + delay-after-add, lastScaleDownFail + delay-after-failure or lastScaleDownDelete +
   delay-after-delete is after now, nor in a loop that waits for new pods
   (`DisableScaleDownForLoop`, rl/simulation/autoscaler/trigger.py). A loop that scaled up still
   runs the planner (RunOnce calls scaleDown after the scale-up), so unneeded time accrues during
   a cool-down.
7. Budgets — core/scaledown/budgets/budgets.go `CropNodes`: at most max-scale-down-parallelism
   deletions (empty and drained) in progress, of them at most max-drain-parallelism drains;
   empty nodes are taken first.
8. Drain — core/scaledown/actuation/drain.go: the node is tainted (no new pods) and each pod to
   move is evicted through the eviction API, which refuses a pod whose PDB has no room; refusals
   are retried every DefaultEvictionRetryTime (10 s; here at the scans) while before
   --max-pod-eviction-time, after which the drain fails and the node is untainted and stays.
   The node is deleted when its pods are gone; an empty node at once.
9. Soft taint — rl/simulation/autoscaler/softtaint.py: after each loop's planner (and deletions)
   the unneeded nodes carry DeletionCandidateOfClusterAutoscaler (PreferNoSchedule), the others
   not, and the scheduler places new pods elsewhere while another node fits them.

Simplifications: a deletion takes no time (no node-delete-delay-after-taint, pods terminate at
once); the deletions a loop started still count as in progress for the loops at the same instant
(the loops right after a productive one, rl/simulation/autoscaler/trigger.py), as the real ones,
which take at least --node-delete-delay-after-taint (5 s), are for the loops right after. CA
sets lastScaleDownFailTime only when starting a deletion fails synchronously (a taint or
cloud-provider error, core/static_autoscaler.go); a drain that times out fails asynchronously
and starts no cool-down. Nothing in the simulator fails synchronously, so -after-failure is
honoured but never starts. Not modelled: the cap on unneeded candidates (`unneededNodesLimit`,
far above our clusters), unready nodes, atomic node groups, and recently evicted pods injected
into the planner's snapshot.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from rl.simulation.autoscaler.softtaint import update_soft_taints
from rl.simulation.engine.node import OFF, ON, ClusterAPI
from rl.simulation.engine.workloads import blocking_reason, is_daemonset_pod
from scheduler.domain.filters import filter_nodes
from scheduler.domain.model import NodeInfo, NodeState, PodInfo, Resources

if TYPE_CHECKING:
    from rl.simulation.autoscaler.model import AutoscalerModel
    from rl.simulation.engine.node import SimNode

CA_COMMIT = "f7bb0c3623750695e1bb7f9f52269590f2974cbf"
T = TypeVar("T")


def fits(info: PodInfo, template: NodeInfo, requested: Resources, pods: int, daemons: int) -> bool:
    """The scheduler's filters say `info` fits a node with this allocatable and these requests."""
    state = NodeState(info=template, requested=requested, pod_count=pods, daemon_pod_count=daemons)
    return bool(filter_nodes(info, [state]).feasible)


def node_utilization(
    requested: Resources, allocatable: Resources, daemons: Resources, ignore_daemonsets: bool
) -> float:
    """cluster-autoscaler's node utilization (module docstring, 3): the larger of CPU and memory
    requests over allocatable; infinite when a share cannot be computed (CA: unremovable)."""
    shares = []
    for used, total, daemon in (
        (requested.cpu_millicores, allocatable.cpu_millicores, daemons.cpu_millicores),
        (requested.memory_bytes, allocatable.memory_bytes, daemons.memory_bytes),
    ):
        if ignore_daemonsets:
            used, total = used - daemon, total - daemon
        shares.append(used / total if total > 0 else math.inf)
    cpu, memory = shares
    return cpu if cpu > memory else memory


def crop_to_budgets(
    empty: Sequence[T],
    drain: Sequence[T],
    empty_in_progress: int,
    drain_in_progress: int,
    max_parallelism: int,
    max_drain_parallelism: int,
) -> tuple[list[T], list[T]]:
    """The deletions that may start now (module docstring, 7; budgets.go `CropNodes` for
    groups that are not atomic): empty nodes first, within the overall budget, then drains
    within what is left of it and of the drain budget."""
    parallelism = max_parallelism - empty_in_progress - drain_in_progress
    drain_budget = max_drain_parallelism - drain_in_progress
    taken_empty = list(empty[: max(0, parallelism)])
    drain_budget = min(parallelism - len(taken_empty), drain_budget)
    return taken_empty, list(drain[: max(0, drain_budget)])


def within_min_sizes(
    nodes: Sequence[tuple[str, int]], sizes: Mapping[str, int], deleting: Mapping[str, int]
) -> list[bool]:
    """For nodes in order, (group, its minimum size) each: may it go without its group falling
    to its minimum, counting deletions in progress and the nodes before it (module docstring, 5;
    unneeded/nodes.go `verifyMinSize`)."""
    left = dict(sizes)
    allowed = []
    for group, minimum in nodes:
        ok = left.get(group, 0) - deleting.get(group, 0) > minimum
        if ok:
            left[group] -= 1
        allowed.append(ok)
    return allowed


def still_unremovable(until: Mapping[str, float], present: Container[str], now: float) -> dict[str, float]:
    """The refused nodes not to consider yet (module docstring, 4, Recheck;
    core/scaledown/unremovable/nodes.go `Update`): those still in the cluster whose recheck time
    is after `now`."""
    return {name: at for name, at in until.items() if name in present and at > now}


@dataclass(frozen=True)
class Removable:
    """A node the planner found removable: its pods to move, and whether its PDBs let them go
    at once."""

    node: SimNode
    pods: tuple[int, ...]
    risky: bool


class ScaleDown:
    """The planner and the actuation of one simulation's autoscaler."""

    def __init__(self, sim: ClusterAPI, model: AutoscalerModel) -> None:
        self.sim = sim
        self.model = model
        self.unneeded_since: dict[str, float] = {}
        self.unremovable_until: dict[str, float] = {}  # refused by the removal simulation (4)
        self.removable: list[Removable] = []
        self.draining: dict[str, float] = {}  # node → when its drain started
        self.failed_drains = 0
        self.last_scale_up_s = self.last_delete_s = self.last_failure_s = -math.inf
        # Deletions started at `last_delete_s` (empty, drained): in progress for the loops at
        # that instant (module docstring, Simplifications).
        self._started = (0, 0)

    def scan(self, scaled_up: bool, deletions: bool = True) -> bool:
        """The loop's scale-down: drains go on, the planner runs, and unless in a cool-down (or
        `deletions` is off: the loop waits for new pods, rl/simulation/autoscaler/trigger.py)
        deletions start; then the unneeded nodes are soft-tainted (softtaint.py). Whether a
        deletion started (CA's `ScaleDownNodeDeleteStarted`)."""
        now = self.sim.now
        if scaled_up:
            self.last_scale_up_s = now
        self._continue_drains(now)
        self._plan(now)
        started = deletions and not self.in_cooldown(now) and self._actuate(now)
        update_soft_taints(self.sim, self.unneeded_since, self.model.max_bulk_soft_taint_count)
        return started

    def in_cooldown(self, now: float) -> bool:
        m = self.model
        return (
            self.last_scale_up_s + m.delay_after_add_s > now
            or self.last_failure_s + m.delay_after_failure_s > now
            or self.last_delete_s + m.delay_after_delete_s > now
        )

    # -- the planner --------------------------------------------------------------------------

    def pods_to_move(self, node: SimNode) -> tuple[int, ...]:
        return tuple(sorted(i for i in node.running if not is_daemonset_pod(self.sim.pods[i])))

    def utilization(self, node: SimNode) -> float:
        sim = self.sim
        daemons = sim.daemon_requests if node.daemon_pods else Resources()
        for index in node.running:
            if is_daemonset_pod(sim.pods[index]):
                daemons = daemons + sim.pod_info(index).requests
        return node_utilization(
            node.requested, node.info.allocatable, daemons, self.model.ignore_daemonsets_utilization
        )

    def _eligible(self, node: SimNode, pods: tuple[int, ...]) -> bool:
        threshold = self.model.utilization_threshold
        if threshold is None:  # the ablation: only empty nodes are unneeded
            return not pods
        return self.utilization(node) <= threshold

    def _group_sizes(self) -> Counter[str]:
        return Counter(n.spec.group for n in self.sim.nodes if n.state != OFF)

    def _plan(self, now: float) -> None:
        sim = self.sim
        ready = [n for n in sim.nodes if n.state == ON and not n.deleting]
        sizes = self._group_sizes()
        moving = {n.spec.name: self.pods_to_move(n) for n in ready}
        self.unremovable_until = still_unremovable(
            self.unremovable_until, {n.spec.name for n in sim.nodes if n.state != OFF}, now
        )
        candidates = [
            n for n in ready
            if sizes[n.spec.group] > n.spec.min_count and n.spec.name not in self.unremovable_until
        ]
        candidates.sort(
            key=lambda n: (bool(moving[n.spec.name]), n.spec.name not in self.unneeded_since)
        )
        snapshot = {n.spec.name: (n.requested, len(n.running) + n.daemon_pods) for n in ready}
        budgets: dict[str, int] = {}  # PDB room left in this pass, by workload
        chosen: set[str] = set()
        found: list[Removable] = []
        for node in candidates:
            pods = moving[node.spec.name]
            if not self._eligible(node, pods):
                continue
            if self._blocked(pods, budgets) or not self._place(pods, node, ready, snapshot, chosen):
                self.unremovable_until[node.spec.name] = now + self.model.unremovable_recheck_s
                continue
            counts = Counter(w for i in pods if (w := sim.pods[i].workload) in budgets)
            risky = any(budgets[w] < c for w, c in counts.items())
            for workload, count in counts.items():
                budgets[workload] -= count
            chosen.add(node.spec.name)
            found.append(Removable(node, pods, risky))
        self.unneeded_since = {
            r.node.spec.name: self.unneeded_since.get(r.node.spec.name, now) for r in found
        }
        self.removable = found

    def _blocked(self, pods: Sequence[int], budgets: dict[str, int]) -> bool:
        for index in pods:
            pod = self.sim.pods[index]
            room = None
            if pod.workload is not None and self.sim.ledger.has_pdb(pod):
                if pod.workload not in budgets:
                    budgets[pod.workload] = self.sim.pdb_room(pod.workload) or 0
                room = budgets[pod.workload]
            if blocking_reason(pod, room) is not None:
                return True
        return False

    def _place(
        self,
        pods: Sequence[int],
        node: SimNode,
        ready: Sequence[SimNode],
        snapshot: dict[str, tuple[Resources, int]],
        chosen: set[str],
    ) -> bool:
        """First-fit of the pods onto the other ready nodes; kept in `snapshot` when all fit."""
        trial: dict[str, tuple[Resources, int]] = {}
        for index in pods:
            info = self.sim.pod_info(index)
            for other in ready:
                name = other.spec.name
                if other is node or name in chosen or other.tainted:
                    continue
                requested, count = trial.get(name, snapshot[name])
                if fits(info, other.info, requested, count, other.daemon_pods):
                    trial[name] = (requested + info.requests, count + 1)
                    break
            else:
                return False
        snapshot.update(trial)
        return True

    # -- actuation ----------------------------------------------------------------------------

    def _actuate(self, now: float) -> bool:
        model = self.model
        unneeded = model.scale_down_unneeded_s
        due = [
            r for r in self.removable
            if unneeded <= 0 or self.unneeded_since[r.node.spec.name] + unneeded < now
        ]
        allowed = within_min_sizes(
            [(r.node.spec.group, r.node.spec.min_count) for r in due],
            self._group_sizes(),
            Counter(self._node(name).spec.group for name in self.draining),
        )
        going = [r for r, ok in zip(due, allowed, strict=True) if ok]
        empty = [r for r in going if not r.pods]
        drain = [r for r in going if r.pods]
        drain.sort(key=lambda r: r.risky)
        empty_now, drained_now = self._started if self.last_delete_s == now else (0, 0)
        draining_now = sum(1 for started in self.draining.values() if started == now)
        empty, drain = crop_to_budgets(
            empty, drain, empty_now, len(self.draining) + drained_now - draining_now,
            model.max_scale_down_parallelism, model.max_drain_parallelism,
        )
        for r in empty:
            self._delete(r.node)
        for r in drain:
            self.draining[r.node.spec.name] = now
            r.node.deleting = True
            self._evict(r.node)
            if not self.pods_to_move(r.node):
                self._delete(r.node)
        if empty or drain:
            self._started = (empty_now + len(empty), drained_now + len(drain))
            self.last_delete_s = now
        return bool(empty or drain)

    def _evict(self, node: SimNode) -> None:
        """Ask the eviction API for each pod to move; it refuses a pod whose PDB has no room."""
        for index in self.pods_to_move(node):
            self.sim.request_eviction(node, index)

    def _continue_drains(self, now: float) -> None:
        for name, started in list(self.draining.items()):
            node = self._node(name)
            if self.pods_to_move(node) and now < started + self.model.max_pod_eviction_s:
                self._evict(node)
            if not self.pods_to_move(node):
                self._delete(node)
            elif now >= started + self.model.max_pod_eviction_s:
                node.deleting = False
                del self.draining[name]
                self.failed_drains += 1

    def _delete(self, node: SimNode) -> None:
        self.draining.pop(node.spec.name, None)
        self.sim.remove_node(node)
        self.sim.scale_downs += 1

    def _node(self, name: str) -> SimNode:
        return next(n for n in self.sim.nodes if n.spec.name == name)
