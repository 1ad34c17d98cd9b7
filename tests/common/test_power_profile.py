"""Loading power profiles: the minimal form, every model, and errors that name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from common.power_profile import SCHEMA, PowerProfileError, load_power_profile, parse_power_profile

POINTS = [58.4, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222]


def write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_idle_only_profile_has_no_curve(tmp_path: Path) -> None:
    profile = load_power_profile(write(tmp_path, {"idle_watts": 41.5}))
    assert profile.idle_watts == 41.5
    assert profile.curve is None and profile.estimate_watts(0.5) is None
    assert profile.model_points() == ()
    assert profile.path == str(tmp_path / "profile.yaml")


def test_points_profile_interpolates_between_levels(tmp_path: Path) -> None:
    profile = load_power_profile(write(tmp_path, {"schema": SCHEMA, "idle_watts": 58.4, "points": POINTS, "model": "points"}))
    assert profile.estimate_watts(0.0) == pytest.approx(58.4)
    assert profile.estimate_watts(0.15) == pytest.approx((98 + 109) / 2)
    assert profile.estimate_watts(1.0) == pytest.approx(222)
    assert profile.max_watts == pytest.approx(222)
    utilizations = [u for u, _ in profile.model_points()]
    assert utilizations == pytest.approx([i / 10 for i in range(11)])


def test_fan_profile_uses_its_exponent() -> None:
    profile = parse_power_profile({"idle_watts": 40, "max_watts": 120, "model": "fan", "parameters": {"r": 1.5}})
    assert profile.estimate_watts(0.5) == pytest.approx(40 + 80 * (1.0 - 0.5**1.5))


def test_max_watts_alone_means_a_linear_curve() -> None:
    profile = parse_power_profile({"idle_watts": 40, "max_watts": 100})
    assert profile.model == "linear"
    assert profile.estimate_watts(0.25) == pytest.approx(55)


def test_wall_correction_maps_node_watts_to_wall_watts() -> None:
    profile = parse_power_profile({"idle_watts": 40, "wall_correction": {"intercept_watts": 30, "slope": 1.1}})
    assert profile.wall_watts(100.0) == pytest.approx(140.0)
    assert profile.wall_watts(None) is None
    assert parse_power_profile({"idle_watts": 40}).wall_watts(100.0) is None


def test_a_platform_profile_gives_the_cpu_side_its_rapl_section() -> None:
    profile = parse_power_profile({"idle_watts": 80, "max_watts": 200, "reading": "platform",
                             "rapl": {"idle_watts": 30, "max_watts": 120}})
    assert profile.model_points()[0] == (0.0, 80.0)  # the platform curve is what is exported
    assert profile.cpu_idle_watts == 30 and profile.estimate_cpu_watts(0.5) == pytest.approx(75.0)
    without = parse_power_profile({"idle_watts": 80, "max_watts": 200, "reading": "platform"})
    assert without.cpu_idle_watts is None and without.estimate_cpu_watts(0.5) is None  # no CPU-side fit
    rapl = parse_power_profile({"idle_watts": 30, "max_watts": 120})
    assert rapl.cpu is rapl and rapl.estimate_cpu_watts(0.5) == pytest.approx(75.0)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"max_watts": 100}, "'idle_watts' is required"),
        ({"idle_watts": "forty"}, "'idle_watts' must be a number"),
        ({"idle_watts": -3}, "'idle_watts' must be at least 0"),
        ({"idle_watts": 40, "max_watts": 30}, "'max_watts' (30) is below 'idle_watts'"),
        ({"idle_watts": 40, "points": POINTS[:10]}, "'points' must be a list of 11 numbers"),
        ({"idle_watts": 40, "points": [*POINTS[:10], "x"]}, "'points' item 10 (100 %)"),
        ({"idle_watts": 40, "model": "cubic"}, "'model' must be one of"),
        ({"idle_watts": 40, "model": "fan", "max_watts": 90}, "needs 'parameters: {r: …}'"),
        ({"idle_watts": 40, "model": "fan", "max_watts": 90, "parameters": {"r": 3}}, "'parameters.r' must be between"),
        ({"idle_watts": 40, "model": "points"}, "model 'points' needs the field 'points'"),
        ({"idle_watts": 40, "schema": "kubejoule.calibration/v0"}, "'schema' must be"),
        ({"idle_watts": 40, "wall_correction": {"slope": 1.1}}, "'intercept_watts' is required"),
        ({"idle_watts": 40, "cores": 0}, "'cores' must be a positive integer"),
        (["idle_watts", 40], "expected a mapping"),
        ({"idle_watts": 40, "reading": "wall"}, "'reading' must be rapl or platform"),
        ({"idle_watts": 40, "rapl": {"idle_watts": 30}}, "'rapl' belongs to a profile with 'reading: platform'"),
        ({"idle_watts": 40, "reading": "platform", "rapl": {"max_watts": 90}}, "rapl: field 'idle_watts' is required"),
        ({"idle_watts": 40, "reading": "platform", "rapl": [1, 2]}, "rapl: expected a mapping"),
    ],
)
def test_bad_fields_are_named(doc: Any, field: str) -> None:
    with pytest.raises(PowerProfileError) as info:
        parse_power_profile(doc)
    assert field in str(info.value)


def test_unreadable_and_invalid_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(PowerProfileError, match="cannot read it"):
        load_power_profile(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("idle_watts: [1,\n")
    with pytest.raises(PowerProfileError, match=r"bad\.yaml: not valid YAML"):
        load_power_profile(bad)
