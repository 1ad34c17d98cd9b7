"""The headline's targets (issue 14) judged from a results document, and the CLI printing them
for the headline scenario's own policy list."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rl.cmd.cli import main
from rl.evaluation.report import (
    HEADLINE_POLICIES,
    HEADLINE_SCENARIO,
    format_table,
    has_headline,
    headline_targets,
)
from rl.simulation.traces.scenario import SCENARIOS
from tests.rl.cmd.test_rl_cli import inputs  # noqa: F401  (the fixture)


def row(kwh: float, default_kwh: float, slowdown: float = 0.5, p99: float = 10.0, never: int = 0) -> dict[str, Any]:
    return {
        "energy_kwh": kwh,
        "energy_vs_default_pct": 100 * (kwh - default_kwh) / default_kwh,
        "gap_closed_pct": 100 * (default_kwh - kwh) / (default_kwh - 10.0),
        "slowdown_mean": slowdown,
        "slowdown_p99": 0.0,
        "pending_seconds_mean": 1.0,
        "pending_seconds_p99": p99,
        "boots": 3,
        "scale_ups": 2,
        "scale_downs": 1,
        "restarted_pods": 0,
        "unschedulable": 4,
        "never_scheduled": never,
        "runs": [{"never_scheduled": never}],
    }


def document(**rows: dict[str, Any]) -> dict[str, Any]:
    policies = {
        "default@least-waste": row(20.0, 20.0),
        "kubejoule@kubejoule": row(14.0, 20.0),  # 30 % less
        "default+extender:5@kubejoule": row(16.0, 20.0),  # 20 % less
        "mostallocated@least-waste": row(16.0, 20.0),
    }
    policies.update(rows)
    return {"policies": policies, "oracle": {"energy_kwh": 10.0}}


def verdicts(doc: dict[str, Any]) -> list[bool]:
    return [t.met for t in headline_targets(doc)]


def test_each_target_is_judged_on_its_own_numbers():
    assert verdicts(document()) == [True] * 8
    targets = headline_targets(document(**{"default+extender:5@kubejoule": row(17.5, 20.0)}))
    assert [t.met for t in targets] == [True, False, True, True, True, True, True, True]
    assert targets[0].measured.startswith("30.0 % less (14.00 vs 20.00 kWh; 60.0 % of the oracle gap)")
    assert targets[1].measured.startswith("12.5 % less")
    assert targets[-1].measured == "12.5 % less (14.00 vs 16.00 kWh)"
    worse = headline_targets(document(**{"mostallocated@least-waste": row(12.5, 20.0)}))
    assert worse[-1].measured == "12.0 % more (14.00 vs 12.50 kWh)" and not worse[-1].met


@pytest.mark.parametrize(
    ("changed", "index"),
    [
        ({"kubejoule@kubejoule": row(15.1, 20.0)}, 0),  # 24.5 % less
        ({"default+extender:5@kubejoule": row(17.1, 20.0)}, 1),  # 14.5 % less
        ({"kubejoule@kubejoule": row(14.0, 20.0, slowdown=2.51)}, 2),  # +2.01 points
        ({"kubejoule@kubejoule": row(14.0, 20.0, p99=11.01)}, 3),  # +10.1 %
        ({"default+extender:5@kubejoule": row(16.0, 20.0, slowdown=2.51)}, 4),
        ({"default+extender:5@kubejoule": row(16.0, 20.0, p99=11.01)}, 5),
        ({"trimaran@kubejoule": row(19.0, 20.0, never=2)}, 6),  # any run, any policy
        ({"mostallocated@least-waste": row(13.9, 20.0)}, 7),
    ],
)
def test_a_target_missed_by_a_little_is_missed(changed: dict[str, Any], index: int):
    met = verdicts(document(**changed))
    assert [i for i, ok in enumerate(met) if not ok] == [index]


def test_limits_themselves_are_met():
    edge = {
        "kubejoule@kubejoule": row(15.0, 20.0, slowdown=2.5, p99=11.0),  # 25 %, +2, +10 %
        "default+extender:5@kubejoule": row(17.0, 20.0),  # 15 %
    }
    assert all(verdicts(document(**edge)))


def test_the_headline_scenario_runs_its_policies_and_prints_the_targets(inputs, tmp_path, capsys):  # noqa: F811
    nodes, trace = inputs
    assert SCENARIOS[HEADLINE_SCENARIO].policies == HEADLINE_POLICIES
    out = tmp_path / "r.json"
    code = main(
        ["benchmark", "--scenario", HEADLINE_SCENARIO, "--nodes", str(nodes), "--trace", str(trace),
         "--seeds", "1", "--out", str(out), "--no-progress"]
    )
    printed = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out.read_text())
    assert list(doc["policies"]) == list(HEADLINE_POLICIES) and has_headline(doc)
    assert printed.startswith(format_table(doc))
    assert "| kubejoule@kubejoule ≥ 25 % less energy than default@least-waste |" in printed
    assert printed.count(" met |") + printed.count(" MISSED |") == len(headline_targets(doc))


def test_the_headline_scenario_as_an_ablation_runs_its_schedulers_without_expanders(inputs, tmp_path, capsys):  # noqa: F811
    nodes, trace = inputs
    out = tmp_path / "r.json"
    code = main(
        ["benchmark", "--scenario", HEADLINE_SCENARIO, "--nodes", str(nodes), "--trace", str(trace),
         "--power-off-visible", "--seeds", "1", "--out", str(out), "--no-progress"]
    )
    assert code == 0, capsys.readouterr().err
    assert list(json.loads(out.read_text())["policies"]) == [
        "default", "kubejoule", "profile:kubejoule-efficiency.yaml", "default+extender:1", "default+extender:5", "default+extender:12",
        "heuristic", "mostallocated", "peaks", "trimaran", "mostallocated+highnodeutilization",
        "kubejoule+rebalancer",
    ]

