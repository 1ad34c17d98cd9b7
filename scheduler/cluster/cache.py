"""The standalone scheduler's view of the cluster: nodes, the pods placed on them (bound or
assumed), and the pods waiting for this scheduler. Plain data, fed by the watch threads.

As kube-scheduler's cache: a pod counts on its node from the moment we *assume* it (before the
binding call returns) until it is deleted or terminates (Succeeded/Failed), so two pods decided
back to back never both take the last free CPU of a node. A failed binding forgets the
assumption. Each placed pod remembers when it was placed (wall clock), so the scorer can count
the CPU requested on a node since that node's last telemetry sample: for a pod we assumed, the
time we assumed it; for a pod we saw waiting and then bound by someone else (kube-scheduler, when
the extender watches), the time the watch told us — at most a watch delay late, so the pod may
count as "since the sample" for one sample too many, never one too few; for a pod first seen
already bound, its PodScheduled condition's time (second resolution), else its creation time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from common.jsonvalue import subobject
from scheduler.cluster.kubeobjects import node_info_from_k8s, pod_info_from_k8s
from scheduler.cluster.node_events import NodeProperties, node_properties
from scheduler.cluster.node_set import NodeSet
from scheduler.cluster.node_table import (
    NodePods,
    NodeTable,
    Placed,
    Staged,
    node_state,
    placed_time,
)
from scheduler.cluster.node_workload import node_workload
from scheduler.domain.model import (
    NodeInfo,
    NodeState,
    NodeTelemetry,
    NodeWorkload,
    PodInfo,
    ShapeError,
    is_node_daemon_pod,
)
from scheduler.lifetimes.ends import pod_end
from scheduler.lifetimes.predictor import LifetimePredictor

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")


def _name(obj: Mapping[str, object]) -> str:
    """"namespace/name" (or the name of a cluster-scoped object), for messages."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "?"
    namespace, name = meta.get("namespace"), str(meta.get("name"))
    return f"{namespace}/{name}" if namespace else name


class ClusterCache:
    """Thread-safe. Pod keys are "namespace/name". `scheduler_name` None: no pod is waiting
    for us (the extender's view: it only counts what others bind). `lifetimes`: told the
    lifetime of every placed pod that ends (scheduler/lifetimes)."""

    def __init__(
        self,
        scheduler_name: str | None,
        clock: Callable[[], float] = time.time,
        lifetimes: LifetimePredictor | None = None,
    ) -> None:
        self.scheduler_name = scheduler_name
        self.lifetimes = lifetimes
        self._clock = clock  # wall clock, as telemetry sample times are
        self._lock = threading.RLock()
        self._nodes = NodeSet()  # updated in place; the layout moves when nodes come or go
        self._placed: dict[str, Placed] = {}
        self._pods = NodePods()  # per node: the placed pods and their sums
        self._pending: dict[str, PodInfo] = {}
        self._unbound: dict[str, str] = {}  # key → uid of pods last seen without a node
        self._generation = 0  # bumped by every change that could make a pod fit somewhere
        self._table: NodeTable | None = None
        self._telemetry_token: object = None
        self._staged: Staged | None = None  # a table built off the lock for new telemetry

    # -- reading --

    @property
    def generation(self) -> int:
        return self._generation

    def node_names(self) -> list[str]:
        with self._lock:
            return list(self._nodes.infos)

    def has_node(self, name: str) -> bool:
        with self._lock:
            return name in self._nodes.infos

    def pending(self, key: str) -> PodInfo | None:
        with self._lock:
            return self._pending.get(key)

    def pending_keys(self) -> list[str]:
        with self._lock:
            return list(self._pending)

    def placement(self, key: str) -> tuple[str, bool] | None:
        """(node, assumed) for a placed pod, None otherwise."""
        with self._lock:
            placed = self._placed.get(key)
            return (placed.node, placed.assumed) if placed is not None else None

    def workload(self, node: str) -> NodeWorkload:
        """The node's workload for feature schemas v2 and v3 (`node_workload()`), now."""
        now = self._clock()
        with self._lock:
            pods = [
                p for p in self._pods.by_node.get(node, {}).values()
                if not is_node_daemon_pod(p.info)
            ]
            info = self._nodes.infos.get(node)
            last_up = self._nodes.newest_ready()
        return node_workload(info, pods, now, self.lifetimes, last_up)

    def node_marks(self, nodes: Sequence[str]) -> list[int]:
        """Per node, a number that changes whenever its pods do (placed, assumed or removed) or
        its spec does (updated in place)."""
        with self._lock:
            changed = self._pods.changed_at
            return [changed.get(node, 0) for node in nodes]

    def node_pods(self, node: str) -> tuple[int, list[tuple[PodInfo, float]]]:
        """(a mark that changes whenever the node's pods do, its pods other than DaemonSet and
        mirror pods with their placement times): the energy plugin's outlook reads these."""
        with self._lock:
            pods = [
                (p.info, p.placed_at)
                for p in self._pods.by_node.get(node, {}).values()
                if not is_node_daemon_pod(p.info)
            ]
            return self._pods.changed_at.get(node, 0), pods

    def pods_on(self, node: str) -> list[str]:
        with self._lock:
            return sorted(self._pods.by_node.get(node, {}))

    def node_states(
        self, telemetry: Callable[[str], NodeTelemetry | None] | None = None
    ) -> list[NodeState]:
        """Every node as the filters and scorers see it, with bound + assumed requests."""
        return list(self.table(telemetry).states)

    def table(
        self,
        telemetry: Callable[[str], NodeTelemetry | None] | None = None,
        token: object = None,
    ) -> NodeTable:
        """The node table, brought up to date. `token` identifies the telemetry view (the
        TelemetryStore's snapshot object): while it is the same object, telemetry is not
        re-read for nodes whose pods did not change. Rows are rewritten only here (the watch
        threads just mark nodes dirty); readers compare `row_version` to see what changed. A
        table staged for this `token` (`stage()`) is adopted instead of re-reading every row:
        only the nodes changed since it was staged are read again."""
        with self._lock:
            staged = self._staged
            if staged is not None and staged.layout != self._nodes.layout:
                staged = self._staged = None  # nodes came, went or changed: staged for naught
            if (
                staged is not None and token is not None and staged.token is token
                and token is not self._telemetry_token
            ):
                self._staged = None
                return self._adopt(staged, telemetry)
            table = self._table
            rebuilt = table is None or table.layout_version != self._nodes.layout
            check: Iterable[int]
            if table is None or rebuilt:
                table = self._table = NodeTable(self._nodes.infos.values(), self._nodes.layout)
                check = range(len(table))
            elif token is None or token is not self._telemetry_token:
                check = range(len(table))
            else:
                check = [table.index[n] for n in self._pods.dirty if n in table.index]
            self._telemetry_token = token
            dirty = self._pods.dirty
            self._pods.dirty = set()
            for row in check:
                name = table.names[row]
                t = telemetry(name) if telemetry is not None else None
                current = table.states[row]
                if not rebuilt and name not in dirty and current.telemetry is t:
                    continue
                table.set_row(row, self._pods.state(self._nodes.infos[name], t))
            return table

    def stage(
        self, telemetry: Callable[[str], NodeTelemetry | None], token: object
    ) -> Staged:
        """A whole new table for telemetry view `token`, built outside the lock from a copy of
        the cache's per-node pods (a background thread does this after each telemetry refresh;
        `offer()` makes it the one `table()` adopts)."""
        with self._lock:
            layout, change = self._nodes.layout, self._pods.changes
            infos = list(self._nodes.infos.values())
            inputs = self._pods.inputs()
        table = NodeTable(infos, layout)
        for row, info in enumerate(infos):
            placed, requested, nonzero, daemons = inputs.get(info.name, ((), None, None, 0))
            table.set_row(row, node_state(info, telemetry(info.name), placed, requested, nonzero, daemons))
        return Staged(table, token, layout, change)

    def offer(self, staged: Staged) -> None:
        """Let the next `table()` for the staged telemetry adopt `staged`."""
        with self._lock:
            if staged.layout == self._nodes.layout:
                self._staged = staged

    def _adopt(self, staged: Staged, telemetry: Callable[[str], NodeTelemetry | None] | None) -> NodeTable:
        table = staged.table
        for name, at in self._pods.changed_at.items():
            row = table.index.get(name) if at > staged.change else None
            if row is not None:
                t = telemetry(name) if telemetry is not None else None
                table.set_row(row, self._pods.state(self._nodes.infos[name], t))
        self._table = table
        self._telemetry_token = staged.token
        self._pods.dirty = set()  # earlier changes are in the staged rows, later ones read again above
        return table

    # -- nodes --

    def replace_nodes(self, nodes: Iterable[Mapping[str, object]]) -> None:
        """A full listing: nodes absent from it are gone (and so is one that cannot be read).
        The same nodes in the same order are updated in place, as `upsert_node` does."""
        with self._lock:
            fresh: dict[str, tuple[NodeInfo, NodeProperties]] = {}
            for obj in nodes:
                info = self._node_info(obj)
                if info is not None:
                    fresh[info.name] = (info, node_properties(obj))
            renewed, moves = self._nodes.replace(fresh)
            for name in renewed:
                self._pods.renewed(name)  # its row is rewritten by the next table()
            if moves:
                self._generation += 1

    @staticmethod
    def _node_info(obj: Mapping[str, object]) -> NodeInfo | None:
        try:
            return node_info_from_k8s(obj)
        except ShapeError as exc:  # one unreadable object must not stop the whole cache
            log.warning("ignoring node %s: %s", _name(obj), exc)
            return None

    def upsert_node(self, obj: Mapping[str, object]) -> bool:
        """Returns True when the node changed in a way that can make a waiting pod fit (a new
        node, or an update kube-scheduler finds events in: scheduler/cluster/node_set.py); only
        then does the generation move. A known node is updated in place (its row, not the
        table). A node that cannot be read is dropped (nothing can be placed on it)."""
        info = self._node_info(obj)
        if info is None:
            with self._lock:
                known = _name(obj) in self._nodes.infos
                self.delete_node(_name(obj))
            return known
        props = node_properties(obj)
        with self._lock:
            renewed, moves = self._nodes.upsert(info, props)
            if renewed:
                self._pods.renewed(info.name)  # its row is rewritten by the next table()
            if moves:
                self._generation += 1
            return moves

    def delete_node(self, name: str) -> None:
        with self._lock:
            if self._nodes.delete(name):
                self._generation += 1

    # -- pods --

    def replace_pods(self, pods: Iterable[Mapping[str, object]]) -> list[str]:
        """A full listing. Assumed pods not yet seen bound are kept. Returns pending keys."""
        with self._lock:
            seen: set[str] = set()
            for obj in pods:
                key = self._upsert_pod_locked(obj)
                if key is not None:
                    seen.add(key)
            for key in [k for k, p in self._placed.items() if not p.assumed and k not in seen]:
                self._remove_placed(key)
            for key in [k for k in self._pending if k not in seen]:
                del self._pending[key]
            for key in [k for k in self._unbound if k not in seen]:
                del self._unbound[key]
            self._generation += 1
            return list(self._pending)

    def upsert_pod(self, obj: Mapping[str, object]) -> str | None:
        """Apply a pod from the API. Returns its key if it is (still) waiting for us."""
        with self._lock:
            key = self._upsert_pod_locked(obj)
            return key if key is not None and key in self._pending else None

    def _upsert_pod_locked(self, obj: Mapping[str, object]) -> str | None:
        try:
            info = pod_info_from_k8s(obj)
        except ShapeError as exc:  # one unreadable pod must not stop the whole cache
            log.warning("ignoring pod %s: %s", _name(obj), exc)
            return None
        key = info.key
        deleting = bool(subobject(obj, "metadata").get("deletionTimestamp"))
        if info.phase in TERMINAL_PHASES:
            self._ended(key, info.uid, obj)
            self._forget_pod_locked(key)
            return None
        if info.node_name:
            self._pending.pop(key, None)
            seen_waiting = self._unbound.pop(key, None) == info.uid
            placed = self._placed.get(key)
            if placed is not None and placed.node == info.node_name and placed.info.uid == info.uid:
                if placed.assumed:  # the binding we made is now visible: confirmed
                    placed.assumed = False
                return key
            if placed is not None:
                at = placed.placed_at
            elif seen_waiting:  # bound since we last saw it: now is an upper bound
                at = max(placed_time(obj), self._clock())
            else:
                at = placed_time(obj)
            self._place(key, info, info.node_name, at, assumed=False)
            return key
        # Not bound (yet): waiting for a scheduler.
        if not deleting:
            self._unbound[key] = info.uid
        if (
            key in self._placed
            and self._placed[key].assumed
            and self._placed[key].info.uid == info.uid
        ):
            return key  # we assumed it; the watch has not caught up with our binding
        if key in self._placed:
            self._remove_placed(key)
        if self.scheduler_name is not None and info.scheduler_name == self.scheduler_name and not deleting:
            self._pending[key] = info
        else:
            self._pending.pop(key, None)
        return key

    def delete_pod(self, obj: Mapping[str, object]) -> None:
        meta = subobject(obj, "metadata")
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
        with self._lock:
            self._ended(key, str(meta.get("uid") or ""), obj)
            self._forget_pod_locked(key)

    def _ended(self, key: str, uid: str, obj: Mapping[str, object]) -> None:
        """A placed pod ended: its lifetime (placement to end) goes to the predictor."""
        placed = self._placed.get(key)
        if self.lifetimes is None or placed is None or (uid and placed.info.uid != uid):
            return
        end, disrupted = pod_end(obj, self._clock())
        self.lifetimes.observe_end(placed.info, end - placed.placed_at, disrupted)

    def _forget_pod_locked(self, key: str) -> None:
        self._pending.pop(key, None)
        self._unbound.pop(key, None)
        if key in self._placed:
            self._remove_placed(key)

    # -- assumption --

    def assume(self, pod: PodInfo, node: str, now: float) -> None:
        with self._lock:
            self._pending.pop(pod.key, None)
            self._place(pod.key, pod, node, now, assumed=True)

    def forget(self, pod: PodInfo) -> None:
        """Undo an assumption (the binding failed); the pod waits again."""
        with self._lock:
            placed = self._placed.get(pod.key)
            if placed is not None and placed.assumed:
                self._remove_placed(pod.key)
                self._pending[pod.key] = pod

    # -- bookkeeping --

    def _place(self, key: str, info: PodInfo, node: str, at: float, assumed: bool) -> None:
        if key in self._placed:
            self._remove_placed(key)
        placed = self._placed[key] = Placed(info, node, at, assumed)
        self._pods.add(key, placed)

    def _remove_placed(self, key: str) -> None:
        self._pods.remove(key, self._placed.pop(key))
        self._generation += 1  # freed resources: unschedulable pods may fit now
