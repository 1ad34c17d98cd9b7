"""The scheduler prices a cloud node whose agent estimates its power from published coefficients
(`--instance-type`) with that curve, marked estimated, as it prices a calibrated node; and its
configuration takes `{instance_type: PROVIDER:TYPE}` curves, an unknown type being an error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agent.device.hostfs import HostFS
from agent.exporter.prometheus import SnapshotCollector
from agent.monitor.sampler import Sampler
from common.cloud_estimates import lookup
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.config.basics import ConfigError
from scheduler.config.parse import config_from_dict
from scheduler.domain.model import NodeInfo, NodeState, Resources
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.exposition import parse_agent_metrics
from tests.helpers.agent_cli import POWERCAP
from tests.helpers.energy_results import results

NODE = "ip-10-0-0-7"


def agent_exposition(tmp_path: Path, provider: str, name: str) -> str:
    """What `kubejoule-agent run --instance-type PROVIDER:TYPE` serves on a host without RAPL
    (the intel-1s fixture's /proc: u = 0.25 over its 2 s)."""
    trees = []
    for phase in ("before", "after"):
        shutil.copytree(POWERCAP / "intel-1s" / phase / "proc", tmp_path / phase / "proc")
        (tmp_path / phase / "sys").mkdir()
        trees.append(tmp_path / phase)
    profile = lookup(provider, name).profile()
    sampler = Sampler(HostFS(trees[0] / "proc", trees[0] / "sys"), NODE, profile=profile, process_top=0)
    first = sampler.read()
    sampler.fs = HostFS(trees[1] / "proc", trees[1] / "sys")
    collector = SnapshotCollector(model_points=profile.model_points(), model_reading=profile.reading)
    collector.accounts.add(sampler.compute(first, sampler.read(), 2.0))
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def one_core_pod() -> object:
    return pod_info_from_k8s({"metadata": {"name": "p"}, "spec": {"containers": [
        {"resources": {"requests": {"cpu": "1"}}}]}})


def test_an_estimated_cloud_node_is_priced_with_its_published_curve(tmp_path: Path) -> None:
    entry = lookup("aws", "m5.xlarge")
    fetched = parse_agent_metrics(agent_exposition(tmp_path, "aws", "m5.xlarge"))
    t = fetched.samples[NODE].telemetry
    assert t.source == "estimated"
    assert t.curve_points == pytest.approx(entry.curve().as_points())
    assert t.watts == pytest.approx(entry.curve().watts(0.25))
    # 1 core of the 4 vCPUs on CCF's linear curve: (max - idle) / 4, wherever u is below full load
    state = NodeState(NodeInfo(NODE, Resources(cpu_millicores=4000)), telemetry=t, pod_count=1)
    [result] = results(EnergyPlugin(delta_p_ref_watts=20.0), one_core_pod(), [state], t.sample_time + 1)
    assert result.reason == "ok"
    assert result.delta_watts == pytest.approx((entry.max_watts - entry.idle_watts) / 4)


def test_config_curves_from_an_instance_type() -> None:
    config = config_from_dict({
        "curves": {"vm-1": {"instance_type": "gcp:n2-standard-4"}},
        "node_groups": {"Standard_D8as_v4": {"instance_type": "azure:Standard_D8as_v4"}},
    })
    assert config.curves["vm-1"] == lookup("gcp", "n2-standard-4").curve()
    group = config.node_groups["Standard_D8as_v4"]
    entry = lookup("azure", "D8as v4")
    assert (group.idle_watts, group.max_watts) == pytest.approx((entry.idle_watts, entry.max_watts))


@pytest.mark.parametrize(("value", "message"), [
    ("aws:m99.huge", "aws:m99.huge is not in kubejoule's cloud coefficients"),
    ("m5.xlarge", "PROVIDER:TYPE"),
])
def test_config_refuses_an_unknown_or_malformed_instance_type(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        config_from_dict({"node_groups": {"ng": {"instance_type": value}}})
    assert "node_groups.ng" in str(caught.value)
