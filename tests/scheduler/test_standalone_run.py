"""The standalone scheduler end to end: the real `kubernetes` client against kmock's emulator."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from agent.curves import PowerCurve
from scheduler.collector import CollectorConfig, DecisionCollector, read_records
from scheduler.model import NodeTelemetry
from scheduler.scorer import HeuristicScorer
from scheduler.standalone import (
    ANNOTATION_RECOMMENDED,
    ANNOTATION_SCORES,
    MODE_ACTIVE,
    MODE_SHADOW,
    StandaloneConfig,
)
from tests.helpers.standalone_harness import (
    StaticTelemetry,
    placements,
    running_scheduler,
    wait_for,
)
from tests.helpers.standalone_kmock import EmulatedCluster
from tests.helpers.standalone_objects import node, pod

NODES = 10
PODS = 50
# Linear curves, 10 W of slope apart: n0 is the most efficient. With a linear curve ΔP does not
# depend on load, so the energy-best node is the flattest one that still has room.
SLOPES_WATTS = {f"n{i}": 100.0 + 10.0 * i for i in range(NODES)}
IDLE_WATTS = 60.0


def _scorer() -> HeuristicScorer:
    curves = {n: PowerCurve.linear(IDLE_WATTS, IDLE_WATTS + s) for n, s in SLOPES_WATTS.items()}
    return HeuristicScorer(delta_p_ref_watts=100.0, curves=curves)


def _telemetry() -> StaticTelemetry:
    now = time.time()
    return StaticTelemetry(
        {
            n: NodeTelemetry(
                node=n, sample_time=now, watts=IDLE_WATTS, source="rapl", utilization=0.0, cores=4.0
            )
            for n in SLOPES_WATTS
        }
    )


def _populate(cluster: EmulatedCluster) -> None:
    for name in SLOPES_WATTS:
        cluster.create_node(node(name, cpu="4", memory="16Gi"))
    for i in range(PODS):
        cluster.create_pod(pod(f"p{i:02d}", requests={"cpu": "500m", "memory": "512Mi"}))


def _all_bound(cluster: EmulatedCluster) -> dict[str, str | None] | None:
    placed = placements(cluster.list_pods())
    return placed if len(placed) == PODS and all(placed.values()) else None


@pytest.mark.parametrize("mode", [MODE_ACTIVE, MODE_SHADOW])
def test_fifty_pods_on_ten_nodes(mode: str, tmp_path: Path) -> None:
    collector = DecisionCollector(CollectorConfig(str(tmp_path / "decisions.jsonl")))
    config = StandaloneConfig(mode=mode, seed=1, initial_backoff_seconds=0.1)
    with EmulatedCluster() as cluster:
        _populate(cluster)
        with running_scheduler(cluster.url, _scorer(), config, _telemetry(), collector) as sched:
            placed = wait_for(lambda: _all_bound(cluster), what="all pods bound")
            sched.drain()
            pods = cluster.list_pods()
            bindings = cluster.bindings()
            events = cluster.list_events()
    per_node = Counter(placed.values())
    assert all(b.accepted for b in bindings) and len(bindings) == PODS  # each bound once

    if mode == MODE_ACTIVE:
        # Greedy by efficiency: 8 pods of 0.5 CPU fill a 4-CPU node, so n0…n5 are full and
        # n6 takes the last 2; the steeper nodes stay empty.
        assert per_node == Counter({f"n{i}": 8 for i in range(6)} | {"n6": 2})
        assert all(
            ANNOTATION_RECOMMENDED not in (p["metadata"].get("annotations") or {}) for p in pods
        )
    else:
        # The default scoring spreads identical pods evenly over identical nodes …
        assert per_node == Counter({f"n{i}": 5 for i in range(NODES)})
        # … while every pod carries the energy recommendation: n0, never full in shadow mode.
        for p in pods:
            annotations = p["metadata"]["annotations"]
            assert annotations[ANNOTATION_RECOMMENDED] == "n0"
            scores = json.loads(annotations[ANNOTATION_SCORES])
            assert len(scores) == NODES and max(scores, key=scores.get) == "n0"

    decisions = [
        r for r in read_records(tmp_path / "decisions.jsonl")[0] if r["type"] == "decision"
    ]
    assert len(decisions) == PODS
    for record in decisions:
        assert record["mode"] == mode
        assert record["chosen"] == placed[record["pod"]["name"]]
        best = max(c["score"] for c in record["candidates"])
        recommended = next(c for c in record["candidates"] if c["node"] == record["recommended"])
        assert recommended["score"] == best
        expected = record["recommended"] if mode == MODE_ACTIVE else record["default_choice"]
        assert record["chosen"] == expected
    scheduled = [e for e in events if e["reason"] == "Scheduled"]
    assert len(scheduled) == PODS
    assert {e["involvedObject"]["name"] for e in scheduled} == set(placed)
    assert all(
        e["message"] == f"Successfully assigned default/{e['involvedObject']['name']} to "
        f"{placed[e['involvedObject']['name']]}"
        for e in scheduled
    )
