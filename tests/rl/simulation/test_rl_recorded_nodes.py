"""The energy of a recorded run whose nodes come and go (cluster-autoscaler's, rl/simulation/recorded.py
with `node_lives`) is the simulator's: an autoscaled simulation's own node and pod lives,
recorded, give back its energy, its split (boots included) and its node-hours; slots, boots and
evictions are counted as the simulator counts them; with owned pods, the replacements' lives too."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from rl.evaluation.benchmark import run_once
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.actions import ClusterActions
from rl.simulation.engine.lifecycle import NodeLifecycle
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.recorded import BootModel, NodeLife, PodLife, assign_slots, recorded_result
from rl.simulation.traces.scenario import DaemonSetSpec, PodSpec, parse_node_groups
from rl.simulation.traces.trace import PdbSpec

NODES = parse_node_groups([
    {"name": "lean", "count": 3, "cpu_cores": 4, "memory_gib": 8, "standby_watts": 3,
     "power": {"idle_watts": 40, "max_watts": 110}},
    {"name": "hot", "count": 2, "cpu_cores": 16, "memory_gib": 32, "min_count": 1,
     "power": {"idle_watts": 150, "max_watts": 400, "curve": "fan", "r": 1.4}},
])
DAEMONSETS = (DaemonSetSpec("agent", cpu_request=0.1, cpu_usage=0.05, mem_request_gib=0.1),)


def _pods() -> list[PodSpec]:
    # Two waves; usage never above a node's cores (no contention: run times are the trace's).
    waves = [(60.0 + 45.0 * i, 1.0 + (i % 3)) for i in range(14)] + [(2400.0 + 40.0 * i, 1.0 + (i % 2)) for i in range(10)]
    return [PodSpec(i, t, 500.0 + 23.0 * (i % 7), cpu, cpu, round(0.8 * cpu, 3)) for i, (t, cpu) in enumerate(waves)]


def _simulate(monkeypatch: pytest.MonkeyPatch, model: AutoscalerModel, expander: str,
              pods: list[PodSpec] | None = None,
              workloads: WorkloadModel | None = None) -> tuple[Any, list[NodeLife]]:
    """An autoscaled simulation and its nodes' lives, seen through the simulation's boot and
    power_down (what a Node watch sees on the cluster)."""
    created: dict[str, float] = {}
    lives: list[NodeLife] = []
    boot, power_down = ClusterActions.boot, NodeLifecycle.power_down

    def seen_boot(sim: Any, node: Any, seconds: float, joules: float | None) -> None:
        created[node.spec.name] = sim.state.now
        boot(sim, node, seconds, joules)

    def seen_power_down(sim: Any, node: Any) -> None:
        start = created.pop(node.spec.name, 0.0)
        lives.append(NodeLife(f"{node.spec.name}@{start}", node.spec.group, start,
                              start + model.boot_seconds if start else 0.0, sim.state.now))
        power_down(sim, node)

    monkeypatch.setattr(ClusterActions, "boot", seen_boot)
    monkeypatch.setattr(NodeLifecycle, "power_down", seen_power_down)
    cluster = ClusterModel(autoscaler=AutoscalerModel(**{**model.__dict__, "expander": expander}),
                           daemonsets=DAEMONSETS, telemetry=None,
                           workloads=workloads or WorkloadModel())
    sim = run_once(NODES, pods or _pods(), "default", 0, cluster=cluster)
    monkeypatch.undo()
    still_on = {n: t for n, t in created.items()}
    lives += [NodeLife(f"{name}@{t}", name.rsplit("-", 1)[0], t, t + model.boot_seconds) for name, t in still_on.items()]
    lives += [NodeLife(f"{n.name}@0", n.group, 0.0, 0.0) for n in NODES if n.initially_on
              and not any(life.name == f"{n.name}@0.0" or life.name == f"{n.name}@0" for life in lives)]
    return sim, lives


@pytest.mark.parametrize("expander", ["least-waste", "kubejoule"])
@pytest.mark.parametrize("boot_joules", [None, 5000.0])
def test_an_autoscaled_simulations_record_gives_back_its_energy(monkeypatch: pytest.MonkeyPatch, expander: str,
                                                                 boot_joules: float | None) -> None:
    model = AutoscalerModel(scale_down_unneeded_s=300.0, delay_after_add_s=300.0, boot_joules=boot_joules)
    sim, node_lives = _simulate(monkeypatch, model, expander)
    assert sim.boots >= 2 and sim.scale_downs >= 1  # the trace makes it scale up and down
    slots = {life.name: life.name.split("@")[0] for life in node_lives}
    pod_lives = [PodLife(o.index, next(n.name for n in node_lives if slots[n.name] == o.node and n.created_s <= o.start_s
                                       and (n.deleted_s is None or o.finish_s <= n.deleted_s)), o.start_s, o.finish_s)
                 for o in sim.outcomes]
    recorded = recorded_result(NODES, _pods(), pod_lives, DAEMONSETS, node_lives=node_lives,
                               boot=BootModel(model.boot_seconds, model.boot_joules), scale_ups=sim.scale_ups)
    assert recorded.end_s == sim.end_s
    assert recorded.energy_joules == pytest.approx(sim.energy_joules, rel=1e-9)
    assert recorded.energy_split_joules == pytest.approx(sim.energy_split_joules)
    assert recorded.energy_split_joules["boots"] > 0 and recorded.energy_split_joules["standby"] > 0
    assert recorded.node_seconds == pytest.approx(sim.node_seconds)
    assert recorded.node_energy_joules == pytest.approx(sim.node_energy_joules)
    assert (recorded.boots, recorded.scale_downs) == (sim.boots, sim.scale_downs)


def test_a_boot_costs_the_models_joules_however_long_it_took_on_the_cluster() -> None:
    pods = [PodSpec(0, 0.0, 100.0, 1.0, 1.0, 1.0)]
    fast = [NodeLife("hot-x", "hot", 10.0, 130.0, None)]
    slow = [NodeLife("hot-x", "hot", 10.0, 250.0, None)]
    lives = [PodLife(0, "hot-x", 300.0, 400.0)]
    boot = BootModel(120.0, None)
    a = recorded_result(NODES, pods, lives, node_lives=fast, boot=boot)
    b = recorded_result(NODES, pods, lives, node_lives=slow, boot=boot)
    assert a.energy_split_joules["boots"] == pytest.approx(120.0 * 400.0)  # boot seconds × full-load watts
    assert b.energy_split_joules["boots"] == pytest.approx(120.0 * 400.0)
    assert b.node_seconds - a.node_seconds == pytest.approx(0.0)  # booting or idle: on either way


def test_slots_are_the_lowest_free_node_of_the_group_and_a_group_cannot_overflow() -> None:
    lives = [NodeLife("lean-aaaaa", "lean", 10.0, 20.0, 100.0), NodeLife("lean-bbbbb", "lean", 50.0, 60.0),
             NodeLife("lean-ccccc", "lean", 150.0, 160.0), NodeLife("hot-0-run", "hot", 0.0, 0.0)]
    assert assign_slots(NODES, lives) == {"lean-aaaaa": "lean-0", "lean-bbbbb": "lean-1", "lean-ccccc": "lean-0",
                                          "hot-0-run": "hot-0"}
    crowd = [NodeLife(f"hot-{i}", "hot", 1.0) for i in range(3)]
    with pytest.raises(ValueError, match="more nodes at once than its count"):
        assign_slots(NODES, crowd)
    with pytest.raises(ValueError, match="not in the node file"):
        assign_slots(NODES, [NodeLife("x", "nowhere", 0.0)])


def test_an_evicted_pod_ends_at_its_eviction_and_is_deleted_not_an_outcome() -> None:
    pods = [PodSpec(0, 0.0, 100.0, 1.0, 1.0, 1.0), PodSpec(1, 0.0, 100.0, 1.0, 1.0, 1.0)]
    nodes = [NodeLife("lean-a", "lean", 0.0, 0.0, 60.0), NodeLife("hot-0", "hot", 0.0, 0.0)]
    lives = [PodLife(0, "lean-a", 0.0, 50.0, evicted=True), PodLife(1, "hot-0", 0.0, 100.0)]
    result = recorded_result(NODES, pods, lives, node_lives=nodes)
    assert [o.index for o in result.outcomes] == [1]
    assert (result.evictions, result.deleted_pods, result.never_scheduled, result.scale_downs) == (1, 1, 0, 1)
    # lean-0 ran pod 0 at 1 of 4 cores for 50 s, then idled 10 s, then was off (3 W standby).
    lean = result.node_energy_joules["lean-0"]
    assert lean == pytest.approx(50.0 * (40 + 70 * 0.25) + 10.0 * 40 + 40.0 * 3)


def _owned_pods() -> list[PodSpec]:
    """The two waves as workloads — ReplicaSets (replaced with the lifetime left), Jobs (started
    over) and StatefulSets — three of the first wave's pods on lean nodes living 1800 s, so
    that cluster-autoscaler drains their nodes once the hot node has room."""
    kinds = ("ReplicaSet", "Job", "StatefulSet")
    return [replace(p, duration_s=1800.0 + 23.0 * (p.index % 7) if p.index in (8, 10, 11) else p.duration_s,
                    owner_kind=kinds[p.index % 3], workload=f"{kinds[p.index % 3].lower()}-{p.index % 4}")
            for p in _pods()]


@pytest.mark.parametrize("expander", ["least-waste", "kubejoule"])
def test_a_simulations_record_with_evictions_and_replacements_gives_back_its_energy_and_disruption(
        monkeypatch: pytest.MonkeyPatch, expander: str) -> None:
    """Each start and eviction the simulation made, as the pod watch records them (an evicted
    pod's replacement is another life of its row), gives back its energy and its disruption
    counts through the simulator's own ledger."""
    starts: list[tuple[int, str, float]] = []
    evictions: dict[tuple[int, float], float] = {}
    start_pod, evict = NodeLifecycle.start_pod, ClusterActions.evict

    def seen_start(lifecycle: Any, node: Any, index: int) -> None:
        starts.append((index, node.spec.name, lifecycle.state.now))
        start_pod(lifecycle, node, index)

    def seen_evict(actions: Any, node: Any, index: int) -> str:
        evictions[(index, actions.state.start[index])] = actions.state.now
        return evict(actions, node, index)

    monkeypatch.setattr(NodeLifecycle, "start_pod", seen_start)
    monkeypatch.setattr(ClusterActions, "evict", seen_evict)
    workloads = WorkloadModel(pdbs=(PdbSpec("replicaset-0", max_unavailable=1),), pod_startup_s=30.0)
    model = AutoscalerModel(scale_down_unneeded_s=120.0, delay_after_add_s=120.0, utilization_threshold=0.7)
    sim, node_lives = _simulate(monkeypatch, model, expander, _owned_pods(), workloads)
    assert sim.evictions >= 2 and sim.restarted_pods >= 1  # the trace makes it drain nodes
    finish = {o.index: o.finish_s for o in sim.outcomes}
    slots = {life.name: life.name.split("@")[0] for life in node_lives}

    def life(index: int, slot: str, start: float) -> PodLife:
        end = evictions.get((index, start), finish.get(index))
        name = next(n.name for n in node_lives if slots[n.name] == slot and n.created_s <= start
                    and (n.deleted_s is None or start < n.deleted_s))
        return PodLife(index, name, start, end, evicted=(index, start) in evictions)

    pod_lives = [life(index, slot, start) for index, slot, start in starts]
    recorded = recorded_result(NODES, _owned_pods(), pod_lives, DAEMONSETS, node_lives=node_lives,
                               boot=BootModel(model.boot_seconds, model.boot_joules), scale_ups=sim.scale_ups,
                               workloads=workloads)
    assert recorded.end_s == sim.end_s
    assert recorded.energy_joules == pytest.approx(sim.energy_joules, rel=1e-9)
    assert recorded.node_seconds == pytest.approx(sim.node_seconds)
    assert (recorded.evictions, recorded.restarted_pods, recorded.deleted_pods, recorded.disrupted_workloads) == (
        sim.evictions, sim.restarted_pods, sim.deleted_pods, sim.disrupted_workloads)
    assert recorded.lost_cpu_seconds == pytest.approx(sim.lost_cpu_seconds)
    assert recorded.never_scheduled == sim.never_scheduled == 0
    assert [(o.index, o.node, o.start_s, o.finish_s, o.pending_s) for o in recorded.outcomes] == [
        (o.index, next(n.name for n in node_lives if slots[n.name] == o.node and n.created_s <= o.start_s
                       and (n.deleted_s is None or o.start_s < n.deleted_s)), o.start_s, o.finish_s, o.pending_s)
        for o in sim.outcomes]
