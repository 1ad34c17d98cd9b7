"""A run that happened elsewhere — the benchmark on a real control plane (rl/evaluation/on_cluster.py)
— turned into the simulator's result: each pod's recorded life (where it ran, from when to
when) through the simulator's own power model and energy ledger (rl/simulation/engine/energy.py:
`ready_node_power`, `EnergyLedger`), so the energy of a recorded run and of a simulated one are
one formula.

The cluster is static (the simulator without `autoscaler` or `power_off`): every node is on and
ready with its DaemonSet pods from 0 to the end. A pod adds its trace `cpu_usage` to its node
from its start to its end; the end is what was recorded (on the cluster a pod runs exactly its
duration, there is no contention to stretch it). The run ends when the last recorded pod ends
(as a simulation ends when its last pod finishes), or at `end_s` when given (a partial run: pods
still running then are counted up to it and are not outcomes)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rl.simulation.engine.energy import EnergyLedger, ready_node_power, total_split
from rl.simulation.engine.node import SimNode
from rl.simulation.engine.simrecords import PodOutcome, SimResult
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec


@dataclass(frozen=True)
class PodLife:
    """One trace pod as the cluster lived it, in trace seconds (the replay's clock × speedup)."""

    index: int  # the pod's row in the trace
    node: str | None = None  # None: never bound
    start_s: float | None = None  # bound and running
    end_s: float | None = None  # ended (Succeeded); None: still running when the record stopped


def recorded_result(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    lives: Sequence[PodLife],
    daemonsets: Sequence[DaemonSetSpec] = (),
    waited: Collection[int] = (),
    end_s: float | None = None,
) -> SimResult:
    """The simulator's result of the recorded run (module docstring); `waited`: the pods the
    scheduler found no room for at least once. ValueError on a life that names an unknown node
    or pod, or ends before it starts."""
    by_name = {n.name: SimNode(n, n.node_info(), n.curve.as_points()) for n in nodes}
    sim_nodes = list(by_name.values())
    daemon_usage = sum(d.cpu_usage for d in daemonsets)
    events: list[tuple[float, int, int, str]] = []  # (time, +1 start / −1 end, pod, node)
    for life in lives:
        if not 0 <= life.index < len(pods):
            raise ValueError(f"recorded pod #{life.index}: not a pod of the trace")
        if life.start_s is None:
            continue
        if life.node not in by_name:
            raise ValueError(f"recorded pod #{life.index}: ran on {life.node!r}, not a node of the cluster")
        if life.end_s is not None and life.end_s < life.start_s:
            raise ValueError(f"recorded pod #{life.index}: ends at {life.end_s} before it starts at {life.start_s}")
        events.append((life.start_s, 1, life.index, life.node))
        if life.end_s is not None:
            events.append((life.end_s, -1, life.index, life.node))
    events.sort(key=lambda e: (e[0], e[1]))  # at one instant, ends before starts
    if end_s is None:
        end_s = max((life.end_s for life in lives if life.end_s is not None), default=0.0)
    ledger = EnergyLedger(record_timeline=True)
    running: dict[str, set[int]] = {name: set() for name in by_name}
    now = 0.0

    def draw(node: SimNode) -> None:
        watts, split = ready_node_power(
            node.spec.curve, node.cores, node.usage_cores, daemon_usage, bool(daemonsets),
            bool(running[node.spec.name]),
        )
        ledger.set_power(node, watts, now, sim_nodes, split, True)

    for node in sim_nodes:
        node.usage_cores = daemon_usage
        node.daemon_pods = len(daemonsets)
        draw(node)
    for t, kind, index, name in events:
        if t > end_s:
            break
        ledger.advance(t - now)
        now = t
        node = by_name[name]
        node.usage_cores += kind * pods[index].cpu_usage
        (running[name].add if kind > 0 else running[name].discard)(index)
        if not running[name]:
            node.usage_cores = daemon_usage  # no float residue on a node left with its DaemonSets
        draw(node)
    ledger.advance(end_s - now)
    for node in sim_nodes:
        ledger.settle(node, end_s)
    outcomes = [
        PodOutcome(
            index=life.index, node=life.node or "", submit_s=pods[life.index].submit_s,
            start_s=life.start_s, finish_s=life.end_s, duration_s=pods[life.index].duration_s,
            waited=life.index in waited,
        )
        for life in lives
        if life.start_s is not None and life.end_s is not None and life.end_s <= end_s
    ]
    return SimResult(
        energy_joules=ledger.energy_joules,
        end_s=end_s,
        node_energy_joules={n.spec.name: n.energy_joules for n in sim_nodes},
        outcomes=sorted(outcomes, key=lambda o: o.index),
        unschedulable=len(set(waited)),
        never_scheduled=len(pods) - len(outcomes),
        boots=0,
        timeline=list(ledger.timeline),
        energy_split_joules=total_split(sim_nodes),
        node_seconds=sum(n.powered_seconds for n in sim_nodes),
    )
