"""`kubejoule-agent run` with a carbon intensity, as a real subprocess on a fixture tree: grams
beside the joules on /metrics, a bad CSV refused at start with its reason, and a stale series a
gap that is logged and counted — never grams made up."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers.agent_cli import run_agent
from tests.helpers.agent_proc import WORKLOADS, AgentProcess

TREE = WORKLOADS / "v2-systemd-containerd" / "before"
WEB = "6f1c3b0e-2a4d-4e8b-9c71-0d5e8f2a1b01"


def _hour(offset_h: float) -> str:
    return datetime.fromtimestamp(time.time() + offset_h * 3600, UTC).strftime("%Y-%m-%d %H:%M:%S")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("when,value\n1,2\n", "no header found"),
        ("timestamp,g_per_kwh\nlast tuesday,100\n", "line 2: not a time"),
    ],
)
def test_a_csv_that_cannot_be_placed_in_time_is_a_usage_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "ci.csv"
    path.write_text(content)
    proc = run_agent("run", "--no-kube", "--carbon-intensity-csv", str(path))
    assert proc.returncode == 2 and message in proc.stderr


def test_a_constant_and_a_csv_together_or_a_negative_constant_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "ci.csv"
    path.write_text("timestamp,g_per_kwh\n2024-01-01T00:00:00Z,100\n")
    both = run_agent("run", "--carbon-intensity", "100", "--carbon-intensity-csv", str(path))
    assert both.returncode == 2 and "not both" in both.stderr
    negative = run_agent("run", "--carbon-intensity", "-3")
    assert negative.returncode == 2 and "must not be negative" in negative.stderr


def test_grams_beside_the_joules_from_a_csv(tmp_path: Path) -> None:
    path = tmp_path / "de.csv"
    rows = [f"{_hour(h)},Germany,Germany,DE,380,420" for h in (-2, -1, 0, 1)]
    path.write_text("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
                    "Carbon Intensity gCO₂eq/kWh (LCA)\n" + "\n".join(rows) + "\n")
    profile = tmp_path / "profile.yaml"  # an idle baseline from the start: pods get their share at once
    profile.write_text("idle_watts: 4.0\nmax_watts: 40.0\nmodel: linear\n")
    args = ["--carbon-intensity-csv", str(path), "--power-profile", str(profile)]
    with AgentProcess(TREE, interval=0.25, hermetic=True, args=args) as agent:
        agent.advance(energy_uj={"intel-rapl:0": 36_000_000}, cpu_ticks={"user": 200, "idle": 200})
        text = agent.scrape()
        joules = agent.value("kubejoule_node_energy_joules_total", text, source="rapl")
        grams = agent.value("kubejoule_node_carbon_grams_total", text, source="rapl")
        assert joules is not None and joules >= 36.0
        assert grams == pytest.approx(joules / 3.6e6 * 380.0, rel=1e-9)
        agent.drive(node_watts=30.0, utilization=0.5, cgroup_share={WEB: 0.5})  # the pod draws a share
        agent.wait_samples(4)
        agent.stop_driving()
        agent.wait_samples(1)
        text = agent.scrape()
        pod_j = agent.value("kubejoule_pod_energy_joules_total", text, pod_uid=WEB)
        assert pod_j is not None and pod_j > 0
        assert agent.value("kubejoule_pod_carbon_grams_total", text, pod_uid=WEB) == pytest.approx(
            pod_j / 3.6e6 * 380.0, rel=1e-9)
        assert agent.value("kubejoule_carbon_intensity_grams_per_kwh", text, source="csv", zone="DE") == 380.0
        assert agent.value("kubejoule_agent_errors_total", text, kind="carbon") == 0.0
    assert agent.returncode == 0


def test_a_stale_series_is_a_gap_logged_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    path.write_text(f"timestamp,g_per_kwh\n{_hour(-3).replace(' ', 'T')}Z,250\n")
    with AgentProcess(TREE, interval=0.25, hermetic=True, args=["--carbon-intensity-csv", str(path)]) as agent:
        agent.advance(energy_uj={"intel-rapl:0": 10_000_000}, cpu_ticks={"user": 100, "idle": 100})
        text = agent.scrape()
        assert agent.value("kubejoule_node_energy_joules_total", text, source="rapl")
        assert agent.value("kubejoule_node_carbon_grams_total", text) is None
        assert agent.value("kubejoule_carbon_intensity_grams_per_kwh", text) is None
        errors = agent.value("kubejoule_agent_errors_total", text, kind="carbon")
        assert errors is not None and errors >= 1
    warnings = [e for e in agent.logs if e.get("msg", "").startswith("carbon intensity unknown")]
    assert len(warnings) == 1  # once, when it became unknown; not every interval
    assert "stale" in str(warnings[0]) and "--carbon-max-age 3600" in str(warnings[0])
