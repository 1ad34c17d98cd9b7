"""What `kubejoule-calibrate run` shows while and after it measures: a progress bar on a
terminal (one line per finished phase otherwise), warnings, and the summary of the profile; and
what `kubejoule-calibrate check` prints: its table of RAPL zones and its verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from agent.calibration.check import CheckResult
from agent.calibration.fit import Window
from agent.calibration.measure import Phase
from common.curves import UTILIZATION_LEVELS


class Progress:
    """A one-line progress bar on a terminal; one line per finished phase otherwise."""

    def __init__(self, stream: TextIO, enabled: bool, total_phases: int) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = stream.isatty()
        self.total_phases = total_phases  # levels (idle + steps); a retry repeats its level
        self._done: set[str] = set()

    def __call__(self, phase: Phase, fraction_done: float, window: Window | None) -> None:
        if not self.enabled:
            return
        if self.tty:
            level = phase.group.split("-retry")[0]
            done = len(self._done - {level})
            overall = min(1.0, (done + fraction_done) / max(self.total_phases, 1))
            filled = int(30 * overall)
            bar = "#" * filled + "." * (30 - filled)
            now = f"{100 * window.utilization:5.1f} % {window.watts:8.2f} W" if window else ""
            self.stream.write(f"\r[{bar}] {phase.group:<9} {_target(phase.target):>5} {now}   ")
            self.stream.flush()
        if fraction_done >= 1.0:
            self._done.add(phase.group.split("-retry")[0])
            if self.tty:
                self.stream.write("\n")
            self.stream.write(f"{self._summary(phase)}\n")
            self.stream.flush()

    @staticmethod
    def _summary(phase: Phase) -> str:
        measured = (
            f"measured {100 * phase.utilization:5.1f} %  {phase.watts:8.2f} W"
            if phase.utilization is not None and phase.watts is not None
            else "no usable window"
        )
        gaps = f"  ({len(phase.gaps)} gap(s))" if phase.gaps else ""
        return f"{phase.group:<9} target {_target(phase.target):>5}  {measured}{gaps}"

    def warn(self, message: str) -> None:
        if self.tty and self.enabled:
            self.stream.write("\n")
        self.stream.write(f"warning: {message}\n")
        self.stream.flush()


def _target(target: float | None) -> str:
    return "-" if target is None else f"{100 * target:.0f} %"


def format_summary(doc: dict[str, Any], path: Path) -> str:
    lines = [
        f"profile written to {path}",
        f"node {doc['node']}   model {doc['model']}   held-out error {doc['fit_error_watts']:.2f} W",
        f"  ({doc['selection']})",
        "",
        f"{'model':<8}{'held-out error':>16}{'in-sample error':>17}",
    ]
    for name, fit in doc["fits"].items():
        held = "-" if fit["heldout_error_watts"] is None else f"{fit['heldout_error_watts']:.2f} W"
        lines.append(f"{name:<8}{held:>16}{fit['insample_error_watts']:>15.2f} W")
    lines.append("")
    lines.append(f"{'utilization':<12}{'watts':>10}")
    for u, watts in zip(UTILIZATION_LEVELS, doc["points"], strict=True):
        lines.append(f"{100 * u:>9.0f} %{watts:>10.2f}")
    idle = doc["idle"]
    if idle["extrapolated"]:
        lines.append("idle power is extrapolated: the host never got quiet during the calibration")
    platform = doc.get("reading") == "platform"
    if platform:
        rapl = doc["rapl"]
        lines.append(f"fitted against the BMC's platform reading ({doc['platform']['readings']} readings); "
                     f"RAPL alone: idle {rapl['idle_watts']:.2f} W, full load {rapl['max_watts']:.2f} W")
    if "wall_correction" in doc:
        wall = doc["wall_correction"]
        lines.append(
            f"{'platform' if platform else 'wall'} = {wall['intercept_watts']:.2f} W + {wall['slope']:.4f} × RAPL "
            f"(RMS error {wall['error_watts']:.2f} W over {wall['phases']} phases)"
        )
    return "\n".join(lines)


def format_check(result: CheckResult) -> str:
    lines = [
        f"kubejoule-calibrate check: powercap under {result.sysfs}/class/powercap, "
        f"read as user {result.user} (uid {result.uid}), counters polled for {result.poll_seconds:g} s",
        "",
    ]
    if result.zones:
        header = (
            f"{'zone':<18}{'name':<11}{'socket':>6}  {'readable':<10}{'access':<28}{'moves':<7}"
            f"{'update':>9}{'range':>12}{'wrap@max':>10}{'now':>10}  verdict"
        )
        lines.append(header)
        for zone in result.zones:
            lines.append(
                f"{zone.zone_id:<18}{zone.name or '?':<11}{_dash(zone.socket):>6}  "
                f"{'yes' if zone.readable else 'NO':<10}{zone.access or '-':<28}"
                f"{_yes_no(zone.moves):<7}{_duration(zone.update_seconds):>9}"
                f"{_joules(zone.max_energy_range_uj):>12}{_duration(zone.wrap_seconds):>10}"
                f"{_watts_text(zone.watts):>10}  {zone.verdict}{'  (node)' if zone.node_power else ''}"
            )
        lines.append("")
    if result.node_zone_ids:
        what = "psys" if result.node_power == "psys" else "Σ package + dram"
        lines.append(f"node power = {what}: {', '.join(result.node_zone_ids)}")
    for ignored in result.ignored:
        lines.append(f"ignored: {ignored} (an mmio duplicate of the MSR zone of the same name)")
    lines.append("")
    lines.append("verdict: RAPL is usable" if result.usable else "verdict: RAPL is NOT usable")
    for problem in result.problems:
        lines.append(f"  [{problem.severity}] {problem.what}: {problem.reason}")
        lines.append(f"         fix: {problem.fix}")
    return "\n".join(lines)


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "NO"


SECONDS_SHOWN_BELOW = 120  # a duration under two minutes reads in seconds, then in minutes


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{1000 * seconds:.1f} ms"
    if seconds < SECONDS_SHOWN_BELOW:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _joules(microjoules: int | None) -> str:
    return "-" if not microjoules else f"{microjoules / 1e6:.0f} J"


def _watts_text(watts: float | None) -> str:
    return "-" if watts is None else f"{watts:.2f} W"
