"""The scheduler's view of a simulation: each node as the scheduler sees it (`NodeState`:
requests, kube-scheduler's NonZeroRequested, telemetry as of the store's last refresh, pods
placed since; `candidate_states`: the nodes it may pick from), plus the workloads feature
schema v2 reads. What a policy is (`Policy`) is the engine's (simulator.py); the pod it is asked
to place (`PlacementRequest`) is in rl/simulation/engine/simrecords.py.

`SchedulerView` is a part of `Simulation` (rl/simulation/engine/simulator.py), over the run's
state; it reads the run and never changes it.
"""

from __future__ import annotations

from rl.simulation.engine.node import ON, SimNode
from rl.simulation.engine.state import SimulationState
from scheduler.domain.model import NodeState, NodeTelemetry, NodeWorkload, PodInfo, Resources


class SchedulerView:
    """The nodes as the scheduler sees them (a part of `Simulation`, over its state)."""

    def __init__(self, state: SimulationState) -> None:
        self.state = state

    def node_state(self, node: SimNode) -> NodeState:
        s = self.state
        telemetry, since = s.recorder.view(
            s.index(node), node.spec.name, node.cores, node.points, s.now,
            node.placed_at, s.infos, node.pending_cpu_cores,
        )
        return NodeState(
            info=node.scheduling_info,
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
        s = self.state
        total = node.requested
        if node.daemon_pods:
            total = total + s.daemon_nonzero_extra
        if s.nonzero_extra:
            for index in node.placed_at:
                extra = s.nonzero_extra.get(index)
                if extra is not None:
                    total = total + extra
        return total

    def _pods_since_sample(
        self, node: SimNode, telemetry: NodeTelemetry | None
    ) -> tuple[PodInfo, ...]:
        """The pods behind `cpu_since_sample_cores` (TargetLoadPacking predicts each): those
        placed after the sample, or with fresh samples (the ablation) those waiting for a boot."""
        s = self.state
        if telemetry is None:
            return ()
        if s.recorder.model is None:
            return tuple(s.infos[i] for i in node.pending)
        cutoff = telemetry.sample_time
        return tuple(s.infos[i] for i, t in node.placed_at.items() if t > cutoff)

    def node_states(self) -> list[NodeState]:
        return [self.node_state(n) for n in self.state.nodes]

    def candidate_states(self) -> list[NodeState]:
        """The nodes the scheduler sees: under autoscaler semantics only powered-on, ready
        ones not being drained; in the visible-power-off ablation and when always on, every
        node; never a tainted one (`taint`)."""
        s = self.state
        if not s.autoscaling:
            return [self.node_state(n) for n in s.nodes if not n.tainted]
        return [
            self.node_state(n)
            for n in s.nodes
            if n.state == ON and not n.deleting and not n.tainted
        ]

    def workloads(self) -> dict[str, NodeWorkload]:
        """Per node, its pods' placement times and owners, when it became ready (None while off
        or booting) and whether it sits empty in the power-off window (feature schema v2)."""
        s = self.state
        powers_off = s.power_off is not None or s.autoscaling
        out = {}
        for node in s.nodes:
            indices = list(node.running) + node.pending
            on = node.state == ON
            out[node.spec.name] = NodeWorkload(
                pod_start_times=tuple(node.placed_at[i] for i in indices),
                job_pods=sum(1 for i in indices if s.pods[i].owner_kind == "Job"),
                ready_since=node.ready_since_s if on else None,
                in_scale_down_window=(
                    on and powers_off and node.empty and not node.spec.always_on
                ),
            )
        return out

    def node_watts(self, name: str) -> float:
        """The node's power now (exact, as RAPL would measure it; the decision log's outcomes)."""
        return self.state.by_name[name].power_watts
