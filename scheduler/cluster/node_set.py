"""The cluster cache's nodes: each node's NodeInfo by name, in the order they came (the node
table's rows), and what kube-scheduler's classification of a node update compares of each
(`node_events.NodeProperties`).

A known node's update is applied in place, as kube-scheduler's cache applies it (k8s.io/kubernetes
v1.36 pkg/scheduler/backend/cache/cache.go `UpdateNode`; its snapshot then brought up to date node
by node, `UpdateSnapshot`): the layout — bumped only when nodes come or go — stays, and the node's
row is rewritten. Whether a waiting pod may fit because of the update is kube-scheduler's answer
(pkg/scheduler/eventhandlers.go `updateNodeInCache`: the queue moves only for the events
`NodeSchedulingPropertiesChange` finds): a heartbeat, which renews only the conditions' times,
moves nothing.
"""

from __future__ import annotations

from scheduler.cluster.node_events import NodeProperties, node_scheduling_changes
from scheduler.domain.model import NodeInfo


class NodeSet:
    """Not thread-safe: the cluster cache holds its lock."""

    def __init__(self) -> None:
        self.infos: dict[str, NodeInfo] = {}
        self._props: dict[str, NodeProperties] = {}
        self.layout = 0  # bumped when nodes come or go (not when one changes: its row does)
        self._newest: tuple[int, float | None] | None = None  # layout → newest ready time

    def newest_ready(self) -> float | None:
        """The latest ready time of any node (kept while the nodes stay the same, and through
        updates in place)."""
        cached = self._newest
        if cached is None or cached[0] != self.layout:
            times = [i.ready_since for i in self.infos.values() if i.ready_since is not None]
            cached = self._newest = (self.layout, max(times) if times else None)
        return cached[1]

    def replace(self, fresh: dict[str, tuple[NodeInfo, NodeProperties]]) -> tuple[list[str], bool]:
        """A full listing. The same nodes in the same order are updated in place (`upsert`);
        otherwise a new layout. Returns (the nodes whose NodeInfo changed in place, whether a
        waiting pod may fit now)."""
        if list(fresh) != list(self.infos):  # nodes came, went or moved
            self.infos = {name: info for name, (info, _) in fresh.items()}
            self._props = {name: props for name, (_, props) in fresh.items()}
            self.layout += 1
            return [], True
        renewed, moves = [], False
        for info, props in fresh.values():
            changed, move = self.upsert(info, props)
            if changed:
                renewed.append(info.name)
            moves = moves or move
        return renewed, moves

    def upsert(self, info: NodeInfo, props: NodeProperties) -> tuple[bool, bool]:
        """A node added or updated. Returns (whether a known node's NodeInfo changed in place:
        its row must be rewritten, whether a waiting pod may fit now: a new node, or an update
        `node_scheduling_changes` finds events in)."""
        name = info.name
        old = self.infos.get(name)
        before = self._props.get(name)
        self._props[name] = props
        if old is None:
            self.infos[name] = info
            self.layout += 1
            return False, True
        changed = info != old
        if changed:
            self.infos[name] = info
            self._keep_newest_ready(old, info)
        return changed, before is None or bool(node_scheduling_changes(props, before))

    def delete(self, name: str) -> bool:
        """Whether `name` was known."""
        self._props.pop(name, None)
        if self.infos.pop(name, None) is None:
            return False
        self.layout += 1
        return True

    def _keep_newest_ready(self, old: NodeInfo, new: NodeInfo) -> None:
        cached = self._newest
        if cached is None or cached[0] != self.layout:
            return
        newest = cached[1]
        if new.ready_since is not None and (newest is None or new.ready_since >= newest):
            self._newest = (self.layout, new.ready_since)
        elif old.ready_since is not None and old.ready_since == newest:
            self._newest = None  # the newest went back: found again when next asked
