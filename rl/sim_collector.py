"""The decision collector's JSONL, written by the simulator (`kubejoule-rl benchmark --collector
FILE`): the same two record kinds the standalone scheduler writes (scheduler/collector.py), so a
model trained on simulated decisions reads real ones unchanged.

* decision (at the simulated time of the placement): the pod, the candidates — the best
  `max_candidates` by the heuristic's score plus the chosen node — with the heuristic's score and
  ΔP and feature schema v2 (with the simulator's node workloads), the node chosen, the
  heuristic's recommendation; `source: "simulator"`, `scorer`: the run's policy key, `run`:
  `POLICY#SEED`.
* outcome: the chosen node's power at the decision and at the first decision at least
  `window_seconds` later — decisions are when this log samples, so "after" may come later than
  the window; `sample_time_after` says when — (the simulator's exact node power, source
  `simulated`; `measured` stays false, it is reserved for RAPL), or no "after" when no decision
  came before the run ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.benchmark import ClusterModel
from rl.policies import heuristic_scorer
from rl.scenario import NodeSpec
from scheduler.collector import CandidateRecord, DecisionCollector
from scheduler.features_v2 import FEATURE_SCHEMA_V2, V2Features
from scheduler.model import NodeTelemetry

SOURCE = "simulated"


class SimDecisionLog:
    def __init__(
        self,
        collector: DecisionCollector,
        nodes: Sequence[NodeSpec],
        cluster: ClusterModel,
        window_seconds: float = 60.0,
    ) -> None:
        self.collector = collector
        self.nodes = list(nodes)
        self.cluster = cluster
        self.window_seconds = window_seconds
        self._pending: list[tuple[float, str, str, NodeTelemetry]] = []
        self._run = ""
        self._sim: Any = None
        self._scorer = heuristic_scorer(self.nodes, cluster.policy_power_off())
        self._workloads: dict[str, Any] = {}
        self._features = V2Features(self._scorer, lambda name: self._workloads.get(name))

    def start(self, sim: Any, label: str, seed: int) -> None:
        self._sim, self._run, self._pending = sim, f"{label}#{seed}", []

    def _telemetry(self, node: str) -> NodeTelemetry:
        sim = self._sim
        return NodeTelemetry(node, sim.now, watts=sim.node_watts(node), source=SOURCE)

    def _flush(self, final: bool = False) -> None:
        now = self._sim.now
        keep = []
        for due, decision_id, node, before in self._pending:
            if due <= now or final:
                # The run's end is not a sample: after it everything has finished.
                after = self._telemetry(node) if due <= now and not final else None
                self.collector.record_outcome(
                    decision_id, node, self.window_seconds, before, after, wall_time=now
                )
            else:
                keep.append((due, decision_id, node, before))
        self._pending = keep

    def decided(self, sim: Any, decision: Any, chosen: str) -> None:
        self._flush()
        self._workloads = sim.workloads()
        now = decision.now
        results = self._scorer.score(decision.info, decision.feasible, now)
        ranked = sorted(results, key=lambda r: (-r.score, r.node))
        limit = self.collector.config.max_candidates
        kept = [r for i, r in enumerate(ranked) if i < limit or r.node == chosen]
        states = {s.info.name: s for s in decision.feasible}
        candidates = [
            CandidateRecord(
                node=r.node,
                score=r.score,
                delta_watts=r.delta_watts,
                reason=r.reason,
                telemetry_age_seconds=(
                    t.age_seconds(now) if (t := states[r.node].telemetry) is not None else None
                ),
                features=self._features(decision.info, states[r.node], now),
            )
            for r in kept
        ]
        decision_id = self.collector.record_decision(
            source="simulator",
            mode="active",
            pod=decision.info,
            candidates=candidates,
            chosen=chosen,
            recommended=ranked[0].node if ranked else None,
            default_choice=None,
            scorer=self._run.split("#")[0],
            wall_time=now,
            extra={
                "run": self._run,
                "candidate_count": len(results),
                "feature_schema": FEATURE_SCHEMA_V2.version,
            },
        )
        self._pending.append(
            (now + self.window_seconds, decision_id, chosen, self._telemetry(chosen))
        )

    def finish(self, sim: Any) -> None:
        self._flush(final=True)
        self.collector.flush()
