"""TelemetryStore against a real `kubejoule-agent run` on a fixture tree, directly and through a
real Prometheus (Debian's binary) scraping that agent; then the scorer on what it read."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.curves import PowerCurve
from scheduler.model import NodeInfo, NodeState, PodInfo, Resources
from scheduler.scorer import HeuristicScorer
from scheduler.telemetry import AgentScrapeSource, PrometheusSource, StaticTargets, TelemetryStore
from tests.helpers.agent_proc import WORKLOADS, AgentProcess
from tests.helpers.prometheus import prometheus_server

TREE = WORKLOADS / "v2-systemd-containerd" / "before"
NODE = "worker-7"
CURVE = PowerCurve.linear(40.0, 200.0)  # what the calibration profile below says


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "calibration.yaml"
    path.write_text(
        "schema: kubejoule.calibration/v1\nidle_watts: 40.0\nmax_watts: 200.0\nmodel: linear\n"
    )
    return path


def test_store_reads_a_real_agent_directly_and_through_prometheus(profile: Path) -> None:
    if not TREE.is_dir():
        pytest.skip(f"agent fixture tree {TREE} is missing")
    with AgentProcess(TREE, interval=0.25, node=NODE, args=("--calibration", str(profile))) as agent:
        agent.drive(node_watts=120.0, utilization=0.5, cpus=4)
        agent.wait_samples(3)
        direct = TelemetryStore(
            [AgentScrapeSource(StaticTargets({NODE: agent.url}))], node_cores=lambda: {NODE: 4.0}
        )
        direct.refresh_once()
        direct.stop()
        sample = direct.get(NODE)
        assert sample is not None, direct.last_errors
        t = sample.telemetry
        assert t.source == "rapl"
        assert t.watts == pytest.approx(120.0, rel=0.15)
        assert t.utilization == pytest.approx(0.5, abs=0.08)
        assert t.cores == 4.0
        assert t.curve_points == pytest.approx(CURVE.as_points())
        assert t.age_seconds(time.time()) < 5.0
        pods_seen = len(agent.samples("kubejoule_pod_power_watts"))
        assert sample.pod_count == pods_seen

        with prometheus_server([agent.url + "/metrics"], scrape_interval="1s") as prom:
            prom.wait_for_series("kubejoule_node_power_model_watts", count=11)
            prom.wait_for_series("kubejoule_sample_timestamp_seconds")
            via_prometheus = TelemetryStore([PrometheusSource(prom.url)], node_cores=lambda: {NODE: 4.0})
            via_prometheus.refresh_once()
            via_prometheus.stop()
        other = via_prometheus.get(NODE)
        assert other is not None, via_prometheus.last_errors
        assert other.telemetry.source == "rapl"
        assert other.telemetry.watts == pytest.approx(120.0, rel=0.15)
        assert other.telemetry.curve_points == pytest.approx(CURVE.as_points())
        assert other.telemetry.age_seconds(time.time()) < 10.0
        assert other.pod_count == pods_seen
    assert agent.returncode == 0

    # The scorer on the live numbers: the profile's line is 160 W per unit of utilization, so a
    # 1-core pod on 4 cores costs 40 W wherever u sits below saturation.
    state = NodeState(NodeInfo(NODE, Resources(cpu_millicores=4000)), telemetry=t, pod_count=2)
    pod = PodInfo.from_k8s({"metadata": {"name": "p"}, "spec": {"containers": [
        {"resources": {"requests": {"cpu": "1"}}}]}})
    [result] = HeuristicScorer(delta_p_ref_watts=80.0).score(pod, [state], t.sample_time + 1)
    assert result.reason == "ok"
    assert result.delta_watts == pytest.approx(40.0)
    assert result.score == pytest.approx(50.0)
