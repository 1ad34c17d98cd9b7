"""kubejoule's energy rebalancer in the simulator: the policy suffix `+rebalancer`
(`kubejoule+rebalancer@kubejoule`). Every `interval_seconds` it shows the decision
(scheduler/decisions/rebalance.py, the code the live rebalancer runs) the cluster as the live
rebalancer sees it, and carries out its moves in active mode: it taints the node (no new pods;
the taint comes off after the node's cool-down if the node is still there) and evicts its pods
through the simulator's eviction API (a PDB without room refuses) and owners
(rl/simulation/engine/workloads.py); cluster-autoscaler removes the emptied node.

What the decision is shown, node by node (the ready nodes; a node cluster-autoscaler drains is
not schedulable): the scheduler's node state with its telemetry as the store holds it (lagging
samples; a node whose agent is missing has none), the curve its agent exports, each pod's share
of the measured CPU (split by requests, as the live rebalancer must), how long it has run
since it was placed, its owner (a Job's pod restarts), its PDB's room, and its predicted
remaining lifetime from the predictor (scheduler/lifetimes) — learned from the pods that end in
this simulation, never from the trace's durations. cluster-autoscaler's threshold and unneeded time are the
run's own.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import yaml

from rl.simulation.autoscaler.scan import Autoscaler
from rl.simulation.engine.node import ON
from scheduler.cluster.podfacts import KEEPS_LIFETIME, PodFacts, never_evict_reason, node_bound
from scheduler.config.rebalancer import RebalancerConfig, rebalancer_config
from scheduler.decisions.rebalance import (
    NodeView,
    Plan,
    PodView,
    cpu_shares,
    fresh_utilization,
    plan,
)
from scheduler.decisions.rebalance_lifetime import remaining
from scheduler.decisions.rebalance_prices import pod_eviction_cost
from scheduler.domain.model import NodeState
from scheduler.lifetimes import LifetimePredictor

if TYPE_CHECKING:
    from rl.simulation.autoscaler.model import AutoscalerModel
    from rl.simulation.engine.node import SimNode
    from rl.simulation.engine.simulator import Simulation

MAX_STALENESS_S = 30.0  # the scheduler's max_staleness_seconds default


def settings_file(path: str) -> RebalancerConfig:
    """The `rebalancer:` section of a scheduler configuration file (or a file holding only that
    section's keys), in active mode unless it says otherwise. ValueError naming the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
        if isinstance(data, dict) and "rebalancer" in data:
            data = data["rebalancer"]
        if isinstance(data, dict):
            data = {"mode": "active", **data}
        return rebalancer_config(data)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise ValueError(f"+rebalancer:{path}: {exc}") from exc


def modelled_config(config: RebalancerConfig, autoscaler: AutoscalerModel | None,
                    pod_startup_s: float) -> RebalancerConfig:
    """The settings the rebalancer runs with beside the run's cluster: cluster-autoscaler's
    threshold and unneeded time the run's own (without an autoscaler, the settings' own), a
    replacement's startup time the workloads'. The on-cluster benchmark starts the live
    rebalancer with these too (rl/evaluation/on_cluster_policy.py)."""
    if autoscaler is not None:
        config = replace(config, scale_down_utilization_threshold=autoscaler.utilization_threshold,
                         scale_down_unneeded_seconds=autoscaler.scale_down_unneeded_s)
    return replace(config, pod_startup_seconds=pod_startup_s)


@dataclass
class RebalancerController:
    """Registered with `Simulation.every` by `attach`; keeps the rounds' plans' tallies. Its
    predictor learns, before each round, the lifetime of every pod that ended since the last one
    (placement to finish; a pod that was evicted and replaced counts from its last placement)."""

    predictor: LifetimePredictor = field(default_factory=LifetimePredictor)
    config: RebalancerConfig = field(default_factory=lambda: RebalancerConfig(mode="active"))
    rounds: int = 0
    moves: int = 0
    evicted: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    _acted: dict[str, float] = field(default_factory=dict)
    _facts: dict[int, PodFacts] = field(default_factory=dict)
    _learned: int = 0  # of the simulation's finished pods

    def __deepcopy__(self, memo: dict[int, object]) -> RebalancerController:
        """A copy for a forked simulation (`Simulation.fork`): its own predictor with the same
        histories, its own tallies, so the fork and the original learn and act apart."""
        clone = copy.copy(self)
        memo[id(self)] = clone
        predictor = LifetimePredictor(priors=self.predictor.priors)
        for key, lifetimes in self.predictor.histories():
            predictor.restore(key, lifetimes)
        clone.predictor = predictor
        clone.skipped, clone._acted, clone._facts = dict(self.skipped), dict(self._acted), dict(self._facts)
        return clone

    def attach(self, sim: Simulation) -> None:
        scaler = sim.autoscaler
        model = scaler.model if isinstance(scaler, Autoscaler) else None
        self.config = modelled_config(self.config, model, sim.state.ledger.model.pod_startup_s)
        sim.every(self.config.interval_seconds, self)

    def __call__(self, sim: Simulation) -> None:
        self.rounds += 1
        finished = sim.completed
        for outcome in finished[self._learned:]:
            self.predictor.observe_end(sim.pod_info(outcome.index), outcome.finish_s - outcome.start_s)
        self._learned = len(finished)
        ready = [n for n in sim.nodes if n.state == ON]
        result = plan([self._view(sim, n) for n in ready], self.config)
        for reason, count in result.reasons().items():
            self.skipped[reason] = self.skipped.get(reason, 0) + count
        if self.config.active:
            self._act(sim, result, {n.spec.name: n for n in ready})

    def _act(self, sim: Simulation, result: Plan, nodes: dict[str, SimNode]) -> None:
        for name, node in nodes.items():  # its taint comes off when its cool-down ends
            acted = self._acted.get(name)
            if node.tainted and (acted is None or sim.now - acted >= self.config.node_cooldown_seconds):
                sim.actions.taint(node, False)
        for move in result.moves:
            node = nodes[move.node]
            self.moves += 1
            self._acted[move.node] = sim.now
            sim.actions.taint(node, True)  # its pods go elsewhere; the autoscaler removes it when empty
            for key in move.pods:
                if not sim.actions.request_eviction(node, int(key)):
                    break  # a PDB refused: leave the rest (the node is in cool-down now)
                self.evicted += 1

    def _facts_of(self, sim: Simulation, index: int) -> PodFacts:
        facts = self._facts.get(index)
        if facts is None:
            facts = self._facts[index] = PodFacts.from_k8s(sim.pods[index].pod_object())
        return facts

    def _view(self, sim: Simulation, node: SimNode) -> NodeView:
        state: NodeState = sim.view.node_state(node)
        name = node.spec.name
        utilization = fresh_utilization(state, sim.now, MAX_STALENESS_S)
        telemetry = state.telemetry
        curve = node.spec.curve if telemetry is not None and telemetry.curve_points else None
        indices = sorted(i for i in node.running if not self._bound(sim, i))
        infos = [sim.pod_info(i) for i in indices]
        busy = (utilization or 0.0) * state.cores
        daemons = [sim.actions.daemon_requests.cpu_millicores] if node.daemon_pods else []
        shares = cpu_shares(busy, [i.requests.cpu_millicores for i in infos] + daemons)
        pods = []
        for index, info, share in zip(indices, infos, shares[: len(infos)], strict=True):
            spec, facts = sim.pods[index], self._facts_of(sim, index)
            age = sim.now - node.placed_at[index]
            pods.append(PodView(
                key=str(index),
                info=info,
                cpu_cores=share,
                run_seconds=age,
                restarts=spec.owner_kind not in KEEPS_LIFETIME,
                remaining=remaining(self.predictor, info, age),
                eviction_cost=pod_eviction_cost(info.annotations, facts.priority),
                blocker=never_evict_reason(info.annotations, facts),
                workload=spec.workload,
                pdb_room=sim.actions.pdb_room(spec.workload) if sim.state.ledger.has_pdb(spec) else None,
            ))
        acted = self._acted.get(name)
        return NodeView(
            state=state,
            curve=curve,
            utilization=utilization,
            pods=tuple(pods),
            schedulable=not node.deleting and not node.tainted,
            cooling=acted is not None and sim.now - acted < self.config.node_cooldown_seconds,
        )

    def _bound(self, sim: Simulation, index: int) -> bool:
        info = sim.pod_info(index)
        return node_bound(info.annotations, self._facts_of(sim, index))
