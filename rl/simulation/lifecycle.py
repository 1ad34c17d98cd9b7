"""A node's life in a simulation: pods start, progress at the node's contention rate and finish;
the node boots, becomes ready (its DaemonSet pods start), idles, powers off; its power follows
its utilization (its curve), every change settled in the energy ledgers (rl/simulation/energy.py)
and recorded for telemetry (rl/simulation/telemetry.py).

`NodeLifecycle` is a part of `Simulation` (rl/simulation/simulator.py): the engine's event
handlers, called by its event loop and by the actions (rl/simulation/actions.py).
"""

from __future__ import annotations

from rl.simulation.energy import BOOTS, STANDBY, ready_node_power, split_watts
from rl.simulation.events import COMPLETE, POWER_OFF
from rl.simulation.node import OFF, ON, SimNode
from rl.simulation.simrecords import PodOutcome
from rl.simulation.state import SimulationState

# A pod whose remaining run time is below this is finished (float round-off of rate × time).
_DONE_EPSILON_SECONDS = 1e-9


class NodeLifecycle(SimulationState):
    """Pods and power of each node over time (a part of `Simulation`)."""

    # -- per-node bookkeeping --------------------------------------------------------------------

    def _set_power(self, node: SimNode, watts: float) -> None:
        """A node that is off or booting draws `watts` (standby, a boot's)."""
        split = split_watts(watts, STANDBY if node.state == OFF else BOOTS)
        self._draw(node, watts, split)

    def _draw(self, node: SimNode, watts: float, split: tuple[float, ...]) -> None:
        self.energy.set_power(node, watts, self.now, self._nodes, split, node.state != OFF)
        self.recorder.record(self._index(node), self.now, node.state == ON, node.utilization, watts)

    def _progress(self, node: SimNode) -> None:
        """Advance the remaining work of the node's running pods to now."""
        elapsed = self.now - node.last_progress_s
        if elapsed > 0 and node.running:
            done = node.rate * elapsed
            for index in node.running:
                node.running[index] -= done
        node.last_progress_s = self.now

    def _reschedule_completion(self, node: SimNode) -> None:
        node.version += 1
        if node.running:
            soonest = min(node.running.values())
            self._push(
                self.now + max(0.0, soonest) / node.rate, COMPLETE, self._index(node), node.version
            )


    def _update_power(self, node: SimNode) -> None:
        if node.state == ON:
            watts, split = ready_node_power(
                node.spec.curve, node.cores, node.usage_cores, self._daemon_usage,
                bool(node.daemon_pods), not node.empty,
            )
            self._draw(node, watts, split)

    def _arm_power_off(self, node: SimNode) -> None:
        if (
            self.power_off is not None
            and node.state == ON
            and node.empty
            and not node.spec.always_on
        ):
            self._push(
                self.now + self.power_off.after_seconds, POWER_OFF, self._index(node), node.version
            )

    def _start_pod(self, node: SimNode, index: int) -> None:
        pod = self.pods[index]
        node.running[index] = self.ledger.started(index, self.now)
        node.usage_cores += pod.cpu_usage
        self._start[index] = self.now
        self._first_start.setdefault(index, self.now)

    def _make_ready(self, node: SimNode) -> None:
        """The node is on and ready: its DaemonSet pods start."""
        node.state = ON
        node.last_progress_s = self.now
        node.daemon_pods = len(self.daemonsets)
        node.requested = node.requested + self._daemon_requests
        node.usage_cores += self._daemon_usage
        node.empty_since_s = self.now
        node.ready_since_s = self.now
        self._update_power(node)

    # -- event handlers --------------------------------------------------------------------------

    def _on_complete(self, node: SimNode) -> None:
        if not node.running:
            return
        self._progress(node)
        # The event was due for the pod with the least work left: it (and any pod within
        # round-off of it) is done, so every completion event makes progress.
        soonest = min(node.running.values())
        cutoff = soonest + _DONE_EPSILON_SECONDS * node.rate
        finished = [i for i, left in node.running.items() if left <= cutoff]
        for index in finished:
            del node.running[index]
            del node.placed_at[index]
            pod = self.pods[index]
            node.usage_cores -= pod.cpu_usage
            node.requested = node.requested - self._infos[index].requests
            self.ledger.finished(index)
            self._outcomes.append(
                PodOutcome(
                    index=index,
                    node=node.spec.name,
                    submit_s=pod.submit_s,
                    start_s=self._start[index],
                    finish_s=self.now,
                    duration_s=pod.duration_s,
                    waited=index in self._waited,
                    first_start_s=self._first_start[index],
                )
            )
            self._done += 1
        self._after_removal(node)
        self._arm_power_off(node)
        if finished:
            self._retry_waiting()

    def _after_removal(self, node: SimNode) -> None:
        if not node.running:
            # No float residue on a node left with its DaemonSet pods only.
            node.usage_cores = self._daemon_usage if node.daemon_pods else 0.0
            node.empty_since_s = self.now
        self._reschedule_completion(node)
        self._update_power(node)

    def _retry_waiting(self) -> None:
        """Room was freed or a node became ready: every waiting pod gets another try, oldest
        first."""
        if self._waiting:
            self._to_schedule.extend(self._waiting)
            self._waiting = []

    def _on_boot_done(self, node: SimNode) -> None:
        self._make_ready(node)
        for index in node.pending:
            self._start_pod(node, index)
        node.pending = []
        node.pending_cpu_cores = 0.0
        self._reschedule_completion(node)
        self._update_power(node)
        self._arm_power_off(node)
        self._retry_waiting()

    def power_down(self, node: SimNode) -> None:
        """Power a node off; its DaemonSet pods stop with it."""
        node.state = OFF
        node.deleting = False
        node.tainted = False
        node.version += 1
        if node.daemon_pods:
            node.requested = node.requested - self._daemon_requests
        node.daemon_pods = 0
        node.usage_cores = 0.0
        self._set_power(node, node.spec.standby_watts)

    def _on_power_off(self, node: SimNode, version: int) -> None:
        if version != node.version or node.state != ON or not node.empty:
            return
        self.power_down(node)

