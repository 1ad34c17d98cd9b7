"""The decision log (JSONL), written by the simulator (`kubejoule-rl benchmark --decision-log
FILE`): the same records the standalone scheduler and the extender write, built by the same
functions (scheduler/decisionlog/schema.py), so a model trained on simulated decisions reads real
ones unchanged.

* decision (at the simulated time of the placement): the pod, the candidates — the best
  `max_candidates` by the heuristic's score plus the chosen node — with the heuristic's score and
  ΔP and feature schema v3 (with the simulator's node workloads, autoscaler marks and a
  lifetime predictor learning from the run's finished pods: `rl.policies.sim_features`), the node chosen, the
  heuristic's recommendation; `source: "simulator"`, `scorer`: the run's policy key, `run`:
  `POLICY#SEED`.
* outcome: the chosen node's power at the decision and at the first decision at least
  `window_seconds` later — decisions are when this log samples, so "after" may come later than
  the window; `sample_time_after` says when — (the simulator's exact node power, source
  `simulated`; `measured` stays false, it is reserved for RAPL), or no "after" when no decision
  came before the run ended.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rl.policies.scheduling_profiles import heuristic_energy
from rl.policies.sim_features import SimLifetimes, sim_lifetimes
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.simrecords import PlacementRequest
from rl.simulation.engine.simulator import Simulation
from rl.simulation.traces.scenario import NodeSpec
from scheduler.decisionlog.logfile import DecisionLog
from scheduler.decisionlog.schema import candidate_record, decision_extra, kept_candidates
from scheduler.domain.model import REASONS, NodeTelemetry, NodeWorkload
from scheduler.framework.batch import CandidateBatch
from scheduler.framework.decision import ranked
from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3, V3Features
from scheduler.lifetimes import LifetimePredictor

SOURCE = "simulated"


class SimDecisionLog:
    def __init__(
        self,
        decision_log: DecisionLog,
        nodes: Sequence[NodeSpec],
        cluster: ClusterModel,
        window_seconds: float = 60.0,
    ) -> None:
        self.decision_log = decision_log
        self.nodes = list(nodes)
        self.cluster = cluster
        self.window_seconds = window_seconds
        self._pending: list[tuple[float, str, str, NodeTelemetry]] = []
        self._run = ""
        self._sim: Simulation | None = None
        self._energy = heuristic_energy(self.nodes, cluster.policy_power_off())
        self._workloads: dict[str, NodeWorkload] = {}
        self._lifetimes: SimLifetimes[LifetimePredictor] | None = None
        self._features = V3Features(
            self._energy,
            lambda name: self._workloads.get(name),
            lambda: self._lifetimes.predictor if self._lifetimes is not None else None,
        )

    def start(self, sim: Simulation, label: str, seed: int) -> None:
        self._sim, self._run, self._pending = sim, f"{label}#{seed}", []
        self._lifetimes = sim_lifetimes(sim)

    def _telemetry(self, node: str) -> NodeTelemetry:
        sim = self._sim
        assert sim is not None, "start() first"
        return NodeTelemetry(node, sim.now, watts=sim.view.node_watts(node), source=SOURCE)

    def _flush(self, final: bool = False) -> None:
        assert self._sim is not None, "start() first"
        now = self._sim.now
        keep = []
        for due, decision_id, node, before in self._pending:
            if due <= now or final:
                # The run's end is not a sample: after it everything has finished.
                after = self._telemetry(node) if due <= now and not final else None
                self.decision_log.record_outcome(
                    decision_id, node, self.window_seconds, before, after, wall_time=now
                )
            else:
                keep.append((due, decision_id, node, before))
        self._pending = keep

    def decided(self, sim: Simulation, decision: PlacementRequest, chosen: str) -> None:
        self._flush()
        assert self._lifetimes is not None
        self._workloads = self._lifetimes.workloads()
        now = decision.now
        feasible = decision.feasible
        batch = CandidateBatch.of(feasible, now)
        scores = self._energy.evaluate(decision.info, batch)
        names = batch.names
        limit = self.decision_log.config.max_candidates
        candidates = []
        for i in kept_candidates(scores.score, names, limit, (chosen,)):
            state = feasible[i]
            candidates.append(candidate_record(
                names[i],
                scores.score[i],
                float(scores.delta_watts[i]),
                REASONS[int(scores.reason[i])],
                telemetry_age_seconds=(
                    t.age_seconds(now) if (t := state.telemetry) is not None else None
                ),
                features=self._features(decision.info, state, now),
            ))
        best = ranked(scores.score, names, 1)
        decision_id = self.decision_log.record_decision(
            source="simulator",
            mode="active",
            pod=decision.info,
            candidates=candidates,
            chosen=chosen,
            recommended=names[best[0]] if best else None,
            default_choice=None,
            scorer=self._run.split("#")[0],
            wall_time=now,
            extra={"run": self._run, **decision_extra(len(names), FEATURE_SCHEMA_V3.version)},
        )
        self._pending.append(
            (now + self.window_seconds, decision_id, chosen, self._telemetry(chosen))
        )

    def finish(self, sim: Simulation) -> None:
        self._flush(final=True)
        self.decision_log.flush()


# --- training data for the MLP: decision logs on random training clusters --------------------

TRAINING_LOG_POLICIES = ("heuristic", "default", "mostallocated", "roundrobin")


def write_training_log(
    path: str,
    clusters: int,
    seed: int,
    policies: Sequence[str] = TRAINING_LOG_POLICIES,
    hours: float = 1.0,
    on_cluster: Callable[[int, dict[str, object]], None] | None = None,
) -> list[dict[str, object]]:
    """The decision log of `policies` on `clusters` random training clusters and traces (the
    DQN's draws: rl/learning/dqn/episodes.py, from `random.Random(seed)`), under the gate's cluster rules
    (autoscaler with the kubejoule expander, the bundled DaemonSets, lagging telemetry). Node
    names carry their cluster's index (`c03-…`) so the MLP's held-out nodes are distinct nodes.
    Returns the draws."""
    import random
    from dataclasses import asdict, replace

    from rl.evaluation.benchmark import run_once
    from rl.learning.dqn.episodes import build_episode, draw_episode, training_cluster
    from scheduler.decisionlog.logfile import DecisionLog, DecisionLogConfig

    rng = random.Random(seed)
    cluster = training_cluster()
    decision_log = DecisionLog(DecisionLogConfig(path, max_candidates=4, max_bytes=2**40))
    draws: list[dict[str, object]] = []
    try:
        for index in range(clusters):
            draw = draw_episode(rng, hours)
            nodes, pods = build_episode(draw)
            nodes = [replace(n, name=f"c{index:02d}-{n.name}") for n in nodes]
            log = SimDecisionLog(decision_log, nodes, cluster)
            for policy in policies:
                run_once(
                    nodes,
                    pods,
                    policy,
                    0,
                    cluster=cluster,
                    label=f"c{index:02d}:{policy}",
                    observer=log,
                )
            draws.append({**asdict(draw), "pods": len(pods)})
            if on_cluster is not None:
                on_cluster(index, draws[-1])
    finally:
        decision_log.close()
    return draws
