"""TelemetryStore against a real `kubejoule-agent run` on a fixture tree, directly and through a
real Prometheus (Debian's binary) scraping that agent; then the scorer on what it read."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from common.curves import PowerCurve
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.model import NodeInfo, NodeState, Resources
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.discovery import StaticTargets
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.sources import AgentScrapeSource, PrometheusSource
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.agent_proc import WORKLOADS, AgentProcess
from tests.helpers.energy_results import results
from tests.helpers.prometheus import prometheus_server
from tests.helpers.standalone_harness import wait_for

TREE = WORKLOADS / "v2-systemd-containerd" / "before"
NODE = "worker-7"
CURVE = PowerCurve.linear(40.0, 200.0)  # what the power profile below says
WATTS, UTILIZATION = 120.0, 0.5  # what the test drives the agent's counters to


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "calibration.yaml"
    path.write_text(
        "schema: kubejoule.calibration/v1\nidle_watts: 40.0\nmax_watts: 200.0\nmodel: linear\n"
    )
    return path


def _read_one_sample(agent: AgentProcess, store: TelemetryStore) -> tuple[NodeSample, str]:
    """Refresh the store between two identical scrapes of the agent, so the store's view and the
    returned exposition describe the same sample (the agent publishes a new one every 0.25 s,
    and under load the counters driven between samples jitter from one to the next)."""
    for _ in range(50):
        before = agent.scrape()
        store.refresh_once()
        if agent.scrape() == before:
            sample = store.get(NODE)
            assert sample is not None, store.last_errors
            return sample, before
    raise AssertionError("the agent published a sample during every refresh")


def _near_the_driven_values(sample: NodeSample | None) -> bool:
    t = sample.telemetry if sample is not None else None
    return (
        t is not None
        and t.watts is not None
        and t.utilization is not None
        and abs(t.watts - WATTS) <= 0.15 * WATTS
        and abs(t.utilization - UTILIZATION) <= 0.08
    )


def test_store_reads_a_real_agent_directly_and_through_prometheus(profile: Path) -> None:
    if not TREE.is_dir():
        pytest.skip(f"agent fixture tree {TREE} is missing")
    with AgentProcess(TREE, interval=0.25, node=NODE, args=("--power-profile", str(profile))) as agent:
        agent.drive(node_watts=WATTS, utilization=UTILIZATION, cpus=4)
        agent.wait_samples(3)
        direct = TelemetryStore(
            [AgentScrapeSource(StaticTargets({NODE: agent.url}))], node_cores=lambda: {NODE: 4.0}
        )
        # The store holds exactly what the agent exposed for one sample …
        sample, text = _read_one_sample(agent, direct)
        t = sample.telemetry
        assert t.source == "rapl"
        assert t.watts == agent.value("kubejoule_node_power_watts", text, source="rapl")
        assert t.utilization == agent.value("kubejoule_node_cpu_utilization_ratio", text)
        assert t.sample_time == agent.value("kubejoule_sample_timestamp_seconds", text)
        assert t.cores == 4.0
        assert t.curve_points == pytest.approx(CURVE.as_points())
        assert t.age_seconds(time.time()) < 5.0
        pods_seen = len(agent.samples("kubejoule_pod_power_watts", text))
        assert pods_seen > 0 and sample.pod_count == pods_seen
        # … and those are the watts and load the test drives (waited for: a sample the driver
        # missed under load reads low, the next one high).
        wait_for(lambda: _near_the_driven_values(_read_one_sample(agent, direct)[0]), 20,
                 f"the agent's samples near {WATTS} W at u = {UTILIZATION}")
        direct.stop()

        with prometheus_server([agent.url + "/metrics"], scrape_interval="1s") as prom:
            prom.wait_for_series("kubejoule_node_power_model_watts", count=11)
            prom.wait_for_series("kubejoule_sample_timestamp_seconds")
            via_prometheus = TelemetryStore([PrometheusSource(prom.url)], node_cores=lambda: {NODE: 4.0})

            def refreshed() -> NodeSample | None:
                via_prometheus.refresh_once()
                return via_prometheus.get(NODE)

            other = wait_for(lambda: (s := refreshed()) is not None and _near_the_driven_values(s) and s,
                             20, f"Prometheus serving a sample near {WATTS} W")
            via_prometheus.stop()
        assert other.telemetry.source == "rapl"
        assert other.telemetry.curve_points == pytest.approx(CURVE.as_points())
        assert other.telemetry.age_seconds(time.time()) < 10.0
        assert other.pod_count == pods_seen
    assert agent.returncode == 0

    # The scorer on the live numbers: the profile's line is 160 W per unit of utilization, so a
    # 1-core pod on 4 cores costs 40 W wherever u sits below saturation.
    state = NodeState(NodeInfo(NODE, Resources(cpu_millicores=4000)), telemetry=t, pod_count=2)
    pod = pod_info_from_k8s({"metadata": {"name": "p"}, "spec": {"containers": [
        {"resources": {"requests": {"cpu": "1"}}}]}})
    [result] = results(EnergyPlugin(delta_p_ref_watts=80.0), pod, [state], t.sample_time + 1)
    assert result.reason == "ok"
    assert result.delta_watts == pytest.approx(40.0)
    assert result.score == pytest.approx(50.0)
