"""The standalone scheduler's scoring profile from its configuration (`profile:` entries,
`percentage_of_nodes_to_score`), and the messages bad entries get."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.config.build import build_energy_plugin, build_profile
from scheduler.config.parse import ConfigError, config_from_dict, load_config
from scheduler.plugins.energy.levers import SHIPPED_LEVERS, Levers
from scheduler.plugins.extender import ExtenderScore
from scheduler.plugins.noderesources import MOST_ALLOCATED, NodeResourcesFit


def test_default_profile_is_the_shipped_kubejoule_profile() -> None:
    config = config_from_dict({"scorer": {"delta_p_ref_watts": 40}})
    energy = build_energy_plugin(config)
    profile = build_profile(config, energy)
    assert profile.name == "kubejoule"
    (first, three), (fit, one) = profile.scores
    assert (three, one) == (3, 1)
    assert isinstance(fit, NodeResourcesFit) and fit.strategy == MOST_ALLOCATED
    assert first.levers == SHIPPED_LEVERS  # type: ignore[attr-defined]
    assert first.delta_p_ref_watts == 40.0  # type: ignore[attr-defined]
    assert energy.levers == Levers()  # type: ignore[attr-defined]  # a new plugin: the given one unchanged
    assert [f.name for f in profile.filters] == [
        "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit"
    ]


def test_configured_entries_in_order_with_weights_and_args(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(
        """
profile:
  - name: NodeResourcesFit
    weight: 1
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
  - {name: NodeResourcesBalancedAllocation}
  - {name: TaintToleration, weight: 3}
  - {name: KubejouleEnergy, weight: 5, extender: true}
  - {name: TargetLoadPacking, weight: 0, args: {targetUtilization: 60}}
percentage_of_nodes_to_score: 0
"""
    )
    config = load_config(path)
    assert config.percentage_of_nodes_to_score == 0
    energy = build_energy_plugin(config)
    profile = build_profile(config, energy)
    names = [(plugin.name, weight) for plugin, weight in profile.scores]
    assert names == [
        ("NodeResourcesFit", 1),
        ("NodeResourcesBalancedAllocation", 1),
        ("TaintToleration", 3),
        ("extender:KubejouleEnergy", 5),
        ("TargetLoadPacking", 1),  # weight 0 means 1, as in kube-scheduler
    ]
    fit = profile.scores[0][0]
    assert isinstance(fit, NodeResourcesFit)
    assert fit.strategy == MOST_ALLOCATED and fit.resources == {"cpu": 2, "memory": 1}
    extender = profile.scores[3][0]
    assert isinstance(extender, ExtenderScore) and extender.plugin is energy
    assert profile.plugin("TargetLoadPacking").args.target_utilization_pct == 60  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("KubejouleEnergy", "expected a non-empty list"),
        ([], "expected a non-empty list"),
        (["KubejouleEnergy"], r"profile\[0\]: expected \{name, weight, args\}"),
        ([{"weight": 2}], r"profile\[0\]: 'name' must be a plugin name"),
        ([{"name": "Fancy"}], r"profile\[0\] \(Fancy\): unknown Score plugin 'Fancy'; known: \["),
        ([{"name": "KubejouleEnergy", "weight": -1}], r"\(KubejouleEnergy\): a plugin weight must be >= 0"),
        ([{"name": "KubejouleEnergy", "weight": "5"}], "must be an integer"),
        ([{"name": "KubejouleEnergy", "wieght": 5}], r"unknown key\(s\) \['wieght'\]"),
        ([{"name": "KubejouleEnergy", "args": {"delta": 1}}], r"unknown args \['delta'\]"),
        ([{"name": "KubejouleEnergy", "extender": "yes"}], "'extender' must be true or false"),
        ([{"name": "TaintToleration"}, {"name": "TaintToleration"}], "listed twice"),
        (
            [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Packed"}}}],
            r"profile\[0\] \(NodeResourcesFit\): unknown NodeResourcesFit strategy 'Packed'",
        ),
        (
            [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"resources": [{"name": "gpu"}]}}}],
            "NodeResourcesFit scores",
        ),
        ([{"name": "TargetLoadPacking", "args": {"target": 3}}], r"unknown args \['target'\]"),
    ],
)
def test_bad_profile_entries_are_refused_clearly(profile: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"profile": profile})


@pytest.mark.parametrize("value", [-1, 101, 2.5, "all"])
def test_bad_percentage_is_refused(value: Any) -> None:
    with pytest.raises(ConfigError, match="percentage_of_nodes_to_score: percentageOfNodesToScore"):
        config_from_dict({"percentage_of_nodes_to_score": value})
