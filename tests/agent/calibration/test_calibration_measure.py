"""Phases of a calibration on a scripted meter: retries on a busy host, unsteady phases left out
of the fit, the duty feedback, windows dropped on gaps and the settle time."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent.calibration.fit import Window
from agent.calibration.measure import DutyFeedback, Judgement, Phase, measure_level, measure_phase

SAMPLE = 0.01  # seconds per window: the scripted meter needs no real time


@dataclass
class FakeReading:
    monotonic: float
    wall: float


class ScriptedMeter:
    """Utilization from a function of (attempt, window index); watts = 40 + 60 u; None = a gap.

    Each attempt of a level is a phase with its own group name, which is how attempts are told
    apart."""

    def __init__(self, utilization: Callable[[int, int], float | None]) -> None:
        self.utilization = utilization
        self.groups: list[str] = []
        self.index = 0

    def read(self) -> FakeReading:
        return FakeReading(time.monotonic(), time.time())

    def window(self, before: Any, after: Any, group: str, target: float | None) -> tuple[Window | None, list[str]]:
        if not self.groups or self.groups[-1] != group:
            self.groups.append(group)
            self.index = 0
        u = self.utilization(len(self.groups) - 1, self.index)
        self.index += 1
        if u is None:
            return None, ["zone intel-rapl:0 (package-0): counter fell"]
        return Window(u, 40.0 + 60.0 * u, after.monotonic - before.monotonic, group, before.wall, after.wall, target), []


def run_level(
    meter: ScriptedMeter, judgement: Judgement, level: float = 0.0, windows: int = 6
) -> tuple[list[Any], list[str]]:
    warnings: list[str] = []
    phases = measure_level(meter, "idle", level, windows * SAMPLE, SAMPLE, judgement, warnings.append)  # type: ignore[arg-type]
    return phases, warnings


FAST = Judgement(quiet_utilization=0.05, retries=3, retry_wait_seconds=0.0)


def test_a_quiet_host_needs_one_attempt() -> None:
    phases, warnings = run_level(ScriptedMeter(lambda attempt, i: 0.02), FAST)
    assert len(phases) == 1 and phases[0].problem is None and phases[0].used
    assert phases[0].utilization == pytest.approx(0.02)
    assert warnings == []


def test_a_busy_host_is_retried_and_every_steady_attempt_is_kept() -> None:
    phases, warnings = run_level(ScriptedMeter(lambda attempt, i: 0.5 if attempt == 0 else 0.03), FAST)
    assert [p.group for p in phases] == ["idle", "idle-retry1"]
    assert "not quiet: 50.0 % busy" in (phases[0].problem or "")
    assert all(p.used for p in phases)  # a busy but steady phase is a valid point on the curve
    assert len(warnings) == 1 and "retrying (1/3)" in warnings[0]


def test_unsteady_phases_are_left_out_unless_nothing_else_was_measured() -> None:
    wobbly = ScriptedMeter(lambda attempt, i: (0.0 if i % 2 else 0.6) if attempt < 2 else 0.04)
    phases, _ = run_level(wobbly, FAST)
    assert [p.used for p in phases] == [False, False, True]
    assert "unsteady" in (phases[0].problem or "")

    always_wobbly = ScriptedMeter(lambda attempt, i: (0.0 if i % 2 else 0.6 - 0.1 * attempt))
    phases, warnings = run_level(always_wobbly, FAST)
    assert len(phases) == 4 and [p.used for p in phases].count(True) == 1
    assert phases[-1].used  # the steadiest of the four
    assert "no retries left" in warnings[-1]


def test_gaps_drop_windows_with_their_reasons() -> None:
    meter = ScriptedMeter(lambda attempt, i: None if i == 2 else 0.01)
    phases, _ = run_level(meter, FAST)
    assert meter.index >= 3  # (a late wake-up on a loaded host skips ticks, never the gap's reason)
    assert len(phases[0].windows) == meter.index - 1
    assert phases[0].gaps == ["zone intel-rapl:0 (package-0): counter fell"]
    all_gaps, warnings = run_level(ScriptedMeter(lambda attempt, i: None), Judgement(retries=0))
    assert "no usable window (zone intel-rapl:0" in (all_gaps[0].problem or "")
    assert not all_gaps[0].used


def test_a_step_above_its_level_is_busy_but_below_it_is_not_retried() -> None:
    judgement = Judgement(retries=1, retry_wait_seconds=0.0)
    busy, _ = run_level(ScriptedMeter(lambda attempt, i: 0.55), judgement, level=0.4)
    assert len(busy) == 2 and "busy: 55.0 % busy, want at most 50.0 %" in (busy[0].problem or "")
    short, _ = run_level(ScriptedMeter(lambda attempt, i: 0.3), judgement, level=0.4)
    assert len(short) == 1 and short[0].problem is None


class FakeGenerator:
    def __init__(self) -> None:
        self.duty = 0.0

    def set_duty(self, duty: float) -> float:
        self.duty = min(max(duty, 0.0), 1.0)
        return self.duty


def test_duty_feedback_reaches_the_level_despite_other_load() -> None:
    generator = FakeGenerator()
    feedback = DutyFeedback(generator, 0.5)  # type: ignore[arg-type]
    assert generator.duty == 0.5
    for _ in range(20):
        measured = 0.2 + 0.9 * generator.duty  # other work adds 20 %; the workers lose a little
        feedback(Window(measured, 0.0, 1.0, "step"))
    assert 0.2 + 0.9 * generator.duty == pytest.approx(0.5, abs=0.01)
    full = DutyFeedback(generator, 1.0)  # type: ignore[arg-type]
    full(Window(0.7, 0.0, 1.0, "step"))
    assert generator.duty == 1.0
    idle = DutyFeedback(generator, 0.0)  # type: ignore[arg-type]
    idle(Window(0.3, 0.0, 1.0, "step"))
    assert generator.duty == 0.0


class TimedMeter(ScriptedMeter):
    """The load of a level that is still changing for its first SETTLE / 2 seconds: 90 %, then 50 %."""

    def __init__(self, settle_seconds: float) -> None:
        super().__init__(lambda attempt, i: 0.5)
        self.settle_seconds = settle_seconds
        self.first: float | None = None

    def read(self) -> FakeReading:
        reading = super().read()
        if self.first is None:
            self.first = reading.monotonic
        return reading

    def window(self, before: Any, after: Any, group: str, target: float | None) -> tuple[Window | None, list[str]]:
        window, reasons = super().window(before, after, group, target)
        assert window is not None and self.first is not None
        if before.monotonic - self.first < self.settle_seconds / 2:
            window = Window(0.9, 40.0 + 60.0 * 0.9, window.seconds, group, window.start, window.end, target)
        return window, reasons


def test_windows_in_the_settle_time_steer_the_duty_but_are_not_kept() -> None:
    settle, seconds, sample = 0.1, 0.2, 0.02
    meter = TimedMeter(settle)
    seen: list[Window] = []
    started = time.time()
    phase = measure_phase(meter, Phase("step-05", 0.5), seconds, sample, settle_seconds=settle, on_window=seen.append)  # type: ignore[arg-type]
    assert phase.windows and all(w.utilization == 0.5 for w in phase.windows)
    assert all(w.start >= started + settle - 1e-3 for w in phase.windows)
    assert phase.seconds >= seconds - sample
    assert seen[0].utilization == 0.9  # the transition reached the feedback
    assert phase.windows == [w for w in seen if w in phase.windows] == seen[len(seen) - len(phase.windows):]
