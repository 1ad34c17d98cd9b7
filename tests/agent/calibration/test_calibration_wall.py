"""The RAPL-to-wall correction: reading a power meter's CSV and fitting wall = a + b × RAPL."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
import yaml

from agent.calibration.output import phase_spans
from agent.calibration.wall import (
    PhaseSpan,
    WallMeterError,
    WallReading,
    fit_wall_correction,
    parse_wall_rows,
    read_wall_csv,
)
from agent.cmd import calibrate_cli
from agent.cmd.calibrate_cli import Measured, main
from common.curves import PowerCurve
from common.power_profile import load_power_profile
from tests.helpers.calibrate_run import finished_calibration

T0 = 1_800_000_000.0
# phases of 10 s, RAPL watts rising; the box adds 35 W and loses 8 % in its power supply
PHASES = [PhaseSpan(f"step-{i}", T0 + 20 * i, T0 + 20 * i + 10, 40.0 + 15.0 * i) for i in range(5)]


def wall_watts(rapl: float) -> float:
    return 35.0 + 1.08 * rapl


def meter_csv(path: Path, iso: bool = False) -> Path:
    lines = ["timestamp,watts"]
    for phase in PHASES:
        for k in range(11):  # a reading every second, inside and just around the phase
            t = phase.start + k
            stamp = datetime.fromtimestamp(t).isoformat() if iso else f"{t:.1f}"
            lines.append(f"{stamp},{wall_watts(phase.rapl_watts) + (0.5 if k % 2 else -0.5):.2f}")
        lines.append(f"{phase.end + 5:.1f},999")  # between phases: ignored
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("iso", [False, True])
def test_correction_is_fitted_over_the_phases(tmp_path: Path, iso: bool) -> None:
    readings = read_wall_csv(meter_csv(tmp_path / "pdu.csv", iso))
    correction = fit_wall_correction(readings, PHASES)
    assert correction.intercept_watts == pytest.approx(35.0, abs=0.5)
    assert correction.slope == pytest.approx(1.08, abs=0.01)
    assert correction.phases == 5
    assert correction.wall_watts(100.0) == pytest.approx(wall_watts(100.0), abs=0.5)


def test_readings_that_miss_the_calibration_say_so(tmp_path: Path) -> None:
    readings = parse_wall_rows([["1000", "100"], ["1001", "101"]])
    with pytest.raises(WallMeterError, match="only 0 calibration phase"):
        fit_wall_correction(readings, PHASES)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([["1000", "100"], ["1001", "many"]], "line 2"),
        ([["1000"]], "expected `timestamp,watts`"),
        ([["1000", "-5"]], "non-negative"),
        ([["timestamp", "watts"]], "has no readings"),
    ],
)
def test_bad_rows_name_the_line(rows: list[list[str]], message: str) -> None:
    with pytest.raises(WallMeterError, match=message):
        parse_wall_rows(rows)


def test_wall_subcommand_adds_the_correction_to_a_profile(tmp_path: Path) -> None:
    profile = tmp_path / "node.yaml"
    phases = [
        {"name": p.name, "target": None, "utilization": 0.1 * i, "watts": p.rapl_watts, "start": p.start, "end": p.end}
        for i, p in enumerate(PHASES)
    ]
    profile.write_text(yaml.safe_dump({"schema": "kubejoule.calibration/v1", "idle_watts": 40.0,
                                       "max_watts": 100.0, "phases": phases}))
    assert main(["wall", str(profile), str(meter_csv(tmp_path / "pdu.csv"))]) == 0
    loaded = load_power_profile(profile)
    assert loaded.wall is not None
    assert loaded.wall_watts(100.0) == pytest.approx(wall_watts(100.0), abs=0.5)
    # a CSV from another day is refused and the profile is left as it was
    (tmp_path / "old.csv").write_text("timestamp,watts\n1000,50\n1001,51\n")
    assert main(["wall", str(profile), str(tmp_path / "old.csv")]) == 1
    assert load_power_profile(profile).wall == loaded.wall


def measured_run() -> Measured:
    """A finished calibration: idle and four steps on PowerCurve.fan(40, 100, 1.5), at PHASES' times."""
    return finished_calibration(PowerCurve.fan(40.0, 100.0, 1.5), [(p.name, p.start) for p in PHASES])


def wall_csv_for(measured: Measured, path: Path) -> Path:
    lines = ["timestamp,watts"]
    for phase in (*measured.idle, *measured.steps):
        for window in phase.windows:
            lines.append(f"{window.start + 0.5},{wall_watts(window.watts)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_run_writes_the_profile_with_its_wall_correction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    measured = measured_run()
    monkeypatch.setattr(calibrate_cli, "measure_and_fit", lambda *args: measured)
    out = tmp_path / "node.yaml"
    csv = wall_csv_for(measured, tmp_path / "pdu.csv")
    assert main(["run", "--out", str(out), "--wall-meter", str(csv), "--no-progress", "--node", "n7"]) == 0
    profile = load_power_profile(out)
    assert profile.node == "n7" and profile.model == measured.fit.chosen.model
    assert profile.wall is not None and profile.wall.slope == pytest.approx(1.08, rel=1e-4)
    assert "wall = 35.00 W + 1.0800 × RAPL" in capsys.readouterr().out


def test_a_wall_log_that_misses_the_run_does_not_lose_the_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(calibrate_cli, "measure_and_fit", lambda *args: measured_run())
    out = tmp_path / "node.yaml"
    (tmp_path / "old.csv").write_text("timestamp,watts\n1000,50\n1001,51\n")
    assert main(["run", "--out", str(out), "--wall-meter", str(tmp_path / "old.csv"), "--no-progress"]) == 1
    profile = load_power_profile(out)
    assert profile.wall is None and profile.curve is not None
    err = capsys.readouterr().err
    assert "wall correction failed" in err and f"kubejoule-calibrate wall {out} CSV" in err


def test_readings_at_a_phase_start_and_unsteady_phases_are_left_out() -> None:
    # a reading just after the phase began still averages the previous level: ignored
    readings = [WallReading(p.start + 0.1, 999.0) for p in PHASES]
    readings += [WallReading(p.start + k, wall_watts(p.rapl_watts)) for p in PHASES for k in range(3, 11)]
    correction = fit_wall_correction(sorted(readings, key=lambda r: r.timestamp), PHASES)
    assert correction.slope == pytest.approx(1.08) and correction.intercept_watts == pytest.approx(35.0)
    records = [
        {"name": p.name, "start": p.start, "end": p.end, "watts": p.rapl_watts, "used": i != 2}
        for i, p in enumerate(PHASES)
    ]
    assert [s.name for s in phase_spans(records)] == ["step-0", "step-1", "step-3", "step-4"]


def test_the_virtual_wall_meter_logs_exact_periods_whatever_its_thread_is_late(tmp_path: Path) -> None:
    """The end-to-end calibration's wall meter (tests/helpers/calibrate_meter.py): each reading is
    the mean over its own period of a fixed grid, stamped at the period's end, from the energy
    the RAPL counters were given — a tick one second late moves no reading into the next load."""
    from tests.helpers.calibrate_meter import POWERCAP, VirtualMeter, copy_tree

    sys_root = copy_tree(POWERCAP / "intel-1s/before", tmp_path / "host")
    log = tmp_path / "pdu.csv"
    meter = VirtualMeter(sys_root, lambda u: 50.0, {"intel-rapl:0": 1.0}, wall_csv=log, wall=wall_watts)
    # driven by hand at chosen instants (no thread): 100 W from t = 0, then a tick 1.0 s late
    meter._last, meter._wall_clock, meter._wall_next, meter._watts = 0.0, T0, 0.25, 100.0
    meter._log_wall(1.0)
    meter._advance(1.0)
    meter._watts = 200.0  # the load changed at that tick
    meter._log_wall(1.26)
    readings = read_wall_csv(log)
    assert [r.timestamp for r in readings] == pytest.approx([T0 + 0.25 * k for k in range(1, 6)])
    assert [r.watts for r in readings] == pytest.approx([wall_watts(100.0)] * 4 + [wall_watts(200.0)])
    assert meter.total_joules == pytest.approx(100.0)
