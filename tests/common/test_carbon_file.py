"""A carbon intensity CSV re-read when it changes (common/carbon_file.py): a new file replaces the
series, a bad one is reported once and does not, and nothing is looked at more often than asked."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from common.carbon import CarbonIntensityError, parse_time
from common.carbon_file import IntensityFile
from common.carbon_options import add_carbon_arguments, live_intensity_from_args

T0 = parse_time("2024-03-01T00:00:00Z")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, text: str, mtime_ns: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))  # a distinct modification time, whatever the filesystem's resolution


def test_a_changed_file_is_reloaded_after_the_check_interval(tmp_path: Path) -> None:
    path, clock = tmp_path / "ci.csv", Clock()
    write(path, "timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n", 1_000_000_000)
    live = IntensityFile(path, check_every_s=30.0, clock=clock)
    assert live.at(T0 + 10).value == 100.0 and live.at(T0 + 3600).value is None
    write(path, "timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n2024-03-01T01:00:00Z,250\n", 2_000_000_000)
    clock.now = 10.0
    assert live.refresh() is None  # not time to look yet
    assert live.at(T0 + 3600).value is None
    clock.now = 31.0
    change = live.refresh()
    assert change is not None and change[0] and "2 rows" in change[1]
    assert live.at(T0 + 3600).value == 250.0
    clock.now = 62.0
    assert live.refresh() is None  # unchanged since


def test_a_bad_new_file_keeps_the_series_and_is_reported_once(tmp_path: Path) -> None:
    path, clock = tmp_path / "ci.csv", Clock()
    write(path, "timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n", 1_000_000_000)
    live = IntensityFile(path, check_every_s=0.0, clock=clock)
    write(path, "garbage\n", 2_000_000_000)
    change = live.refresh()
    assert change is not None and not change[0]
    assert "no header found" in change[1] and "keeping the series loaded before" in change[1]
    assert live.at(T0 + 10).value == 100.0
    assert live.refresh() is None  # the same bad file: said once
    path.unlink()
    change = live.refresh()
    assert change is not None and not change[0] and "is gone" in change[1]
    assert live.at(T0 + 10).value == 100.0 and live.at(T0 + 3600).value is None  # no value past its end


def test_a_bad_file_at_start_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "ci.csv"
    path.write_text("garbage\n")
    with pytest.raises(CarbonIntensityError, match="no header found"):
        IntensityFile(path)


def test_the_agents_options_give_a_live_file(tmp_path: Path) -> None:
    path = tmp_path / "ci.csv"
    path.write_text("timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n")
    parser = argparse.ArgumentParser()
    add_carbon_arguments(parser)
    live = live_intensity_from_args(parser.parse_args(["--carbon-intensity-csv", str(path), "--carbon-max-age", "60"]))
    assert isinstance(live, IntensityFile) and live.at(T0 + 61).value is None
    with pytest.raises(CarbonIntensityError, match="not both"):
        live_intensity_from_args(parser.parse_args(["--carbon-intensity", "5", "--carbon-intensity-csv", str(path)]))
