"""The agent with a power profile: calibrated idle power with RAPL, estimated node power
without it, wall power from the correction; and the example profiles shipped with the agent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from agent.device.hostfs import HostFS
from agent.exporter.prometheus import SnapshotCollector
from agent.monitor.sampler import Sampler
from common.curves import PowerCurve
from common.power_profile import SCHEMA, load_power_profile
from tests.helpers.agent_cli import POWERCAP, machine_rapl_zones, replay_record, run_agent

PROFILES = Path(__file__).resolve().parents[3] / "agent" / "power_profiles"
EXAMPLES = sorted(PROFILES.glob("*.yaml"))
POINTS = [41.6, 46.7, 52.3, 57.9, 65.4, 73, 80.7, 89.5, 99.6, 105, 113]


def write_profile(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump({"schema": SCHEMA, **fields}))
    return path


def without_powercap(tmp_path: Path, case: str = "intel-1s") -> tuple[Path, Path]:
    """The fixture's before/after trees with /proc/stat only: a host without RAPL."""
    trees = []
    for phase in ("before", "after"):
        tree = tmp_path / phase
        shutil.copytree(POWERCAP / case / phase / "proc", tree / "proc")
        (tree / "sys").mkdir()
        trees.append(tree)
    return trees[0], trees[1]


def test_with_rapl_idle_is_the_calibrated_static_power(tmp_path: Path) -> None:
    profile = write_profile(tmp_path, idle_watts=10.0, points=POINTS)
    record = replay_record(POWERCAP / "intel-1s/before", POWERCAP / "intel-1s/after", 2.0,
                           "--power-profile", str(profile))
    assert record["source"] == "rapl"
    assert record["node_watts"] == pytest.approx(27.5)  # measured, never replaced by the curve
    assert record["idle_source"] == "calibration"
    assert record["idle_watts"] == pytest.approx(10.0)
    assert record["active_watts"] == pytest.approx(17.5)


def test_without_rapl_node_power_is_the_curve_at_measured_utilization(tmp_path: Path) -> None:
    before, after = without_powercap(tmp_path)
    profile = write_profile(tmp_path, idle_watts=41.6, points=POINTS, model="points")
    record = replay_record(before, after, 2.0, "--power-profile", str(profile))
    # the fixture's /proc/stat: u = 0.25, halfway between the 20 % and 30 % points
    assert record["cpu_utilization"] == pytest.approx(0.25)
    assert record["source"] == "estimated"
    assert record["node_watts"] == pytest.approx((52.3 + 57.9) / 2)
    assert record["idle_source"] == "calibration"
    assert record["idle_watts"] == pytest.approx(41.6)
    assert record["active_watts"] == pytest.approx((52.3 + 57.9) / 2 - 41.6)
    assert not any(g["what"] == "node" for g in record["gaps"])
    assert "wall_watts" not in record


def test_estimated_wall_power_follows_the_correction(tmp_path: Path) -> None:
    before, after = without_powercap(tmp_path)
    profile = write_profile(tmp_path, idle_watts=40.0, max_watts=100.0, model="fan", parameters={"r": 1.4},
                            wall_correction={"intercept_watts": 30.0, "slope": 1.1})
    record = replay_record(before, after, 2.0, "--power-profile", str(profile))
    node = PowerCurve.fan(40.0, 100.0, 1.4).watts(0.25)
    assert record["node_watts"] == pytest.approx(node)
    assert record["wall_watts"] == pytest.approx(30.0 + 1.1 * node)
    # and with RAPL, the correction applies to the measured watts
    rapl = replay_record(POWERCAP / "intel-1s/before", POWERCAP / "intel-1s/after", 2.0,
                         "--power-profile", str(profile))
    assert rapl["wall_watts"] == pytest.approx(30.0 + 1.1 * 27.5)


@pytest.mark.parametrize("profile_fields", [{"idle_watts": 40.0}, None])
def test_without_rapl_and_without_a_curve_node_power_stays_unknown(tmp_path: Path, profile_fields: Any) -> None:
    before, after = without_powercap(tmp_path)
    extra = ["--power-profile", str(write_profile(tmp_path, **profile_fields))] if profile_fields else []
    record = replay_record(before, after, 2.0, *extra)
    assert record["source"] == "none" and record["node_watts"] is None
    assert any(g["what"] == "node" and "powercap" in g["reason"] for g in record["gaps"])


def test_failing_rapl_is_a_gap_not_an_estimate(tmp_path: Path) -> None:
    profile = write_profile(tmp_path, idle_watts=41.6, points=POINTS)
    record = replay_record(POWERCAP / "garbage/before", POWERCAP / "garbage/after", 2.0, "--power-profile", str(profile))
    assert record["source"] == "none" and record["node_watts"] is None
    assert any("not a number" in g["reason"] for g in record["gaps"])


def test_bad_profile_is_a_usage_error_naming_the_field(tmp_path: Path) -> None:
    profile = write_profile(tmp_path, idle_watts=40.0, points=[1, 2, 3])
    proc = run_agent("replay", str(POWERCAP / "intel-1s/before"), str(POWERCAP / "intel-1s/after"),
                     "--interval", "2", "--power-profile", str(profile))
    assert proc.returncode == 2
    assert "'points' must be a list of 11 numbers" in proc.stderr


def test_once_on_this_machine_with_an_example_profile_is_labelled_estimated() -> None:
    if machine_rapl_zones():
        pytest.skip(f"this machine has RAPL zones: {', '.join(machine_rapl_zones())}")
    example = PROFILES / "ibm-x3550-m3-xeon-x5675.yaml"
    proc = run_agent("once", "--interval", "0.3", "--json", "--power-profile", str(example))
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    curve = load_power_profile(example).curve
    assert curve is not None
    assert record["source"] == "estimated"
    assert record["node_watts"] == pytest.approx(curve.watts(record["cpu_utilization"]))
    assert record["idle_source"] == "calibration" and record["idle_watts"] == pytest.approx(58.4)


def test_there_are_example_profiles() -> None:
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_profiles_are_marked_and_cite_their_specpower_result(path: Path) -> None:
    profile = load_power_profile(path)
    doc = profile.document
    assert profile.example is True
    assert "EXAMPLE" in path.read_text().splitlines()[0]
    source = doc["source"]
    assert source["benchmark"] == "SPECpower_ssj2008"
    for key in ("vendor", "system", "cpu", "result_date", "result", "url"):
        assert source[key], key
    assert source["result"] in source["url"] and source["url"].startswith("https://www.spec.org/power_ssj2008/results/")
    assert len(doc["points"]) == 11
    assert profile.curve is not None and profile.model == "points"
    assert profile.idle_watts == doc["points"][0] and profile.max_watts == doc["points"][-1]
    assert all(b >= a for a, b in zip(doc["points"], doc["points"][1:], strict=False))


def test_exporter_labels_estimated_power_and_exports_the_model_and_wall_power(tmp_path: Path) -> None:
    before_tree, after_tree = without_powercap(tmp_path)
    profile = load_power_profile(write_profile(tmp_path, idle_watts=41.6, points=POINTS, model="points",
                                         wall_correction={"intercept_watts": 30.0, "slope": 1.1}))
    before = Sampler(HostFS(before_tree / "proc", before_tree / "sys"), "n1").read()
    sampler = Sampler(HostFS(after_tree / "proc", after_tree / "sys"), "n1", profile=profile)
    snapshot = sampler.compute(before, sampler.read(), 2.0)
    registry = CollectorRegistry()
    collector = SnapshotCollector(model_points=profile.model_points())
    collector.accounts.add(snapshot)
    registry.register(collector)

    node = (52.3 + 57.9) / 2
    estimated = {"node": "n1", "source": "estimated"}
    assert registry.get_sample_value("kubejoule_node_power_watts", estimated) == pytest.approx(node)
    assert registry.get_sample_value("kubejoule_node_power_watts", {"node": "n1", "source": "none"}) is None
    assert registry.get_sample_value("kubejoule_node_energy_joules_total", estimated) == pytest.approx(2 * node)
    calibrated = {**estimated, "idle_source": "calibration"}
    assert registry.get_sample_value("kubejoule_node_idle_power_watts", calibrated) == pytest.approx(41.6)
    assert registry.get_sample_value("kubejoule_node_active_power_watts", calibrated) == pytest.approx(node - 41.6)
    assert registry.get_sample_value("kubejoule_node_wall_power_watts", estimated) == pytest.approx(30.0 + 1.1 * node)
    for level, watts in enumerate(POINTS):
        labels = {"node": "n1", "utilization": f"{level / 10:.1f}", "reading": "rapl"}
        assert registry.get_sample_value("kubejoule_node_power_model_watts", labels) == pytest.approx(watts)


def test_no_wall_series_without_a_correction(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    collector = SnapshotCollector()
    before = Sampler(HostFS(POWERCAP / "intel-1s/before/proc", POWERCAP / "intel-1s/before/sys"), "n1").read()
    sampler = Sampler(HostFS(POWERCAP / "intel-1s/after/proc", POWERCAP / "intel-1s/after/sys"), "n1")
    collector.accounts.add(sampler.compute(before, sampler.read(), 2.0))
    registry.register(collector)
    assert registry.get_sample_value("kubejoule_node_power_watts", {"node": "n1", "source": "rapl"}) == pytest.approx(27.5)
    assert "kubejoule_node_wall_power_watts" not in {m.name for m in registry.collect()}
