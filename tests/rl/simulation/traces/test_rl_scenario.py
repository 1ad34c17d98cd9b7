"""Node-group and trace loaders, and the trace generator's documented properties."""

from __future__ import annotations

import math

import pytest
import yaml

from rl.simulation.traces.scenario import (
    ScenarioError,
    format_trace,
    load_node_groups,
    parse_node_groups,
    parse_trace,
    scenario_path,
)
from rl.simulation.traces.tracegen import (
    TraceConfig,
    arrival_rate_per_second,
    bounded_pareto,
    generate_trace,
)


def test_node_groups_expand_and_build_curves():
    nodes = parse_node_groups(
        yaml.safe_load("""
- {name: a, count: 2, cpu_cores: 4, memory_gib: 8, power: {idle_watts: 50, max_watts: 150}}
- {name: b, count: 1, cpu_cores: 8, memory_gib: 16,
   power: {idle_watts: 60, max_watts: 200, curve: fan, r: 1.4}}
- {name: c, count: 1, cpu_cores: 2, memory_gib: 4,
   power: {points: [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}}
""")
    )
    assert [n.name for n in nodes] == ["a-0", "a-1", "b-0", "c-0"]
    assert nodes[0].curve.watts(0.5) == pytest.approx(100.0)
    assert nodes[2].curve.watts(0.5) == pytest.approx(60 + 140 * (1 - 0.5**1.4))
    assert nodes[3].curve.watts(0.25) == pytest.approx(12.5)
    assert nodes[2].node_info().allocatable.cpu_millicores == 8000


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "- {name: a, count: 1, cpu_cores: 0, memory_gib: 8, power: {idle_watts: 1, max_watts: 2}}",
        "- {name: a, count: 1, cpu_cores: 4, memory_gib: 8}",
        "- {name: a, count: 1, cpu_cores: 4, memory_gib: 8, power: {points: [1, 2]}}",
        "- {name: a, count: 1, cpu_cores: 4, memory_gib: 8, power: {idle_watts: 9, max_watts: 2}}",
        "- {name: a, count: -1, cpu_cores: 4, memory_gib: 8, power: {idle_watts: 1, max_watts: 2}}",
    ],
)
def test_bad_node_groups_are_refused(text):
    with pytest.raises(ScenarioError):
        parse_node_groups(yaml.safe_load(text))


def test_trace_round_trip_and_sorting():
    text = (
        "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n"
        "50,10,1,1,0.5\n"
        "10,20,0.5,0.25,1.2\n"
    )
    pods = parse_trace(text)
    assert [(p.index, p.submit_s) for p in pods] == [(0, 10.0), (1, 50.0)]
    assert pods[0].work_core_seconds == pytest.approx(24.0)
    assert parse_trace(format_trace(pods)) == pods


@pytest.mark.parametrize(
    "text",
    [
        "",
        "submit,duration\n1,2\n",
        "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n1,0,1,1,1\n",
        "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n1,5,-1,1,1\n",
        "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n1,5,x,1,1\n",
        "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n1,5,1,1\n",
    ],
)
def test_bad_traces_are_refused(text):
    with pytest.raises(ScenarioError):
        parse_trace(text)


def test_generated_trace_has_its_documented_shape():
    config = TraceConfig(hours=48, arrivals_per_hour=100)
    pods = generate_trace(config, seed=5)
    assert generate_trace(config, seed=5) == pods
    # ~100 per hour on average over whole days.
    assert 0.9 * 4800 < len(pods) < 1.1 * 4800

    # Diurnal: the 6 hours around the peak (14:00) see far more arrivals than around 02:00.
    def around(hour: float) -> int:
        return sum(1 for p in pods if abs(((p.submit_s / 3600 - hour + 12) % 24) - 12) <= 3)

    assert around(14) > 2.5 * around(2)
    # Durations within bounds and heavy-tailed: the longest 10 % carry most of the time.
    durations = sorted(p.duration_s for p in pods)
    assert config.duration_min_s <= durations[0] and durations[-1] <= config.duration_max_s
    top = sum(durations[int(0.9 * len(durations)) :])
    assert top > 0.4 * sum(durations)
    # Usage below and above requests.
    above = sum(1 for p in pods if p.cpu_usage > p.cpu_request) / len(pods)
    assert 0.05 < above < 0.3
    assert all(p.cpu_usage <= config.usage_max_ratio * p.cpu_request + 1e-9 for p in pods)


def test_rate_and_pareto_helpers():
    config = TraceConfig(arrivals_per_hour=3600, diurnal_amplitude=0.5, peak_hour=14)
    assert arrival_rate_per_second(14 * 3600, config) == pytest.approx(1.5)
    assert arrival_rate_per_second(2 * 3600, config) == pytest.approx(0.5)

    class Fixed:
        def __init__(self, u: float) -> None:
            self.u = u

        def random(self) -> float:
            return self.u

    assert bounded_pareto(Fixed(0.0), 10, 100, 1.5) == pytest.approx(10.0)  # type: ignore[arg-type]
    assert bounded_pareto(Fixed(1.0), 10, 100, 1.5) == pytest.approx(100.0)  # type: ignore[arg-type]
    median = bounded_pareto(Fixed(0.5), 10, 1e9, 1.0)  # type: ignore[arg-type]
    assert median == pytest.approx(20.0, rel=1e-6) and not math.isnan(median)


def test_trace_pods_carry_one_container_with_requests_and_no_limits():
    """The peer plugins read containers: a trace pod is one container requesting the trace's
    CPU and memory, without limits (TargetLoadPacking then predicts request × 1.5)."""
    [pod, idle] = parse_trace(
        "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n0,10,0.5,1,0.4\n1,10,0,0,0\n"
    )
    [c] = pod.pod_info().container_resources()
    assert (c.cpu_request_millicores, c.cpu_limit_millicores) == (500, None)
    assert (c.memory_request_bytes, c.memory_limit_bytes) == (2**30, None)
    assert pod.pod_info().requests.cpu_millicores == 500
    [c] = idle.pod_info().container_resources()  # a zero request is an absent key
    assert (c.cpu_request_millicores, c.memory_request_bytes) == (None, None)


def test_daemonsets_parse_and_the_bundled_default():
    from rl.simulation.traces.scenario import (
        DEFAULT_DAEMONSETS_FILE,
        DaemonSetSpec,
        load_daemonsets,
        parse_daemonsets,
    )

    bundled = load_daemonsets(scenario_path(DEFAULT_DAEMONSETS_FILE))
    assert [d.name for d in bundled] == ["kubejoule-agent", "kube-proxy", "cni"]
    agent = bundled[0]
    # The agent DaemonSet's request (20m, 80Mi) and its measured cost (≤ 0.83 % of a core).
    assert (agent.cpu_request, agent.cpu_usage) == (0.02, 0.0083)
    assert agent.requests().cpu_millicores == 20 and agent.requests().pods == 1
    assert parse_daemonsets([]) == [] and parse_daemonsets(None) == []
    assert load_daemonsets(scenario_path("daemonsets-none.yaml")) == []  # the ablation's file
    assert parse_daemonsets([{"name": "x", "cpu_request": 0.1}]) == [DaemonSetSpec("x", 0.1, 0.0)]
    for bad in ({"a": 1}, [{"cpu_request": 1}], [{"name": "x", "cpu_usage": -1}],
                [{"name": "x"}, {"name": "x"}]):
        with pytest.raises(ScenarioError):
            parse_daemonsets(bad)


def test_the_headline_scenario_is_autoscaled_with_always_on_big_nodes():
    from rl.simulation.traces.scenario import SCENARIOS

    scenario = SCENARIOS["heterogeneous-autoscaler"]
    assert scenario.autoscaler and scenario.power_off_after_s is None
    nodes = load_node_groups(scenario_path(scenario.nodes_file))
    always = sorted(n.name for n in nodes if n.always_on)
    assert always == ["x3550-x5670-0", "x3550-x5675-0"]
    assert all(n.standby_watts > 0 for n in nodes)
