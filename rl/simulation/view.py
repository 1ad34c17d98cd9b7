"""The scheduler's view of a simulation: what a policy is (`Policy`; the pod it is asked to place,
`PlacementRequest`, is in rl/simulation/simrecords.py), and each node as the scheduler sees it
(`NodeState`: requests, kube-scheduler's NonZeroRequested, telemetry as of the store's last
refresh, pods placed since; `candidate_states`: the nodes it may pick from), plus the workloads
feature schema v2 reads.

`SchedulerView` is a part of `Simulation` (rl/simulation/simulator.py); it reads the run and
never changes it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rl.simulation.node import ON, SimNode
from rl.simulation.scenario import NodeSpec
from rl.simulation.state import SimulationState
from scheduler.domain.model import NodeState, NodeTelemetry, NodeWorkload, PodInfo, Resources


class Policy(Protocol):
    """Chooses a node for a pod among the feasible ones (all of which fit its requests).
    `candidates`: every node the scheduler sees, the feasible ones among them (a scheduler that
    samples, as kube-scheduler's percentageOfNodesToScore, needs them); empty when unknown."""

    name: str

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None: ...

    def choose(
        self,
        pod: PodInfo,
        feasible: Sequence[NodeState],
        now: float,
        candidates: Sequence[NodeState] = (),
    ) -> str: ...


@runtime_checkable
class AttachingPolicy(Policy, Protocol):
    """A policy that reads more of the run than its requests (a learned policy: the nodes'
    workloads; a policy with controllers: starts them): `attach(sim)` before the first pod."""

    def attach(self, sim: SimulationState) -> None: ...  # the Simulation


class SchedulerView(SimulationState):
    """The nodes as the scheduler sees them (a part of `Simulation`)."""

    def node_state(self, node: SimNode) -> NodeState:
        telemetry, since = self.recorder.view(
            self._index(node), node.spec.name, node.cores, node.points, self.now,
            node.placed_at, self._infos, node.pending_cpu_cores,
        )
        return NodeState(
            info=node.info,
            requested=node.requested,
            telemetry=telemetry,
            cpu_since_sample_cores=since,
            pod_count=len(node.running) + len(node.pending) + node.daemon_pods,
            daemon_pod_count=node.daemon_pods,
            pods_since_sample=self._pods_since_sample(node, telemetry),
            nonzero_requested=self._nonzero_requested(node),
        )

    def _nonzero_requested(self, node: SimNode) -> Resources:
        """kube-scheduler's NonZeroRequested of the node (its scoring's view of the requests)."""
        total = node.requested
        if node.daemon_pods:
            total = total + self._daemon_nonzero_extra
        if self._nonzero_extra:
            for index in node.placed_at:
                extra = self._nonzero_extra.get(index)
                if extra is not None:
                    total = total + extra
        return total

    def _pods_since_sample(
        self, node: SimNode, telemetry: NodeTelemetry | None
    ) -> tuple[PodInfo, ...]:
        """The pods behind `cpu_since_sample_cores` (TargetLoadPacking predicts each): those
        placed after the sample, or with fresh samples (the ablation) those waiting for a boot."""
        if telemetry is None:
            return ()
        if self.recorder.model is None:
            return tuple(self._infos[i] for i in node.pending)
        cutoff = telemetry.sample_time
        return tuple(self._infos[i] for i, t in node.placed_at.items() if t > cutoff)

    def node_states(self) -> list[NodeState]:
        return [self.node_state(n) for n in self._nodes]

    def candidate_states(self) -> list[NodeState]:
        """The nodes the scheduler sees: under autoscaler semantics only powered-on, ready
        ones not being drained; in the visible-power-off ablation and when always on, every
        node; never a tainted one (`taint`)."""
        if self.autoscaler_model is None:
            return [self.node_state(n) for n in self._nodes if not n.tainted]
        return [
            self.node_state(n)
            for n in self._nodes
            if n.state == ON and not n.deleting and not n.tainted
        ]

    def workloads(self) -> dict[str, NodeWorkload]:
        """Per node, its pods' placement times and owners, when it became ready (None while off
        or booting) and whether it sits empty in the power-off window (feature schema v2)."""
        powers_off = self.power_off is not None or self.autoscaler_model is not None
        out = {}
        for node in self._nodes:
            indices = list(node.running) + node.pending
            on = node.state == ON
            out[node.spec.name] = NodeWorkload(
                pod_start_times=tuple(node.placed_at[i] for i in indices),
                job_pods=sum(1 for i in indices if self.pods[i].owner_kind == "Job"),
                ready_since=node.ready_since_s if on else None,
                in_scale_down_window=(
                    on and powers_off and node.empty and not node.spec.always_on
                ),
            )
        return out

    def node_watts(self, name: str) -> float:
        """The node's power now (exact, as RAPL would measure it; the decision log's outcomes)."""
        return self._by_name[name].power_watts
