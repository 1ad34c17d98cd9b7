"""cluster-autoscaler's soft taint: every loop, after the planner, the nodes it finds unneeded get
the DeletionCandidateOfClusterAutoscaler taint (PreferNoSchedule) and the others lose it, so
kube-scheduler's TaintToleration (weight 3) places new pods elsewhere while any other node fits
them, and an unneeded node stays unneeded.

Sources (kubernetes/autoscaler cluster-autoscaler 1.36.1): core/static_autoscaler.go
`scaleDown` calls `updateSoftDeletionTaints` after `UpdateClusterState` in each branch — in a
cool-down, with no candidates, and after `StartDeletion` — with the planner's `UnneededNodes()`
(planner.go: the nodes the removal simulation found removable this loop, unneeded/nodes.go
`AsList`) as taintable and every other node of the autoscaled groups as untaintable;
core/scaledown/actuation/softtaint.go `UpdateSoftDeletionTaints`: untaints first, then taints,
skipping a node with the ToBeDeleted taint (one being drained) either way, and spends at most
--max-bulk-soft-taint-count API calls (10, config/flags/flags.go; 0 turns the taint off) a loop
(`budgetTracker`; its time budget, --max-bulk-soft-taint-time, is for the process's own speed).
Nodes are taken in node order (CA's in its list's order).
"""

from __future__ import annotations

from collections.abc import Container

from rl.simulation.engine.node import ON, ClusterAPI


def update_soft_taints(sim: ClusterAPI, unneeded: Container[str], budget: int) -> None:
    """Taint the ready nodes in `unneeded` and untaint the others, at most `budget` changes
    (module docstring)."""
    if budget <= 0:
        return
    nodes = [n for n in sim.nodes if n.state == ON and not n.deleting]
    untaint = [n for n in nodes if n.deletion_candidate and n.spec.name not in unneeded]
    taint = [n for n in nodes if not n.deletion_candidate and n.spec.name in unneeded]
    for node in untaint[:budget]:
        sim.soft_taint(node, False)
    for node in taint[: max(0, budget - len(untaint))]:
        sim.soft_taint(node, True)
