"""Example records for docs/reference/record.md, written by the product's own code: a sample
record with every section (`Snapshot.to_record()`), and the decision log's three line kinds (the
builders of scheduler/decisionlog/schema.py). The values are made up; the shapes are the code's."""

from __future__ import annotations

from typing import Any

from agent.device.gaps import GAP_INCOMPLETE, GAP_UNREADABLE, Gap, Subject
from agent.device.network import InterfaceBytes, NetworkSample, PodNetwork
from agent.kube.metrics_server import MetricsServerData, PodUsage, Usage
from agent.monitor.gpu_power import GpuPower
from agent.monitor.snapshot import (
    ContainerPower,
    PlatformPower,
    PodPower,
    ProcessPower,
    Snapshot,
    VMPower,
    ZonePower,
)
from scheduler.decisionlog.schema import (
    abandoned_record,
    candidate_record,
    decision_record,
    outcome_record,
)
from scheduler.domain.model import NodeTelemetry, PodInfo, Resources

TIME = 1767225600.0
UID = "0f2b8c1e-5d1a-4c47-9a0e-3f5b2d7c9e01"
DECISION_ID = "6f1c2a0d9b7e4f3a8c5d1e2f3a4b5c6d"


def sample_record() -> dict[str, Any]:
    pod = PodPower(
        uid=UID, qos="Burstable", cpu_seconds=3.1, watts=12.4, namespace="shop", name="web-7d9f-x2k4q",
        containers=(ContainerPower("containerd://4c1f9e2ab7d3", 3.1, 12.4),), gpu_watts=60.0, gpu=True,
    )
    snapshot = Snapshot(
        node="node-1", interval_seconds=5.0, timestamp=TIME, source="rapl", node_watts=218.4,
        idle_watts=90.0, active_watts=128.4, idle_source="calibration", cpu_utilization=0.31,
        busy_cpu_seconds=24.8,
        zones=(ZonePower("package-0", "intel-rapl:0", 0, "class/powercap/intel-rapl:0", 110.2, 551.0),
               ZonePower("dram", "intel-rapl:0:0", 0, "class/powercap/intel-rapl:0/intel-rapl:0:0", 8.2, 41.0)),
        pods=(pod,),
        host_watts=21.0,
        vms=(VMPower("vm-a", "5e6f0a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b", 4242, None, 1.2, 4.8),),
        processes=(ProcessPower(4242, "qemu-system-x86", 1.2, 4.8),),
        gaps=(Gap(Subject.CONTAINER, "cgroup cpu.stat unreadable: EACCES", GAP_UNREADABLE, name="containerd://9a0b5d7e1c2f"),
              Gap(Subject.POD, "a container's CPU time is unknown", GAP_INCOMPLETE, name=UID)),
        gpus=(GpuPower(0, "GPU-8a1f2b3c-4d5e-6f70-8192-a3b4c5d6e7f8", "NVIDIA A100-SXM4-40GB", 60.0, "energy", "exclusive"),),
        gpu_unattributed_watts=0.0,
        platform=PlatformPower(watts=262.0, age_seconds=3.2, reading="EnvironmentMetrics",
                               chassis="/redfish/v1/Chassis/1", other_watts=43.6, cpu_watts=158.4,
                               gpu_watts=60.0, energy_kwh=1520.7),
        wall_watts=241.9,
        network=NetworkSample(
            interfaces=(InterfaceBytes("eth0", 91_233_112, 18_220_045),),
            pods=(PodNetwork(UID, False, 4_211_002, 1_022_331),),
        ).to_record({UID: ("shop", "web-7d9f-x2k4q")}),
        metrics_server=MetricsServerData(
            node=Usage(2.41, 7_516_192_768, TIME - 12.0, 15.0),
            pods=(PodUsage(UID, "shop", "web-7d9f-x2k4q", Usage(0.62, 268_435_456, TIME - 12.0, 15.0)),),
            read_at=TIME - 1.0,
        ).to_record(TIME),
    )
    return snapshot.to_record()


def decision_lines() -> list[dict[str, Any]]:
    """A decision (two candidates kept, one with unknowns), its outcome (and one with unknown power),
    an abandoned decision, and the extender's recommendation."""
    pod = PodInfo("shop", "web-7d9f-x2k4q", UID, Resources(cpu_millicores=500, memory_bytes=512 * 2**20))
    candidates = [
        candidate_record("node-1", 87.0, 6.2, "ok", default_score=142, telemetry_age_seconds=3.1,
                         features={"node_idle_watts": 90.0, "node_utilization": 0.31}),
        candidate_record("node-2", 0.0, None, "stale", default_score=150, telemetry_age_seconds=None),
    ]
    decision = decision_record(
        source="standalone", mode="shadow", pod=pod, candidates=candidates, chosen="node-2",
        recommended="node-1", default_choice="node-2", scorer="KubejouleEnergy", max_candidates=16,
        wall_time=TIME, extra={"candidate_count": 2, "feature_schema": "kubejoule.features/v2"},
    )
    decision["id"] = DECISION_ID  # a fresh uuid each time: fixed for the page
    # The extender records a recommendation: kube-scheduler binds, so no chosen node, no default choice.
    recommendation = decision_record(
        source="extender", mode="shadow", pod=pod,
        candidates=[candidate_record("node-1", 87.0, 6.2, "ok", telemetry_age_seconds=3.1)],
        chosen=None, recommended="node-1", default_choice=None, scorer="heuristic", max_candidates=16,
        wall_time=TIME + 30.0, extra={"candidate_count": 2},
    )
    recommendation["id"] = "9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a"
    before = NodeTelemetry("node-2", TIME - 2.0, watts=180.5, source="rapl")
    after = NodeTelemetry("node-2", TIME + 61.0, watts=186.9, source="rapl")
    outcome = outcome_record(DECISION_ID, "node-2", 60.0, before, after, wall_time=TIME + 61.5)
    unknown = outcome_record(DECISION_ID, "node-2", 60.0, None, None, wall_time=TIME + 61.5)
    abandoned = abandoned_record(DECISION_ID, "binding failed: 409 Conflict", wall_time=TIME + 0.2)
    return [decision, outcome, unknown, abandoned, recommendation]
