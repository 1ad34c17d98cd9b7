"""Measuring windows of (utilization, node watts): the idle baseline and the load sweep.

Energy comes from the RAPL counters through the agent's own reader and delta arithmetic
(`agent.monitor.rapl_power.compute_power`), utilization from /proc/stat as the agent defines it — never from
what the load generator was asked to do. Windows are short (`sample_seconds`) so a counter
wrap or an unreadable read costs one window, which is dropped with its reason, not a step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.calibration.fit import Window
from agent.calibration.load import LoadGenerator
from agent.device.hostfs import HostFS
from agent.device.procstat import CpuTimes, cpu_delta, read_cpu_times
from agent.device.rapl import RaplReading, read_rapl
from agent.monitor.rapl_power import compute_power, node_zone_ids

FEEDBACK_GAIN = 0.8  # duty change per unit of utilization error, each window
DEFAULT_QUIET_UTILIZATION = 0.05
LEVEL_TOLERANCE = 0.1  # a step more than this above its level ran on a busy host
MAX_UNSTEADINESS = 0.1  # utilization std within a phase above which the phase is retried


class MeasureError(RuntimeError):
    """Measuring cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class Reading:
    monotonic: float
    wall: float
    rapl: RaplReading
    cpu: CpuTimes


class Meter:
    """Reads the node's RAPL counters and /proc/stat together."""

    def __init__(self, fs: HostFS) -> None:
        self.fs = fs

    def read(self) -> Reading:
        rapl = read_rapl(self.fs)
        try:
            cpu = read_cpu_times(self.fs)
        except (OSError, ValueError) as exc:
            raise MeasureError(f"cannot read {self.fs.proc('stat')}: {exc}") from exc
        return Reading(time.monotonic(), time.time(), rapl, cpu)

    def node_zones(self, reading: Reading) -> tuple[str, list[str]]:
        return node_zone_ids(reading.rapl.zones)

    def window(
        self, before: Reading, after: Reading, group: str, target: float | None
    ) -> tuple[Window | None, list[str]]:
        """The window between two readings, or None with the reasons it is unknown."""
        seconds = after.monotonic - before.monotonic
        if seconds <= 0:
            return None, ["the clock did not advance"]
        power = compute_power(before.rapl, after.rapl, seconds)
        reasons = [f"{gap.what}: {gap.reason}" for gap in power.gaps]
        utilization = cpu_delta(before.cpu, after.cpu).utilization
        if utilization is None:
            reasons.append("cpu: /proc/stat did not advance")
        if power.watts is None or utilization is None:
            return None, reasons or ["node power unknown"]
        return (
            Window(
                utilization=utilization,
                watts=power.watts,
                seconds=seconds,
                group=group,
                start=before.wall,
                end=after.wall,
                target=target,
            ),
            [],
        )


@dataclass
class Phase:
    """One calibration phase: an idle attempt or a load step."""

    group: str
    target: float | None
    windows: list[Window] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    duty: float | None = None  # the generator's duty at the end of the phase
    problem: str | None = None  # why the phase was retried (busy host, unsteady load, no data)
    used: bool = True  # does the fit use its windows

    @property
    def seconds(self) -> float:
        return sum(w.seconds for w in self.windows)

    @property
    def utilization(self) -> float | None:
        if not self.windows:
            return None
        return sum(w.utilization * w.seconds for w in self.windows) / self.seconds

    @property
    def watts(self) -> float | None:
        if not self.windows:
            return None
        return sum(w.watts * w.seconds for w in self.windows) / self.seconds

    @property
    def unsteadiness(self) -> float | None:
        """Time-weighted standard deviation of the windows' utilization."""
        mean = self.utilization
        if mean is None:
            return None
        variance = sum(w.seconds * (w.utilization - mean) ** 2 for w in self.windows) / self.seconds
        return float(variance**0.5)


# (phase, fraction of the phase done, latest window or None)
ProgressCallback = Callable[[Phase, float, Window | None], None]


def measure_phase(
    meter: Meter,
    phase: Phase,
    seconds: float,
    sample_seconds: float,
    settle_seconds: float = 0.0,
    on_window: Callable[[Window], None] | None = None,
    progress: ProgressCallback | None = None,
) -> Phase:
    """Read every `sample_seconds` for `settle_seconds + seconds`; keep the windows after settling.

    Windows during the settle time still reach `on_window` (the duty feedback) but are not kept.
    """
    total = settle_seconds + seconds
    start = time.monotonic()
    previous = meter.read()
    tick = 1
    while True:
        due = start + tick * sample_seconds
        if due > start + total + 1e-9:
            break
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        current = meter.read()
        window, reasons = meter.window(previous, current, phase.group, phase.target)
        # Only windows that begin after the settle time count: earlier ones hold the transition.
        settled = previous.monotonic - start >= settle_seconds - 1e-6
        previous = current
        # A late wake-up (a loaded host) skips missed ticks instead of taking tiny windows.
        tick = max(tick + 1, int((current.monotonic - start) / sample_seconds) + 1)
        if window is None:
            if settled:
                phase.gaps.extend(reasons)
        else:
            if on_window is not None:
                on_window(window)
            if settled:
                phase.windows.append(window)
        if progress is not None:
            progress(phase, min(1.0, (current.monotonic - start) / total), window)
    return phase


class DutyFeedback:
    """Moves the generator's duty so the measured utilization reaches the target level.

    Other work on the host adds to the generator's; the level is what /proc/stat says. At 0 %
    and 100 % there is nothing to adjust: the generator is off, or every worker always busy.
    """

    def __init__(self, generator: LoadGenerator, target: float, gain: float = FEEDBACK_GAIN) -> None:
        self.generator = generator
        self.target = target
        self.gain = gain
        self.generator.set_duty(1.0 if target >= 1.0 else target)

    def __call__(self, window: Window) -> None:
        if 0.0 < self.target < 1.0:
            self.generator.set_duty(self.generator.duty + self.gain * (self.target - window.utilization))


def levels(steps: int) -> list[float]:
    """`steps` load levels evenly spaced from 0 % to 100 % of the CPUs."""
    if steps < 2:
        raise ValueError(f"need at least 2 steps (0 % and 100 %), got {steps}")
    return [i / (steps - 1) for i in range(steps)]


@dataclass(frozen=True)
class Judgement:
    """When a phase is good enough, and what to do when it is not."""

    quiet_utilization: float = DEFAULT_QUIET_UTILIZATION  # idle and the 0 % step: at most this busy
    level_tolerance: float = LEVEL_TOLERANCE  # other steps: at most this far above the level
    max_unsteadiness: float = MAX_UNSTEADINESS  # std of window utilization within a phase
    retries: int = 3
    retry_wait_seconds: float = 10.0

    def problem(self, phase: Phase, level: float) -> str | None:
        busy = phase.utilization
        if busy is None:
            reasons = "; ".join(sorted(set(phase.gaps))[:2]) or "no window"
            return f"no usable window ({reasons})"
        wobble = phase.unsteadiness or 0.0
        if wobble > self.max_unsteadiness:
            return (
                f"the load was unsteady: utilization varied by ±{100 * wobble:.0f} % "
                "(other work started or stopped)"
            )
        allowed = self.quiet_utilization if level <= 0.0 else level + self.level_tolerance
        if busy > allowed:
            what = "the host is not quiet" if level <= 0.0 else "the host is busy"
            return f"{what}: {100 * busy:.1f} % busy, want at most {100 * allowed:.1f} %"
        return None


def measure_level(
    meter: Meter,
    name: str,
    level: float,
    seconds: float,
    sample_seconds: float,
    judgement: Judgement,
    warn: Callable[[str], None],
    settle_seconds: float = 0.0,
    generator: LoadGenerator | None = None,
    progress: ProgressCallback | None = None,
) -> list[Phase]:
    """Measure one level, retrying while the host is busy or the load unsteady.

    Every attempt is returned. Steady attempts are valid measurements at their own utilization
    (a busy host only moves the point along the curve) and all go into the fit; unsteady ones
    are left out, unless no attempt was steady, when the steadiest is used.
    """
    attempts: list[Phase] = []
    for attempt in range(judgement.retries + 1):
        group = name if attempt == 0 else f"{name}-retry{attempt}"
        feedback = DutyFeedback(generator, level) if generator is not None else None
        phase = measure_phase(
            meter,
            Phase(group, level),
            seconds,
            sample_seconds,
            settle_seconds=settle_seconds,
            on_window=feedback,
            progress=progress,
        )
        if generator is not None:
            phase.duty = generator.duty
        phase.problem = judgement.problem(phase, level)
        attempts.append(phase)
        if phase.problem is None:
            break
        if attempt < judgement.retries:
            warn(f"{group}: {phase.problem}; waiting {judgement.retry_wait_seconds:g} s and retrying "
                 f"({attempt + 1}/{judgement.retries})")
            if generator is not None:
                generator.set_duty(0.0)
            time.sleep(judgement.retry_wait_seconds)
        else:
            warn(f"{group}: {phase.problem}; no retries left, using what was measured")
    for phase in attempts:
        phase.used = bool(phase.windows) and (phase.unsteadiness or 0.0) <= judgement.max_unsteadiness
    if not any(p.used for p in attempts):
        measured = [p for p in attempts if p.windows]
        if measured:
            min(measured, key=lambda p: p.unsteadiness or 0.0).used = True
    return attempts


def measure_idle(
    meter: Meter,
    seconds: float,
    sample_seconds: float,
    judgement: Judgement,
    warn: Callable[[str], None],
    progress: ProgressCallback | None = None,
    settle_seconds: float = 0.0,
) -> list[Phase]:
    """The idle baseline, retried while the host is not quiet. Returns every attempt.

    It settles too: power just after the calibration started (imports, the pre-flight read) is
    not idle power yet.
    """
    return measure_level(
        meter, "idle", 0.0, seconds, sample_seconds, judgement, warn, settle_seconds=settle_seconds, progress=progress
    )


def sweep(
    meter: Meter,
    generator: LoadGenerator,
    steps: int,
    step_seconds: float,
    settle_seconds: float,
    sample_seconds: float,
    judgement: Judgement,
    warn: Callable[[str], None],
    progress: ProgressCallback | None = None,
) -> list[Phase]:
    phases: list[Phase] = []
    for index, level in enumerate(levels(steps)):
        phases.extend(
            measure_level(
                meter,
                f"step-{index:02d}",
                level,
                step_seconds,
                sample_seconds,
                judgement,
                warn,
                settle_seconds=settle_seconds,
                generator=generator,
                progress=progress,
            )
        )
    generator.set_duty(0.0)
    return phases
