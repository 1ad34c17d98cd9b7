"""Calibrating against the BMC's platform reading (`kubejoule-calibrate run --bmc-url`): the curve
the scheduler minimises is the platform's, RAPL's is kept for the agent's idle split, the
RAPL-to-platform line is the wall correction; the readings are collected by the same poller the
agent uses, from a real Redfish service."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from agent.calibration.wall import WallReading
from agent.cmd import calibrate_cli
from agent.cmd.calibrate_cli import Measured, PlatformRecorder, main
from agent.device.platform import PlatformPoller
from agent.device.redfish import Credentials, RedfishClient
from benchmarks.harness import redfish_mockup
from common.curves import PowerCurve
from common.power_profile import load_power_profile
from tests.helpers.agent_cli import FIXTURES, replay_record
from tests.helpers.calibrate_run import finished_calibration

RAPL = PowerCurve.fan(40.0, 100.0, 1.5)


def platform_watts(rapl_watts: float) -> float:
    """Fans, power supplies and disks on top of the CPU side: 35 W + 25 % of it."""
    return 35.0 + 1.25 * rapl_watts


def calibrated(phases: int = 6, bmc_period: float = 0.5, covered: int | None = None) -> Measured:
    """A finished RAPL calibration and the BMC's readings every `bmc_period` seconds over the
    first `covered` phases (all by default), each the platform watts of that phase's level."""
    start = time.time() - 300
    measured = finished_calibration(RAPL, [("idle", start), *((f"step-{i:02d}", start + 20 * i)
                                                              for i in range(1, phases))])
    readings = []
    for phase in [*measured.idle, *measured.steps][:covered]:
        first, last = phase.windows[0].start, phase.windows[-1].end
        level = platform_watts(RAPL.watts(phase.target or 0.0))
        readings += [WallReading(first + k * bmc_period, level) for k in range(int((last - first) / bmc_period) + 1)]
    measured.platform = readings
    measured.platform_source = {"reading": "EnvironmentMetrics", "chassis": "/redfish/v1/Chassis/1U"}
    return measured


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measured: Measured) -> tuple[int, Path]:
    monkeypatch.setattr(calibrate_cli, "measure_and_fit", lambda *args: measured)
    credentials = tmp_path / "bmc"
    credentials.mkdir(exist_ok=True)
    out = tmp_path / "node.yaml"
    code = main(["run", "--out", str(out), "--node", "n1", "--no-progress", "--bmc-url", "https://bmc.example",
                 "--bmc-credentials", str(credentials), "--bmc-ca-bundle", str(tmp_path / "ca.crt")])
    return code, out


def test_the_profile_is_the_platform_curve_with_rapls_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, monkeypatch, calibrated())
    assert code == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["reading"] == "platform"
    levels = [p["utilization"] for p in doc["platform"]["phases"]]
    assert len(levels) == 6 and doc["platform"]["readings"] > 100
    assert doc["platform"]["reading"] == "EnvironmentMetrics"
    truth = [platform_watts(RAPL.watts(u)) for u in (i / 10 for i in range(11))]
    assert doc["points"] == pytest.approx(truth, abs=0.5)  # the scheduler's curve: the platform's
    assert doc["idle_watts"] == pytest.approx(platform_watts(40.0), abs=0.5)
    assert doc["rapl"]["points"] == pytest.approx(RAPL.as_points(), abs=0.05)  # RAPL's, for the idle split
    assert doc["wall_correction"]["intercept_watts"] == pytest.approx(35.0, abs=0.01)
    assert doc["wall_correction"]["slope"] == pytest.approx(1.25, abs=1e-4)
    assert "fitted against the BMC's platform reading" in capsys.readouterr().out

    profile = load_power_profile(out)
    assert profile.reading == "platform" and profile.cpu_idle_watts == pytest.approx(40.0, abs=0.05)
    assert profile.model_points()[0][1] == pytest.approx(platform_watts(40.0), abs=0.5)  # exported
    assert profile.estimate_cpu_watts(1.0) == pytest.approx(100.0, abs=0.05)
    # the agent on a RAPL node: idle is RAPL's calibrated static power, not the platform's
    record = replay_record(FIXTURES / "workloads/v2-systemd-containerd/before",
                           FIXTURES / "workloads/v2-systemd-containerd/after", 2.0, "--power-profile", str(out))
    assert record["idle_source"] == "calibration"
    assert record["idle_watts"] == pytest.approx(min(40.0, record["node_watts"]), abs=0.05)


def test_a_bmc_that_covered_too_few_phases_leaves_rapls_profile_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, monkeypatch, calibrated(covered=2))
    assert code == 1
    doc = yaml.safe_load(out.read_text())
    assert "reading" not in doc and doc["points"] == pytest.approx(RAPL.as_points(), abs=0.05)
    assert "cover 2 steady phase(s), 3 are needed" in capsys.readouterr().err


def test_the_readings_come_from_the_agents_poller_against_a_redfish_service() -> None:
    bodies = redfish_mockup.environment(412.5)
    recorder = PlatformRecorder()
    with redfish_mockup.serve(bodies) as bmc:
        client = RedfishClient(bmc.url, Credentials(redfish_mockup.USERNAME, redfish_mockup.PASSWORD), allow_http=True)
        poller = PlatformPoller(client, interval_seconds=0.1, on_reading=recorder)
        poller.start()
        time.sleep(0.8)
        bodies["/redfish/v1/Chassis/1U/EnvironmentMetrics"]["PowerWatts"]["Reading"] = 433.0
        time.sleep(0.5)
        poller.stop()
    assert len(recorder.readings) >= 5 and recorder.source == {"reading": "EnvironmentMetrics",
                                                                "chassis": "/redfish/v1/Chassis/1U"}
    assert {r.watts for r in recorder.readings} == {412.5, 433.0}
    times = [r.timestamp for r in recorder.readings]
    assert times == sorted(times) and abs(times[-1] - time.time()) < 5


@pytest.mark.parametrize("flags", [["--bmc-url", "https://bmc.example"],
                                   ["--bmc-url", "https://b", "--bmc-credentials", "/tmp", "--wall-meter", "w.csv"]])
def test_misuse_is_a_usage_error(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--out", "p.yaml", *flags])
    assert exited.value.code == 2 and "BMC" in capsys.readouterr().err
