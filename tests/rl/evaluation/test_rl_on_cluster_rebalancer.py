"""`POLICY+rebalancer` on the cluster, the parts that need no cluster (the run itself:
tests/e2e/test_e2e_rebalancer_fidelity.py): which policies are refused, the live rebalancer's
settings — the simulator's `+rebalancer` settings with their trace times ÷ the speedup — and its
configuration file as the scheduler's own parser reads it; and what the simulated side sees
without agents (nothing to act on)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from rl.cluster.rebalancer import SCALED, rebalancer_config, scaled_settings
from rl.evaluation.benchmark import run_once
from rl.evaluation.on_cluster_policy import check_on_cluster_policy, rebalancer_settings
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import PodSpec, parse_node_groups
from scheduler.config.parse import load_config

NODES = parse_node_groups([
    {"name": "old", "count": 1, "cpu_cores": 4, "memory_gib": 8, "power": {"idle_watts": 150, "max_watts": 300}},
    {"name": "new", "count": 1, "cpu_cores": 8, "memory_gib": 16, "power": {"idle_watts": 50, "max_watts": 120}},
])


@pytest.mark.parametrize("policy", ["kubejoule+rebalancer", "default+rebalancer", "default+extender:5+rebalancer",
                                    "mostallocated+rebalancer"])
def test_a_policy_with_the_rebalancer_is_accepted(policy: str) -> None:
    check_on_cluster_policy(policy)


@pytest.mark.parametrize(("policy", "message"), [
    ("mostallocated+highnodeutilization", r"\+highnodeutilization has no process here"),
    ("kubejoule+rebalancer+rebalancer", "one \\+rebalancer at most"),
    ("peaks+rebalancer", "no real scheduler"),
    ("kubejoule+rebalancer:/nonexistent/settings.yaml", "/nonexistent/settings.yaml"),
])
def test_what_the_cluster_cannot_run_is_refused_naming_it(policy: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_on_cluster_policy(policy)


def test_the_static_settings_are_the_simulators_with_trace_times_divided_by_the_speedup() -> None:
    settings = rebalancer_settings("rebalancer", ClusterModel(workloads=WorkloadModel(pod_startup_s=12.0)), 30.0)
    assert settings["mode"] == "active"
    assert settings["interval_seconds"] == pytest.approx(2.0)  # 60 s
    assert settings["node_cooldown_seconds"] == pytest.approx(60.0)  # 1800 s
    assert settings["pod_startup_seconds"] == pytest.approx(0.4)  # the workloads' 12 s
    assert settings["scale_down_unneeded_seconds"] == pytest.approx(20.0)  # the default 600 s
    assert settings["scale_down_utilization_threshold"] == 0.5
    assert settings["max_clock_jump_seconds"] == 5.0  # not a trace time
    assert settings["max_evictions_per_interval"] == 3


def test_the_autoscaled_settings_take_the_runs_autoscaler_model() -> None:
    model = ClusterModel(autoscaler=AutoscalerModel(scale_down_unneeded_s=300.0, utilization_threshold=0.3))
    settings = rebalancer_settings("rebalancer", model, 10.0)
    assert settings["scale_down_unneeded_seconds"] == pytest.approx(30.0)
    assert settings["scale_down_utilization_threshold"] == 0.3


def test_a_settings_file_is_read_then_scaled(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump({"rebalancer": {"mode": "shadow", "interval_seconds": 120, "margin": 0.5}}))
    settings = rebalancer_settings(f"rebalancer:{path}", ClusterModel(), 40.0)
    assert settings["interval_seconds"] == pytest.approx(3.0)
    assert settings["margin"] == 0.5
    assert settings["mode"] == "active"  # the benchmark's +rebalancer acts


def test_scaling_refuses_a_speedup_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        scaled_settings({"interval_seconds": 60.0}, 0.0)
    assert set(SCALED) <= set(rebalancer_settings("rebalancer", ClusterModel(), 1.0))


def test_the_config_file_is_what_the_scheduler_parses(tmp_path: Path) -> None:
    settings = rebalancer_settings("rebalancer", ClusterModel(), 30.0)
    path = tmp_path / "rebalancer.yaml"
    path.write_text(yaml.safe_dump(rebalancer_config(tmp_path / "admin.kubeconfig", NODES, settings)))
    config = load_config(str(path))
    assert config.rebalancer.active
    assert config.rebalancer.interval_seconds == pytest.approx(2.0)
    assert config.rebalancer.scale_down_unneeded_seconds == pytest.approx(20.0)
    assert set(config.curves) == {n.name for n in NODES}
    old = next(n for n in NODES if n.name.startswith("old"))
    assert config.curves[old.name].watts(0.0) == pytest.approx(150.0)
    assert config.telemetry.node_cores[old.name] == 4


def _moving_trace() -> list[PodSpec]:
    """A ReplicaSet's 1-core pods arriving every 10 s, two 3-core batch pods first (900 s): the
    batch pods end, and the web pods left on the costly 4-core node fit the cheap 8-core one."""
    web = [PodSpec(0, 10.0 * k, 3000.0, 1.0, 1.0, 0.8, owner_kind="ReplicaSet", workload="web") for k in range(12)]
    batch = [PodSpec(0, 0.0, 900.0, 3.0, 3.0, 2.5, owner_kind="ReplicaSet", workload="batch") for _ in range(2)]
    ordered = sorted([*web, *batch], key=lambda p: p.submit_s)
    return [replace(p, index=i) for i, p in enumerate(ordered)]


def test_without_agents_the_simulated_rebalancer_evicts_nothing_and_with_them_it_does() -> None:
    """What the on-cluster fidelity compares (rl/evaluation/fidelity.py `without_agents`): with
    the nodes' telemetry the simulated rebalancer moves the web pods; with every agent missing and
    the curves configured, as on KWOK nodes, it skips every node (`telemetry`) and evicts none."""
    trace = _moving_trace()
    agents = run_once(NODES, trace, "default+rebalancer", 0, cluster=ClusterModel(telemetry=None))
    none = run_once(NODES, trace, "default+rebalancer", 0,
                    cluster=ClusterModel(telemetry=None, telemetry_dropout=1.0, configured_curves=True))
    assert agents.evictions > 0
    assert none.evictions == 0
