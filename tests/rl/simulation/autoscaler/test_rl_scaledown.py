"""cluster-autoscaler's scale-down on hand-computed cases (rl/simulation/autoscaler/scaledown.py, rl/simulation/engine/workloads.py): the
0.5 utilization threshold, the unneeded time, delay-after-add, blocking pods, PDBs, eviction by
owner, and the parallelism budgets.

Nodes are 4 cores / 8 GiB with a linear 100–200 W curve; pods request 0.5 GiB; scans every 10 s.
A pinned policy puts each pod where the case needs it (a replacement goes to its own pin, else to
the first feasible node)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from common.curves import PowerCurve
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.autoscaler.scan import autoscaling
from rl.simulation.engine.simulator import SimResult, Simulation
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import NodeSpec, PdbSpec, PodSpec
from scheduler.domain.model import NodeState, PodInfo
from tests.helpers.sim_run import run_policy

LINEAR = PowerCurve.linear(100.0, 200.0)
# No boots in these cases but one; CA's shipped scale-down rules otherwise.
CA = AutoscalerModel(boot_seconds=120.0, boot_joules=0.0)


def node(name: str, group: str, *, cores: float = 4, min_count: int = 0, initial: int = 0,
         ordinal: int = 0) -> NodeSpec:
    return NodeSpec(name, group, cores, 8, LINEAR, ordinal=ordinal, min_count=min_count,
                    initial_count=initial)


def pod(index: int, submit: float, duration: float, *, request: float = 1.0, usage: float = 1.0,
        owner: str | None = "Job", workload: str | None = None,
        safe: bool | None = None) -> PodSpec:
    return PodSpec(index, submit, duration, request, 0.5, usage, owner_kind=owner,
                   workload=workload, safe_to_evict=safe)


class Pinned:
    """Each pod index on its pinned node while feasible, else the first feasible node."""

    name = "pinned"

    def __init__(self, pins: dict[int, str]) -> None:
        self.pins = pins
        self.placed: set[int] = set()

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        pass

    def choose(
        self, pod: PodInfo, feasible: Sequence[NodeState], now: float, candidates: Sequence[NodeState] = ()
    ) -> str:
        index = int(pod.name.split("-")[1])
        names = [s.info.name for s in feasible]
        first_time = index not in self.placed
        self.placed.add(index)
        pin = self.pins.get(index)
        return pin if first_time and pin in names else names[0]


def run(nodes, pods, pins, model=CA, pdbs=(), startup=10.0) -> tuple[Simulation, SimResult]:
    sim = Simulation(nodes, pods, autoscaler=autoscaling(model),
                     workloads=WorkloadModel(tuple(pdbs), pod_startup_s=startup))
    return sim, run_policy(sim, Pinned(pins), random.Random(0))


def two_nodes() -> list[NodeSpec]:
    # a-0 always on; b-0 on from t = 0 (initial_count 1, min 0): no scale-up, no cool-down.
    return [node("a-0", "a", min_count=1, initial=1), node("b-0", "b", initial=1)]


@pytest.mark.parametrize(("threshold", "drained"), [(0.5, True), (0.49, False)])
def test_a_node_at_the_threshold_is_drained_after_the_unneeded_time(threshold, drained):
    # b-0 runs one 2-core Job pod: CPU 2 of 4 = 0.5, memory 0.5 of 8 GiB: utilization 0.5. At or
    # below the threshold (eligibility.go: `Utilization > threshold` is NotUnderutilized) b-0 is
    # unneeded from the t = 0 scan; its pod fits on a-0. It goes at the first scan with
    # 0 + 600 s strictly before now: t = 610.
    model = AutoscalerModel(boot_seconds=0.0, utilization_threshold=threshold)
    _, result = run(two_nodes(), [pod(0, 0, 10_000, request=2)], {0: "b-0"}, model=model)
    (outcome,) = result.outcomes
    if drained:
        assert result.scale_downs == 1 and result.evictions == 1
        # The Job starts over on a-0 at 610: 10 s startup + its 10,000 s.
        assert (outcome.node, outcome.start_s, outcome.finish_s) == ("a-0", 610.0, 10_620.0)
        # b-0 at 125 W for 610 s, then off (no standby); a-0 idle until 610, 125 W after.
        assert result.node_energy_joules["b-0"] == pytest.approx(125 * 610)
        assert result.energy_joules == pytest.approx(125 * 610 + 100 * 610 + 125 * 10_010)
    else:
        assert result.scale_downs == 0 and result.evictions == 0
        assert (outcome.node, outcome.finish_s) == ("b-0", 10_000.0)


@pytest.mark.parametrize(
    ("owner", "finish", "lost_cpu_s", "restarted"),
    [
        # A Job pod starts over: 610 CPU-seconds lost, 10 s startup + 10,000 s from 610.
        ("Job", 10_620.0, 610.0, 1),
        # A ReplicaSet pod's replacement lives the rest of the lifetime: 9,390 s after startup.
        ("ReplicaSet", 10_010.0, 0.0, 0),
        ("StatefulSet", 10_010.0, 0.0, 0),
    ],
)
def test_a_job_loses_its_progress_where_a_replicaset_pod_keeps_its_lifetime(
    owner, finish, lost_cpu_s, restarted
):
    _, result = run(two_nodes(), [pod(0, 0, 10_000, request=2, owner=owner)], {0: "b-0"})
    (outcome,) = result.outcomes
    assert outcome.finish_s == pytest.approx(finish) and outcome.start_s == 610.0
    assert result.evictions == 1 and result.restarted_pods == restarted
    assert result.lost_cpu_seconds == pytest.approx(lost_cpu_s)
    assert result.disrupted_workloads == 1 and result.deleted_pods == 0
    # Slowdown counts the lost work and the wait: (finish − 0) / 10,000 − 1.
    assert outcome.slowdown == pytest.approx(finish / 10_000 - 1)
    # The replacement was Pending from the eviction (placed at once here: 0 s).
    assert outcome.first_start_s == 0.0


@pytest.mark.parametrize(
    ("owner", "safe", "evicted", "deleted"),
    [
        (None, None, False, False),  # a bare pod blocks: NotReplicated
        ("ReplicaSet", False, False, False),  # safe-to-evict "false" blocks: NotSafeToEvict
        ("CustomThing", None, False, False),  # not a kind CA knows: NotReplicated
        ("ReplicaSet", None, True, False),  # replicated: evicted, replaced
        (None, True, True, True),  # safe-to-evict "true" overrides: evicted, and gone
        ("DaemonSet", None, True, True),  # a DaemonSet pod never blocks; it goes with the node
    ],
)
def test_bare_and_not_safe_to_evict_pods_block_the_removal(owner, safe, evicted, deleted):
    # b-0 holds one 1-core pod (utilization 0.25) that would fit on a-0.
    _, result = run(two_nodes(), [pod(0, 0, 5_000, owner=owner, safe=safe)], {0: "b-0"})
    assert result.evictions == (1 if evicted else 0)
    assert result.scale_downs == (1 if evicted else 0)
    assert result.deleted_pods == (1 if deleted else 0)
    if deleted:
        # Deleted at 610 and not recreated: the run ends there, with nothing left to schedule.
        assert result.outcomes == [] and result.end_s == 610.0 and result.never_scheduled == 0
    elif not evicted:
        (outcome,) = result.outcomes
        assert (outcome.node, outcome.finish_s) == ("b-0", 5_000.0)


def web_cluster() -> tuple[list[NodeSpec], list[PodSpec], dict[int, str]]:
    # Two pods of Deployment "web", one on b-0 and one on c-0 (each 0.25 utilized); a-0 has
    # room for both.
    nodes = [node("a-0", "a", min_count=1, initial=1), node("b-0", "b", initial=2),
             node("b-1", "b", initial=2, ordinal=1)]
    pods = [pod(i, 0, 10_000, owner="ReplicaSet", workload="web") for i in range(2)]
    return nodes, pods, {0: "b-0", 1: "b-1"}


@pytest.mark.parametrize(
    ("pdbs", "startup", "recheck_s", "second_gone_at"),
    [
        # No PDB: both unneeded since 0; one drain at a time (max-drain-parallelism 1): b-0 at
        # 610, b-1 at the next scan.
        ((), 10.0, 300.0, 620.0),
        # max_unavailable 1: the planner's budget lets only b-0 be removable; b-1 is refused
        # (NotEnoughPdb) and, as cluster-autoscaler ships, not considered again for 300 s
        # (planner.go categorizeNodes AddTimeout, eligibility.go IsRecent): refused at 0, 300 and
        # 600 (b-0, still removable, holds the budget until it goes at 610); at 900 the
        # replacement (Ready at 610 + startup) has given the PDB its room back: b-1 is unneeded
        # from 900 and goes at the first scan with 900 + 600 strictly before now, 1,510.
        ((PdbSpec("web", max_unavailable=1),), 10.0, 300.0, 1_510.0),
        ((PdbSpec("web", max_unavailable=1),), 100.0, 300.0, 1_510.0),
        # A replacement still starting at 900 (Ready at 1,010): refused again, unneeded from 1,200.
        ((PdbSpec("web", max_unavailable=1),), 400.0, 300.0, 1_810.0),
        # min_available "50%" of 2 pods = 1: the same room as max_unavailable 1.
        ((PdbSpec("web", min_available="50%"),), 400.0, 300.0, 1_810.0),
        # Without the recheck timeout b-1 is unneeded from the first scan at or after the
        # replacement is Ready, and goes 600 s on.
        ((PdbSpec("web", max_unavailable=1),), 10.0, 0.0, 1_230.0),
        ((PdbSpec("web", max_unavailable=1),), 100.0, 0.0, 1_320.0),
    ],
)
def test_a_pdb_without_room_blocks_until_the_replacement_is_ready(pdbs, startup, recheck_s, second_gone_at):
    nodes, pods, pins = web_cluster()
    pins_with_replacements = dict(pins)
    model = AutoscalerModel(boot_seconds=120.0, boot_joules=0.0, unremovable_recheck_s=recheck_s)
    sim, result = run(nodes, pods, pins_with_replacements, model=model, pdbs=pdbs, startup=startup)
    assert result.scale_downs == 2 and result.evictions == 2
    assert all(o.node == "a-0" for o in result.outcomes)
    # b-0 drew 125 W until 610, b-1 until it went.
    assert result.node_energy_joules["b-0"] == pytest.approx(125 * 610)
    assert result.node_energy_joules["b-1"] == pytest.approx(125 * second_gone_at)
    assert result.disrupted_workloads == 1


def test_the_eviction_api_refuses_a_pod_whose_pdb_has_no_room():
    # Both web pods on b-0 (0.5 utilized), PDB max_unavailable 1: the node is removable but
    # risky; at 610 one pod is evicted, the other refused until the first replacement is Ready
    # (startup 30 s: at the 640 scan), then evicted; b-0 goes at 640.
    # A pod arriving at 620 pinned to b-0 cannot go there: the drained node is tainted.
    nodes, pods, _ = web_cluster()
    pods.append(pod(2, 620, 100, request=0.5, usage=0.0))
    sim, result = run(nodes, pods, {0: "b-0", 1: "b-0", 2: "b-0"},
                      pdbs=[PdbSpec("web", max_unavailable=1)], startup=30.0)
    assert result.evictions == 2
    outcomes = {o.index: o for o in result.outcomes}
    assert (outcomes[0].start_s, outcomes[1].start_s) == (610.0, 640.0)
    assert outcomes[2].node == "a-0"
    assert result.node_energy_joules["b-0"] == pytest.approx(150 * 610 + 125 * 30)


def test_a_drain_the_pdb_never_allows_fails_after_the_max_pod_eviction_time():
    # The PDB allows nothing (min_available 2 of 2), but safe-to-evict "true" lets the planner
    # pass the pod (safetoevict comes before the pdb rule): the eviction API still refuses it,
    # every retry until 610 + 120 s; the drain fails and b-0 is untainted and keeps running.
    nodes = two_nodes()
    pods = [pod(0, 0, 2_000, owner="ReplicaSet", workload="web", safe=True),
            pod(1, 0, 2_000, owner="ReplicaSet", workload="web")]
    sim, result = run(nodes, pods, {0: "b-0", 1: "a-0"}, pdbs=[PdbSpec("web", min_available=2)])
    assert result.evictions == 0
    assert sim.autoscaler.scale_down.failed_drains >= 1
    assert {o.node for o in result.outcomes} == {"a-0", "b-0"}


def test_delay_after_add_holds_a_scale_down():
    # c-0 is on and empty from t = 0: unneeded since 0, removable at 610. A 6-core pod arrives
    # at 300 and fits only a new b node: the loop at 300 waits for more new pods, the scale-up
    # at the 310 loop starts the 600 s cool-down, so c-0 goes at 910 — at 610 with the delay at 0.
    def cluster():
        return [node("a-0", "a", cores=1, min_count=1, initial=1), node("b-0", "b", cores=8),
                node("c-0", "c", initial=1)]

    pods = [pod(0, 300, 2_000, request=6, usage=1)]
    for delay, gone in ((600.0, 910.0), (0.0, 610.0)):
        model = AutoscalerModel(boot_seconds=120.0, boot_joules=0.0, delay_after_add_s=delay)
        _, result = run(cluster(), pods, {}, model=model)
        assert result.scale_ups == 1 and result.scale_downs == 1
        assert result.node_energy_joules["c-0"] == pytest.approx(100 * gone)
        (outcome,) = result.outcomes
        assert (outcome.node, outcome.start_s) == ("b-0", 430.0)


@pytest.mark.parametrize(("parallelism", "per_scan"), [(10, [10, 2]), (3, [3, 3, 3, 3])])
def test_empty_nodes_go_in_parallel_up_to_max_scale_down_parallelism(parallelism, per_scan):
    # Twelve empty nodes on from t = 0, all unneeded since 0: from 610 on, up to the
    # parallelism per scan (one pod keeps a-0 busy until 2,000 s so the run goes on).
    nodes = [node("a-0", "a", min_count=1, initial=1)]
    nodes += [node(f"e-{i}", "e", initial=12, ordinal=i) for i in range(12)]
    model = AutoscalerModel(max_scale_down_parallelism=parallelism)
    _, result = run(nodes, [pod(0, 0, 2_000)], {0: "a-0"}, model=model)
    gone_at = sorted(result.node_energy_joules[f"e-{i}"] / 100 for i in range(12))
    expected = [610.0 + 10 * k for k, count in enumerate(per_scan) for _ in range(count)]
    assert gone_at == pytest.approx(expected)
    assert result.scale_downs == 12
