"""The `modern-autoscaler` scenario (issue 33 item 5): its node groups are the SPECpower_ssj2008
results they cite, their curves are the straight line between the published idle and 100 %
points, everything but the hardware is the old headline's, and it runs."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import pytest
import yaml

from rl.cmd.benchmark_cli import scenario_setup
from rl.evaluation.benchmark import plan_benchmark, run_task
from rl.simulation.traces.scenario import SCENARIOS, load_node_groups, scenario_path

SPEC_LIST = "via CCF ccf-coefficients data/SPECpower-2026-03-09.csv (Apache-2.0)"


@dataclass(frozen=True)
class Cited:
    """One published SPECpower_ssj2008 result, as data/SPECpower-2026-03-09.csv lists it."""

    system: str  # the list's "Hardware Vendor" and "System"
    cpu: str
    published: str  # the list's "Published" month
    ssj_ops_per_watt: str  # the list's "Result", as the source string writes it
    idle_watts: float  # "avg. watts @ active idle"
    max_watts: float  # "avg. watts @ 100%"
    threads: int  # "Total Threads"
    memory_gb: int  # "Total Memory (GB)"


# Transcribed from the list by hand, independently of the YAML: a figure that drifts in either
# place fails here.
CITED = {
    "r7615-epyc9654p": Cited(
        "Dell Inc. PowerEdge R7615 (AMD EPYC 9654P, 2.40 GHz)", "AMD EPYC 9654P", "Sep-2023",
        "24,677", 77.4, 347.0, 192, 192,
    ),
    "dl320g11-xeon8581v": Cited(
        "Hewlett Packard Enterprise ProLiant DL320 Gen11", "Intel Xeon Platinum 8581V",
        "May-2024", "14,912", 80.7, 323.0, 120, 128,
    ),
    "sys521e-xeon6414u": Cited(
        "Supermicro Inc SuperServer SYS-521E-WR", "Intel Xeon Gold 6414U", "Sep-2023", "10,322",
        87.6, 347.0, 64, 128,
    ),
    "as3015a-epyc4584px": Cited(
        "Supermicro SuperServer AS-3015A-i", "AMD EPYC 4584PX", "May-2024", "20,240",
        43.5, 112.0, 32, 64,
    ),
    "dl360g10-xeon8280": Cited(
        "Hewlett Packard Enterprise ProLiant DL360 Gen10", "Intel Xeon Platinum 8280", "Apr-2019",
        "12,384", 39.4, 217.0, 56, 48,
    ),
}
OLD_GENERATION = "dl360g10-xeon8280"

SCENARIO = SCENARIOS["modern-autoscaler"]


def _groups() -> list[dict]:
    return yaml.safe_load(scenario_path(SCENARIO.nodes_file).read_text())


def _year(month: str) -> int:
    return int(month.split("-")[1])


def test_every_group_is_a_cited_result_and_nothing_else():
    assert [g["name"] for g in _groups()] == list(CITED)


@pytest.mark.parametrize("name", list(CITED))
def test_a_groups_curve_and_size_are_its_published_result(name):
    cited = CITED[name]
    nodes = [n for n in load_node_groups(scenario_path(SCENARIO.nodes_file)) if n.group == name]
    assert nodes
    for node in nodes:
        curve = node.curve
        assert curve.model == "linear"  # the documented approximation: only two points published
        assert curve.watts(0.0) == cited.idle_watts
        assert curve.watts(1.0) == cited.max_watts
        assert curve.watts(0.5) == pytest.approx((cited.idle_watts + cited.max_watts) / 2)
        assert node.cpu_cores == cited.threads
        assert node.memory_gib == cited.memory_gb


@pytest.mark.parametrize("name", list(CITED))
def test_a_groups_source_names_the_result(name):
    cited = CITED[name]
    (group,) = [g for g in _groups() if g["name"] == name]
    source = group["source"]
    assert source.startswith("SPECpower_ssj2008 result, ")
    for part in (cited.system, f"CPU {cited.cpu}", f"{cited.ssj_ops_per_watt} overall ssj_ops/watt",
                 f"published {cited.published}", SPEC_LIST):
        assert part in source, part


def test_todays_servers_beside_one_older_generation():
    years = {name: _year(c.published) for name, c in CITED.items()}
    assert 2019 <= years.pop(OLD_GENERATION) <= 2020
    assert all(2022 <= year <= 2026 for year in years.values())
    nodes = load_node_groups(scenario_path(SCENARIO.nodes_file))
    assert sorted(n.name for n in nodes if n.always_on) == [f"{OLD_GENERATION}-0"]
    assert all(n.standby_watts > 0 for n in nodes)


def test_only_the_hardware_differs_from_the_old_headline():
    old = SCENARIOS["heterogeneous-autoscaler"]
    assert old.nodes_file == "heterogeneous-autoscaler.yaml"  # the old cluster stays as it was
    same = replace(SCENARIO, name=old.name, nodes_file=old.nodes_file, description=old.description)
    assert same == old


def test_the_headline_trace_fits():
    nodes, pods, _ = scenario_setup(SCENARIO.name)
    assert max(p.cpu_request for p in pods) <= min(n.cpu_cores for n in nodes)
    assert max(p.mem_request_gib for p in pods) <= min(n.memory_gib for n in nodes)
    events = sorted([(p.submit_s, p.cpu_request) for p in pods]
                    + [(p.submit_s + p.duration_s, -p.cpu_request) for p in pods])
    running = peak = 0.0
    for _, cores in events:
        running += cores
        peak = max(peak, running)
    assert peak <= 0.5 * sum(n.cpu_cores for n in nodes)


def test_the_file_says_the_curves_are_linear_between_the_two_published_points():
    text = scenario_path(SCENARIO.nodes_file).read_text()
    assert re.search(r"straight line between the two\s+#?\s*published points", text)
    assert "not invented" in text


@pytest.mark.parametrize("policy", ["default@least-waste", "mostallocated@kubejoule"])
def test_it_loads_and_runs(policy):
    nodes, pods, cluster = scenario_setup(SCENARIO.name)
    pods = [p for p in pods if p.submit_s < 12 * 3600.0]  # the morning: past the floor's cores
    plan = plan_benchmark(nodes, pods, [policy], 1, cluster, vary_workload=True)
    summary = run_task(plan, plan.tasks[0]).summary
    assert summary.never_scheduled == 0
    assert summary.boots > 0  # the autoscaler grew a modern group past the old node
    floor_watts = CITED[OLD_GENERATION].idle_watts
    assert summary.energy_joules > floor_watts * summary.end_s
