"""A node's life in a simulation: pods start, progress at the node's contention rate and finish;
the node boots, becomes ready (its DaemonSet pods start), idles, powers off; its power follows
its utilization (its curve), every change settled in the energy ledgers (rl/simulation/engine/energy.py)
and recorded for telemetry (rl/simulation/engine/telemetry.py).

`NodeLifecycle` is a part of `Simulation` (rl/simulation/engine/simulator.py), over the run's
state (`state.py`): the engine's event handlers, called by its event loop and by the actions
(rl/simulation/engine/actions.py).
"""

from __future__ import annotations

from rl.simulation.engine.energy import BOOTS, STANDBY, ready_node_power, split_watts
from rl.simulation.engine.events import COMPLETE, POWER_OFF
from rl.simulation.engine.node import OFF, ON, SimNode
from rl.simulation.engine.simrecords import PodOutcome
from rl.simulation.engine.state import SimulationState

# A pod whose remaining run time is below this is finished (float round-off of rate × time).
_DONE_EPSILON_SECONDS = 1e-9


class NodeLifecycle:
    """Pods and power of each node over time (a part of `Simulation`, over its state)."""

    def __init__(self, state: SimulationState) -> None:
        self.state = state

    # -- per-node bookkeeping --------------------------------------------------------------------

    def set_power(self, node: SimNode, watts: float) -> None:
        """A node that is off or booting draws `watts` (standby, a boot's)."""
        split = split_watts(watts, STANDBY if node.state == OFF else BOOTS)
        self.draw(node, watts, split)

    def draw(self, node: SimNode, watts: float, split: tuple[float, ...]) -> None:
        s = self.state
        s.energy.set_power(node, watts, s.now, s.nodes, split, node.state != OFF)
        s.recorder.record(s.index(node), s.now, node.state == ON, node.utilization, watts)

    def progress(self, node: SimNode) -> None:
        """Advance the remaining work of the node's running pods to now."""
        s = self.state
        elapsed = s.now - node.last_progress_s
        if elapsed > 0 and node.running:
            done = node.rate * elapsed
            for index in node.running:
                node.running[index] -= done
        node.last_progress_s = s.now

    def reschedule_completion(self, node: SimNode) -> None:
        s = self.state
        node.version += 1
        if node.running:
            soonest = min(node.running.values())
            s.push(
                s.now + max(0.0, soonest) / node.rate, COMPLETE, s.index(node), node.version
            )


    def update_power(self, node: SimNode) -> None:
        s = self.state
        if node.state == ON:
            watts, split = ready_node_power(
                node.spec.curve, node.cores, node.usage_cores, s.daemon_usage,
                bool(node.daemon_pods), not node.empty,
            )
            self.draw(node, watts, split)

    def arm_power_off(self, node: SimNode) -> None:
        s = self.state
        if (
            s.power_off is not None
            and node.state == ON
            and node.empty
            and not node.spec.always_on
        ):
            s.push(
                s.now + s.power_off.after_seconds, POWER_OFF, s.index(node), node.version
            )

    def start_pod(self, node: SimNode, index: int) -> None:
        s = self.state
        pod = s.pods[index]
        node.running[index] = s.ledger.started(index, s.now)
        node.usage_cores += pod.cpu_usage
        s.start[index] = s.now
        s.first_start.setdefault(index, s.now)

    def make_ready(self, node: SimNode) -> None:
        """The node is on and ready: its DaemonSet pods start."""
        s = self.state
        node.state = ON
        node.last_progress_s = s.now
        node.daemon_pods = len(s.daemonsets)
        node.requested = node.requested + s.daemon_requests
        node.usage_cores += s.daemon_usage
        node.empty_since_s = s.now
        node.ready_since_s = s.now
        self.update_power(node)

    # -- event handlers --------------------------------------------------------------------------

    def on_complete(self, node: SimNode) -> None:
        s = self.state
        if not node.running:
            return
        self.progress(node)
        # The event was due for the pod with the least work left: it (and any pod within
        # round-off of it) is done, so every completion event makes progress.
        soonest = min(node.running.values())
        cutoff = soonest + _DONE_EPSILON_SECONDS * node.rate
        finished = [i for i, left in node.running.items() if left <= cutoff]
        for index in finished:
            del node.running[index]
            del node.placed_at[index]
            pod = s.pods[index]
            node.usage_cores -= pod.cpu_usage
            node.requested = node.requested - s.infos[index].requests
            s.ledger.finished(index)
            s.outcomes.append(
                PodOutcome(
                    index=index,
                    node=node.spec.name,
                    submit_s=pod.submit_s,
                    start_s=s.start[index],
                    finish_s=s.now,
                    duration_s=pod.duration_s,
                    waited=index in s.waited,
                    first_start_s=s.first_start[index],
                )
            )
            s.done += 1
        self.after_removal(node)
        self.arm_power_off(node)
        if finished:
            self.retry_waiting()

    def after_removal(self, node: SimNode) -> None:
        s = self.state
        if not node.running:
            # No float residue on a node left with its DaemonSet pods only.
            node.usage_cores = s.daemon_usage if node.daemon_pods else 0.0
            node.empty_since_s = s.now
        self.reschedule_completion(node)
        self.update_power(node)

    def retry_waiting(self) -> None:
        """Room was freed or a node became ready: every waiting pod gets another try, oldest
        first."""
        s = self.state
        if s.waiting:
            s.to_schedule.extend(s.waiting)
            s.waiting = []

    def on_boot_done(self, node: SimNode) -> None:
        self.make_ready(node)
        for index in node.pending:
            self.start_pod(node, index)
        node.pending = []
        node.pending_cpu_cores = 0.0
        self.reschedule_completion(node)
        self.update_power(node)
        self.arm_power_off(node)
        self.retry_waiting()

    def power_down(self, node: SimNode) -> None:
        """Power a node off; its DaemonSet pods stop with it."""
        s = self.state
        node.state = OFF
        node.deleting = False
        node.tainted = False
        node.deletion_candidate = False
        node.version += 1
        if node.daemon_pods:
            node.requested = node.requested - s.daemon_requests
        node.daemon_pods = 0
        node.usage_cores = 0.0
        self.set_power(node, node.spec.standby_watts)

    def on_power_off(self, node: SimNode, version: int) -> None:
        if version != node.version or node.state != ON or not node.empty:
            return
        self.power_down(node)

