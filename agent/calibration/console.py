"""What `kubejoule-calibrate run` shows while and after it measures: a progress bar on a
terminal (one line per finished phase otherwise), warnings, and the summary of the profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from agent.calibration.fit import Window
from agent.calibration.measure import Phase
from agent.curves import UTILIZATION_LEVELS


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
