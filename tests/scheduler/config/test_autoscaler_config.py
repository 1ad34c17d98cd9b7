"""The scheduler config's `node_groups:` and `node_group_labels:` (curves for node groups)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from common.curves import PowerCurve
from scheduler.config.parse import DEFAULT_GROUP_LABELS, ConfigError, config_from_dict

PROFILE = Path(__file__).resolve().parents[3] / "agent" / "power_profiles" / "ibm-x3550-m3-xeon-x5675.yaml"


def test_node_groups_take_the_curve_forms_and_profile_files() -> None:
    config = config_from_dict(
        {
            "node_groups": {
                "ng-linear": {"model": "linear", "idle_watts": 80, "max_watts": 250},
                "ng-fan": {"model": "fan", "idle_watts": 58, "max_watts": 222, "r": 1.5},
                "m5.2xlarge": {"points": [60, 80, 95, 108, 120, 133, 147, 162, 180, 200, 222]},
                "ng-profile": {"power_profile": str(PROFILE)},
                "ng-profile-bare": str(PROFILE),
            }
        }
    )
    groups = config.node_groups
    assert groups["ng-linear"] == PowerCurve.linear(80, 250)
    assert groups["ng-fan"] == PowerCurve.fan(58, 222, 1.5)
    assert groups["m5.2xlarge"].watts(0.5) == pytest.approx(133)
    assert groups["ng-profile"].watts(0.0) == pytest.approx(58.4)  # the X5675 profile's idle
    assert groups["ng-profile-bare"] == groups["ng-profile"]
    assert config.node_group_labels == DEFAULT_GROUP_LABELS


def test_the_old_profile_key_still_reads_a_power_profile_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kubejoule.scheduler.config"):
        old = config_from_dict({"node_groups": {"ng": {"profile": str(PROFILE)}}})
    assert "node_groups.ng: the key 'profile' is deprecated, use 'power_profile'" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kubejoule.scheduler.config"):
        new = config_from_dict({"node_groups": {"ng": {"power_profile": str(PROFILE)}}})
    assert caplog.text == ""
    assert old.node_groups == new.node_groups and new.node_groups["ng"].watts(0.0) == pytest.approx(58.4)


def test_node_group_labels_are_configurable() -> None:
    config = config_from_dict({"node_group_labels": ["eks.amazonaws.com/nodegroup"]})
    assert config.node_group_labels == ("eks.amazonaws.com/nodegroup",)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"node_groups": {"g": {"power_profile": "/nonexistent/profile.yaml"}}}, "node_groups.g"),
        ({"node_groups": {"g": {"power_profile": "x", "extra": 1}}}, "unknown key"),
        ({"node_groups": {"g": {"profile": "x", "extra": 1}}}, "unknown key"),
        ({"node_groups": {"g": {"model": "cubic", "idle_watts": 1, "max_watts": 2}}}, "node_groups.g"),
        ({"node_groups": {"g": 5}}, "expected a mapping"),
        ({"node_group_labels": "node.kubernetes.io/instance-type"}, "node_group_labels"),
        ({"node_group_labels": [""]}, "node_group_labels"),
    ],
)
def test_bad_node_groups_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)
