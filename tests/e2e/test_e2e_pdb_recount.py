"""A trace's PodDisruptionBudget on the real disruption controller when one of its workload's
pods ends (rl/evaluation/owners.py): the replay scales the owner down ahead of the end and touches
the PDB after it, so the controller's count is the simulator's — the pods left, all healthy, room
for one disruption — as soon as the pod has gone.

The disruption controller recounts a PDB on its pods' and its own events only, never when a
controller's scale changes (kubernetes/kubernetes pkg/controller/disruption/disruption.go). A
replay that lowered the scale after the pod's end left the PDB counting the ended pod as expected
and unhealthy — no room — until the workload's next pod event: at 10× and 30×, half of the
headline window's PDB-time, and cluster-autoscaler refused drains the simulator made.

Its own control plane with the workload controllers off, as the benchmark's
(rl/cluster/controlplane.py REPLAYED_CONTROLLERS); one KWOK node; about 40 s."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from common.curves import PowerCurve
from rl.cluster.controlplane import (
    REPLAYED_CONTROLLERS,
    ClusterOptions,
    create_nodes,
    down,
    up,
    wait_nodes_ready,
)
from rl.evaluation.owners import Workloads, object_name
from rl.evaluation.replay import Recording, replay
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from rl.simulation.traces.trace import PdbSpec
from tests.helpers.e2e_sched import create_namespace

SPEEDUP = 10.0
SHORT_S, LONG_S = 60.0, 250.0  # trace seconds: p-0 ends at 6 s of wall clock, p-1 and p-2 at 25 s
NAMESPACE = "recount"


def test_a_pods_end_leaves_its_pdb_the_room_a_scale_down_would(k8s_bin: Path, tmp_path: Path) -> None:
    pods = [PodSpec(i, 0.0, SHORT_S if i == 0 else LONG_S, 0.5, 0.5, 0.1, owner_kind="ReplicaSet", workload="web")
            for i in range(3)]
    workloads = Workloads(pods, WorkloadModel(pdbs=(PdbSpec("web", max_unavailable=1),), pod_startup_s=10.0))
    cluster = up(ClusterOptions(tmp_path / "plane", k8s_bin, disabled_controllers=REPLAYED_CONTROLLERS))
    try:
        api = cluster.admin()
        create_nodes(api, [NodeSpec("lean-0", "lean", 8, 16, PowerCurve.linear(50.0, 150.0))])
        wait_nodes_ready(api, ["lean-0"], 60)
        create_namespace(api, NAMESPACE)
        workloads.install(api, NAMESPACE)
        recording = Recording(SPEEDUP)
        runner = threading.Thread(target=replay, args=(api, NAMESPACE, pods, "default-scheduler", SPEEDUP, cluster.dead),
                                  kwargs={"recording": recording, "workloads": workloads}, daemon=True)
        runner.start()
        path = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/{object_name('web')}"
        samples: list[tuple[float, int, int, int]] = []  # (trace s, expected, healthy, allowed)
        while runner.is_alive() and recording.t0 == 0.0:
            time.sleep(0.05)
        while runner.is_alive():
            status = api.request("GET", path).get("status", {})
            samples.append((recording.trace_s(time.monotonic()), status.get("expectedPods", -1),
                            status.get("currentHealthy", -1), status.get("disruptionsAllowed", -1)))
            time.sleep(0.1)
        runner.join()
    finally:
        down(cluster)
    assert recording.failure is None, recording.failure
    ended = recording.ended[(0, 0)]
    assert ended < LONG_S - 60.0, (ended, samples)
    # From 2 s of wall clock after p-0's end until a minute before the others': the two pods left,
    # both healthy, room for one — and never the ended pod counted expected and unhealthy.
    window = [s for s in samples if ended + 2 * SPEEDUP <= s[0] <= LONG_S - 60.0]
    assert window, samples
    assert all(s[1:] == (2, 2, 1) for s in window), window
    # Before the end, all three running: room for one.
    assert any(s[1:] == (3, 3, 1) for s in samples if s[0] < ended), samples
