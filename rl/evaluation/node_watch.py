"""Every node's life on the cluster while a trace replays (rl/evaluation/replay.py), from a watch
of the Nodes: when each was first seen (created; a node there when the replay starts was created
at 0), first seen Ready, and deleted (its deletion seen), in the replay's trace seconds — the
`NodeLife`s whose energy rl/simulation/recorded.py counts with the simulator's boot and power
model. A node outside the node groups (no `kubejoule.io/node-group` label) is not recorded."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from common.jsonvalue import subobject
from rl.cluster.api import Api
from rl.cluster.controlplane import node_ready
from rl.cluster.kwok import GROUP_LABEL
from rl.evaluation.replay import Recording, ResourceWatch
from rl.simulation.recorded import NodeLife


@dataclass
class _Seen:
    group: str
    created_s: float
    ready_s: float | None = None
    deleted_s: float | None = None


class NodeWatch(ResourceWatch):
    """The Nodes into `lives()` (module docstring)."""

    def __init__(self, api: Api, recording: Recording, timeout_s: int) -> None:
        super().__init__(api, "/api/v1/nodes", recording, timeout_s)
        self._seen: dict[str, _Seen] = {}

    def _note(self, node: Mapping[str, object], event: str) -> None:
        metadata = subobject(node, "metadata")
        group = subobject(metadata, "labels").get(GROUP_LABEL)
        if not isinstance(group, str) or not group:
            return
        at = max(0.0, self._recording.trace_s(time.monotonic()))
        name = str(metadata.get("name", ""))
        seen = self._seen.setdefault(name, _Seen(group, 0.0 if event == "LISTED" else at))
        if seen.ready_s is None and node_ready(node):
            seen.ready_s = at
        if seen.deleted_s is None and (event == "DELETED" or metadata.get("deletionTimestamp")):
            seen.deleted_s = at

    def lives(self) -> list[NodeLife]:
        return [NodeLife(name, s.group, s.created_s, s.ready_s, s.deleted_s) for name, s in sorted(self._seen.items())]

    def alive(self) -> dict[str, int]:
        """Each group's nodes not deleted (as last seen)."""
        out: dict[str, int] = {}
        for s in list(self._seen.values()):
            if s.deleted_s is None:
                out[s.group] = out.get(s.group, 0) + 1
        return out
