"""descheduler in the simulator: every `interval_s` one HighNodeUtilization cycle over the ready
nodes, its evictions through the simulator's eviction API (a PodDisruptionBudget without room
refuses) and owners (rl/simulation/engine/workloads.py: a ReplicaSet's pod is replaced with its remaining
lifetime, a Job's starts over, a bare pod is deleted).

Defaults, each with its source (kubernetes-sigs/descheduler at DESCHEDULER_COMMIT):

* every 120 s — the Helm chart's default (charts/descheduler/values.yaml: `kind: CronJob`,
  `schedule: "*/2 * * * *"`; as a Deployment its `deschedulingInterval` is 5m);
* thresholds cpu 20 %, memory 20 %, pods 20 % — the README's HighNodeUtilization example (the
  plugin has no default: `thresholds` is required);
* the DefaultEvictor's defaults (its protections, `nodeFit: false`) and no eviction limits
  (README, "Top Level configuration" and "Evictor Plugin configuration").

What the simulator's pods are to descheduler: trace pods with their owner (a bare pod has none)
and priority, no volumes, no annotations — descheduler does not read cluster-autoscaler's
`safe-to-evict` annotation, so a trace's `safe_to_evict: false` does not stop it (only the
autoscaler); each DaemonSet of the run as a pod on every ready node; a node cluster-autoscaler
drains carries its `ToBeDeletedByClusterAutoscaler:NoSchedule` taint; booting nodes are not
ready and not seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rl.simulation.controllers.descheduler.evictor import DefaultEvictor, DefaultEvictorArgs
from rl.simulation.controllers.descheduler.highnodeutilization import (
    EvictionLimits,
    HighNodeUtilizationArgs,
    PodEvictor,
    balance,
)
from rl.simulation.controllers.descheduler.model import Node, Pod
from rl.simulation.engine.node import ON
from rl.simulation.traces.trace import PodSpec
from scheduler.cluster.podfacts import OwnerRef, PodFacts
from scheduler.domain.model import PodInfo, Taint

if TYPE_CHECKING:
    from rl.simulation.engine.node import SimNode
    from rl.simulation.engine.simulator import Simulation

DEFAULT_INTERVAL_S = 120.0
DEFAULT_THRESHOLDS = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
TO_BE_DELETED_TAINT = Taint("ToBeDeletedByClusterAutoscaler", "", "NoSchedule")


@dataclass(frozen=True)
class DeschedulerModel:
    interval_s: float = DEFAULT_INTERVAL_S
    strategy: HighNodeUtilizationArgs = field(
        default_factory=lambda: HighNodeUtilizationArgs(thresholds=dict(DEFAULT_THRESHOLDS))
    )
    evictor: DefaultEvictorArgs = field(default_factory=DefaultEvictorArgs)
    limits: EvictionLimits = field(default_factory=EvictionLimits)

    def __post_init__(self) -> None:
        if not self.interval_s > 0:
            raise ValueError("the descheduling interval must be > 0")


def trace_pod_facts(pod: PodSpec) -> PodFacts:
    workload = pod.workload or ""
    owners = () if pod.owner_kind is None else (OwnerRef(pod.owner_kind, workload, workload),)
    return PodFacts(owners=owners, priority=pod.priority)


@dataclass
class HighNodeUtilizationController:
    """Registered with `Simulation.every`; counts the cycles and the pods it evicted."""

    model: DeschedulerModel = field(default_factory=DeschedulerModel)
    cycles: int = 0
    evicted: int = 0

    def attach(self, sim: Simulation) -> None:
        sim.every(self.model.interval_s, self)

    def __call__(self, sim: Simulation) -> None:
        self.cycles += 1
        ready = [n for n in sim.nodes if n.state == ON]
        by_name = {n.spec.name: n for n in ready}
        nodes = [_node(n) for n in ready]
        pods = {n.spec.name: _pods(sim, n) for n in ready}
        workload_pods: dict[str, int] = {}
        for listed in pods.values():
            for pod in listed:
                for owner in pod.facts.owners:
                    workload_pods[owner.uid] = workload_pods.get(owner.uid, 0) + 1
        evictor = DefaultEvictor(
            self.model.evictor,
            replicas=lambda uid: workload_pods.get(uid, 0),
            covered_by_pdb=lambda pod: pod.ref is not None
            and sim.state.ledger.has_pdb(sim.pods[pod.ref]),
            nodes=lambda: nodes,
            pods_on=lambda name: pods.get(name, ()),
            now=sim.now,
        )

        def evict(pod: Pod) -> bool:
            return pod.ref is not None and sim.actions.request_eviction(by_name[pod.node], pod.ref)

        evicted = balance(nodes, pods, self.model.strategy, evictor, PodEvictor(evict, self.model.limits))
        self.evicted += len(evicted)


def _node(node: SimNode) -> Node:
    info = node.info
    if node.deleting:
        info = replace(info, taints=(*info.taints, TO_BE_DELETED_TAINT))
    return Node(info)


def _pods(sim: Simulation, node: SimNode) -> list[Pod]:
    name = node.spec.name
    out = [
        Pod(sim.pod_info(i), trace_pod_facts(sim.pods[i]), name, ref=i)
        for i in sorted(node.running)
    ]
    if node.daemon_pods:
        for ds in sim.state.daemonsets:
            info = PodInfo("kube-system", f"{ds.name}-{name}", f"{ds.name}-{name}",
                           ds.requests(), owner_kind="DaemonSet")
            out.append(Pod(info, PodFacts(owners=(OwnerRef("DaemonSet", ds.name, ds.name),)), name))
    return out
