"""A run that happened elsewhere — the benchmark on a real control plane (rl/evaluation/on_cluster.py)
— turned into the simulator's result: each node's and each pod's recorded life through the
simulator's own power and boot model and energy ledger (rl/simulation/engine/energy.py:
`ready_node_power`, `split_watts`, `EnergyLedger`; rl/simulation/engine/simrecords.py:
`boot_joules_for`), so the energy of a recorded run and of a simulated one are one formula.

Nodes. Without `node_lives` the cluster is static (the simulator without `autoscaler` or
`power_off`): every node is on and ready with its DaemonSet pods from 0 to the end. With
`node_lives` (cluster-autoscaler's nodes, which come and go), each node a group ever had is put
in a *slot* — one of its group's nodes in the node file, the lowest free one, as the simulator
boots a group's first powered-off node — and the slot lives as the simulator's node: powered off
(its group's `standby_watts`) until the node is created, booting from its creation to its Ready
— a boot costs the simulator's joules (`BootModel`: `boot_joules`, else boot seconds × full-load
watts), drawn evenly over the time the boot took on the cluster — then
ready — its DaemonSet pods start, its power is its curve's — until it is deleted, then off
again. A node there at t = 0 (created before the replay started) is ready from 0, as the
simulator's `initially_on` nodes; node-hours count booting and ready time, as there.

Pods. A pod adds its trace `cpu_usage` to its node from its start to its end; the end is what
was recorded (on the cluster a pod runs exactly its duration, there is no contention to
stretch it), or its eviction (`evicted`: deleted by cluster-autoscaler's drain). A trace row
may have several lives: an evicted owned pod's replacement is another life of its row (its
startup and the lifetime it has left, or all of it again, as the simulator runs it:
rl/evaluation/owners.py), and a bare pod's eviction is its last, as the simulator's `deleted`.
The disruption counts (evictions, pods restarted or deleted, CPU-seconds lost, workloads
disrupted) are the simulator's own `PodLedger` told the recorded lives in order, and a row's
outcome is its last life's, its pending time to its first start. A pod seen running on a node whose
Ready the node watch has not shown yet makes it ready then (the two watches are separate
streams). The run ends when the last recorded pod ends (as a simulation ends when its last
pod finishes, whatever nodes are still on), or at `end_s` when given (a partial run: pods still running then are counted up to it and are not
outcomes)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rl.simulation.engine.energy import (
    BOOTS,
    STANDBY,
    EnergyLedger,
    ready_node_power,
    split_watts,
    total_split,
)
from rl.simulation.engine.node import BOOTING, OFF, ON, SimNode
from rl.simulation.engine.simrecords import PodOutcome, SimResult, boot_joules_for
from rl.simulation.engine.workloads import PodLedger, WorkloadModel
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec
from scheduler.domain.cluster_defaults import BOOT_SECONDS


@dataclass(frozen=True)
class PodLife:
    """One trace pod as the cluster lived it, in trace seconds (the replay's clock × speedup)."""

    index: int  # the pod's row in the trace
    node: str | None = None  # None: never bound
    start_s: float | None = None  # bound and running
    end_s: float | None = None  # ended (Succeeded) or evicted; None: still running when the record stopped
    evicted: bool = False  # deleted before it ended (cluster-autoscaler's drain)


@dataclass(frozen=True)
class NodeLife:
    """One node as the cluster lived it, in trace seconds: created (≤ 0: there at the start),
    Ready, deleted (None: not while recorded)."""

    name: str
    group: str
    created_s: float
    ready_s: float | None = None
    deleted_s: float | None = None


@dataclass(frozen=True)
class BootModel:
    """The simulator's boot (AutoscalerModel's boot_seconds, boot_joules)."""

    boot_seconds: float = BOOT_SECONDS
    boot_joules: float | None = None  # None: boot seconds × the node's full-load watts


# Event order at one instant: pods end, nodes go, nodes appear, nodes become ready, pods start.
_POD_END, _NODE_GONE, _NODE_NEW, _NODE_READY, _POD_START = range(5)


def assign_slots(nodes: Sequence[NodeSpec], node_lives: Sequence[NodeLife]) -> dict[str, str]:
    """Each recorded node's slot (module docstring): recorded name → the node file's name.
    ValueError when a group has more nodes at once than its count, or a node names no group."""
    slots: dict[str, list[NodeSpec]] = {}
    for spec in nodes:
        slots.setdefault(spec.group, []).append(spec)
    free_at: dict[str, float] = {spec.name: float("-inf") for spec in nodes}  # when each slot is free
    out: dict[str, str] = {}
    for life in sorted(node_lives, key=lambda n: (n.created_s, n.name)):
        if life.group not in slots:
            raise ValueError(f"recorded node {life.name}: group {life.group!r} is not in the node file")
        if life.deleted_s is not None and life.deleted_s < life.created_s:
            raise ValueError(f"recorded node {life.name}: deleted at {life.deleted_s} before it was created")
        slot = next((s for s in slots[life.group] if free_at[s.name] <= life.created_s), None)
        if slot is None:
            raise ValueError(f"recorded node {life.name}: group {life.group} has more nodes at once than its "
                             f"count ({len(slots[life.group])})")
        free_at[slot.name] = float("inf") if life.deleted_s is None else life.deleted_s
        out[life.name] = slot.name
    return out


def recorded_result(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    lives: Sequence[PodLife],
    daemonsets: Sequence[DaemonSetSpec] = (),
    waited: Collection[int] = (),
    end_s: float | None = None,
    node_lives: Sequence[NodeLife] | None = None,
    boot: BootModel = BootModel(),
    scale_ups: int = 0,
    workloads: WorkloadModel | None = None,
) -> SimResult:
    """The simulator's result of the recorded run (module docstring); `waited`: the pods the
    scheduler found no room for at least once; `scale_ups`: cluster-autoscaler's, counted by the
    caller; `workloads`: the model whose pod startup the replacements ran (None: the default's). ValueError on a life that names an unknown node or pod, or ends before it
    starts."""
    static = node_lives is None
    if node_lives is None:
        node_lives = [NodeLife(n.name, n.group, 0.0, 0.0) for n in nodes]
    slot_of = assign_slots(nodes, node_lives)
    by_name = {n.name: SimNode(n, n.node_info(), n.curve.as_points(), state=OFF) for n in nodes}
    sim_nodes = list(by_name.values())
    daemon_usage = sum(d.cpu_usage for d in daemonsets)
    events: list[tuple[float, int, int, str]] = []  # (time, kind, pod, slot)
    for life in lives:
        if not 0 <= life.index < len(pods):
            raise ValueError(f"recorded pod #{life.index}: not a pod of the trace")
        if life.start_s is None:
            continue
        if life.node not in slot_of:
            raise ValueError(f"recorded pod #{life.index}: ran on {life.node!r}, not a node of the cluster")
        if life.end_s is not None and life.end_s < life.start_s:
            raise ValueError(f"recorded pod #{life.index}: ends at {life.end_s} before it starts at {life.start_s}")
        events.append((life.start_s, _POD_START, life.index, slot_of[life.node]))
        if life.end_s is not None:
            events.append((life.end_s, _POD_END, life.index, slot_of[life.node]))
    for seen in node_lives:
        slot = slot_of[seen.name]
        if seen.created_s > 0:
            events.append((seen.created_s, _NODE_NEW, -1, slot))
        if seen.ready_s is not None:
            events.append((max(0.0, seen.ready_s) if seen.created_s > 0 else 0.0, _NODE_READY, -1, slot))
        if seen.deleted_s is not None:
            events.append((max(0.0, seen.deleted_s), _NODE_GONE, -1, slot))
    events.sort(key=lambda e: (e[0], e[1]))
    if end_s is None:
        end_s = max((life.end_s for life in lives if life.end_s is not None), default=0.0)
    # Each boot's recorded length (creation to Ready): a boot costs the model's joules, drawn
    # over the time it took on the cluster.
    booting = {(slot_of[n.name], n.created_s): n.ready_s - n.created_s for n in node_lives
               if n.created_s > 0 and n.ready_s is not None}
    boot_length: dict[str, float | None] = {}
    ledger = EnergyLedger(record_timeline=True)
    running: dict[str, set[int]] = {name: set() for name in by_name}
    now = 0.0

    def draw(node: SimNode) -> None:
        if node.state == ON:
            watts, split = ready_node_power(
                node.spec.curve, node.cores, node.usage_cores, daemon_usage, bool(daemonsets),
                bool(running[node.spec.name]),
            )
        elif node.state == BOOTING:
            joules = boot_joules_for(node.spec, boot.boot_seconds, boot.boot_joules)
            seconds = boot_length.get(node.spec.name) or boot.boot_seconds
            watts = joules / seconds if seconds > 0 else 0.0
            split = split_watts(watts, BOOTS)
        else:
            watts, split = node.spec.standby_watts, split_watts(node.spec.standby_watts, STANDBY)
        ledger.set_power(node, watts, now, sim_nodes, split, node.state != OFF)

    def make_ready(node: SimNode) -> None:
        if node.state == BOOTING and not (boot_length.get(node.spec.name) or boot.boot_seconds) > 0:
            ledger.add(node, boot_joules_for(node.spec, boot.boot_seconds, boot.boot_joules), now)
        node.state = ON
        node.usage_cores = daemon_usage
        node.daemon_pods = len(daemonsets)

    for node in sim_nodes:
        draw(node)
    for seen in node_lives:
        if seen.created_s <= 0:
            make_ready(by_name[slot_of[seen.name]])
            draw(by_name[slot_of[seen.name]])
    boots = deleted_nodes = 0
    for t, kind, index, name in events:
        if t > end_s:
            break
        ledger.advance(t - now)
        now = t
        node = by_name[name]
        if kind == _NODE_NEW:
            node.state, node.usage_cores, node.daemon_pods = BOOTING, 0.0, 0
            boot_length[name] = booting.get((name, t))
            boots += 1
        elif kind == _NODE_READY:
            if node.state == BOOTING:
                make_ready(node)
        elif kind == _NODE_GONE:
            node.state, node.usage_cores, node.daemon_pods = OFF, 0.0, 0
            running[name].clear()
            deleted_nodes += 1
        elif kind == _POD_START:
            if node.state == BOOTING:
                make_ready(node)  # running there: it is ready, whatever the node watch has shown yet
            if node.state != ON:
                continue
            node.usage_cores += pods[index].cpu_usage
            running[name].add(index)
        elif index in running[name]:
            running[name].discard(index)
            node.usage_cores -= pods[index].cpu_usage
            if not running[name]:
                node.usage_cores = daemon_usage  # no float residue on a node left with its DaemonSets
        draw(node)
    ledger.advance(end_s - now)
    for node in sim_nodes:
        ledger.settle(node, end_s)
    ledger_of_pods, outcomes = _disruptions(pods, lives, end_s, waited, workloads or WorkloadModel())
    return SimResult(
        energy_joules=ledger.energy_joules,
        end_s=end_s,
        node_energy_joules={n.spec.name: n.energy_joules for n in sim_nodes},
        outcomes=outcomes,
        unschedulable=len(set(waited)),
        never_scheduled=len(pods) - len(outcomes) - ledger_of_pods.deleted_pods,
        boots=0 if static else boots,
        timeline=list(ledger.timeline),
        energy_split_joules=total_split(sim_nodes),
        node_seconds=sum(n.powered_seconds for n in sim_nodes),
        scale_ups=scale_ups,
        scale_downs=deleted_nodes,
        evictions=ledger_of_pods.evictions,
        restarted_pods=ledger_of_pods.restarted_pods,
        deleted_pods=ledger_of_pods.deleted_pods,
        lost_cpu_seconds=ledger_of_pods.lost_cpu_seconds,
        disrupted_workloads=ledger_of_pods.disrupted_workloads,
        energy_lumps=list(ledger.lumps),
    )


def _disruptions(pods: Sequence[PodSpec], lives: Sequence[PodLife], end_s: float, waited: Collection[int],
                 model: WorkloadModel) -> tuple[PodLedger, list[PodOutcome]]:
    """The simulator's ledger told each row's lives up to `end_s`, in order, and each row's
    outcome (its last life, when it ended by then; module docstring)."""
    ledger = PodLedger(pods, model)
    rows: dict[int, list[PodLife]] = {}
    for life in lives:
        if life.start_s is not None:
            rows.setdefault(life.index, []).append(life)
    outcomes = []
    for index, row in sorted(rows.items()):
        row.sort(key=lambda life: life.start_s or 0.0)
        ledger.arrived(index)
        for life in row:
            assert life.start_s is not None
            run_s = ledger.started(index, life.start_s)
            if life.end_s is None or life.end_s > end_s:
                break
            if life.evicted:
                ledger.evicted(index, max(0.0, run_s - (life.end_s - life.start_s)))
                continue
            ledger.finished(index)
            outcomes.append(PodOutcome(
                index=index, node=life.node or "", submit_s=pods[index].submit_s, start_s=life.start_s,
                finish_s=life.end_s, duration_s=pods[index].duration_s, waited=index in waited,
                first_start_s=row[0].start_s,
            ))
    return ledger, outcomes
