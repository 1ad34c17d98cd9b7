"""Helpers for the calibration tests. A virtual power meter: this machine's real CPU utilization, passed
through a known power curve plus noise, advances the energy counters of a fake powercap tree.

The calibration under test reads the tree (`--sysfs`) and the real /proc, exactly as it would read
RAPL on a host. Because power follows the utilization actually measured — whoever causes it, the
calibration's load generator or another test run on the same CPUs — other load moves the points
along the curve but never off it.

The counters are rewritten every `tick_seconds` (atomically, so a reader never sees half a
number) by a thread that asks for real-time scheduling: on a shared machine busy with other test
runs, a normally scheduled writer can be late by tens of milliseconds — several percent of a short
measurement window — where the hardware counter is never late. The wall meter's log is made
from the same energy: the exact mean over each period of a fixed grid, stamped at its end, so a
late tick moves no reading's time or span (a reading written late covered the stall, stamped
after it, and could reach back into the previous phase's load).

Running the calibration itself: tests/helpers/calibrate_run.py.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from agent.device.procstat import clock_ticks_per_second, parse_proc_stat

REPO = Path(__file__).resolve().parents[2]
POWERCAP = REPO / "tests" / "fixtures" / "powercap"

# How node power is split over the intel-1s fixture's zones: package + dram = node; core and
# uncore are inside the package.
INTEL_1S_SHARES: Mapping[str, float] = {
    "intel-rapl:0": 0.85,  # package-0
    "intel-rapl:0:0": 0.55,  # core (inside package)
    "intel-rapl:0:1": 0.05,  # uncore (inside package)
    "intel-rapl:0:2": 0.15,  # dram
}


def copy_tree(fixture: Path, destination: Path) -> Path:
    """Copy a fixture host tree (keeping the kernel's symlinks); returns the copy's sys/ root."""
    shutil.copytree(fixture, destination, symlinks=True)
    return destination / "sys"


@contextlib.contextmanager
def memory_dir(fallback: Path) -> Iterator[Path]:
    """A temporary directory in memory (tmpfs, as sysfs is) where there is one, else FALLBACK.

    The virtual meter creates and renames its counter files 100 times a second; on a journaling
    disk that costs ten times the CPU (about 1 ms a tick here), and that CPU is in the idle
    power the calibration measures."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield fallback
        return
    path = Path(tempfile.mkdtemp(prefix="kubejoule-meter-", dir=shm))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class VirtualMeter:
    """Advance `energy_uj` of the zones in `shares` every `tick_seconds` from measured utilization."""

    def __init__(
        self,
        sys_root: Path,
        curve: Callable[[float], float],
        shares: Mapping[str, float] = INTEL_1S_SHARES,
        *,
        noise_watts: float = 1.0,
        tick_seconds: float = 0.01,
        slow_seconds: float = 0.5,
        fast_seconds: float = 0.1,
        max_energy_range_uj: Mapping[str, int] | None = None,
        procfs: Path = Path("/proc"),
        seed: int = 5,
        wall_csv: Path | None = None,
        wall: Callable[[float], float] | None = None,
        wall_every_seconds: float = 0.25,
        monitor: CpuMonitor | None = None,
    ) -> None:
        self.sys_root = sys_root
        self.monitor = monitor  # sampled from the meter's own thread, every monitor.every_seconds
        self.curve = curve
        self.shares = dict(shares)
        self.noise_watts = noise_watts
        self.tick_seconds = tick_seconds
        self.slow_seconds = slow_seconds  # the curve follows utilization over this window
        self.fast_seconds = fast_seconds  # and shorter bursts along its tangent
        self.procfs = procfs
        self.random = random.Random(seed)
        self.energy_uj: dict[str, float] = {}
        self.range_uj: dict[str, int | None] = {}
        self._dirs = {zone_id: self.zone_dir(zone_id) for zone_id in self.shares}
        self.removed: set[str] = set()
        for zone_id in self.shares:
            zone_dir = self.zone_dir(zone_id)
            self.energy_uj[zone_id] = float(int((zone_dir / "energy_uj").read_text()))
            if max_energy_range_uj and zone_id in max_energy_range_uj:
                (zone_dir / "max_energy_range_uj").write_text(f"{max_energy_range_uj[zone_id]}\n")
            try:
                limit = int((zone_dir / "max_energy_range_uj").read_text())
            except (OSError, ValueError):
                limit = 0
            # a zone without a usable range never wraps here (its counter would, on hardware)
            self.range_uj[zone_id] = limit if limit > 0 else None
            if limit > 0:
                self.energy_uj[zone_id] %= limit
        # A wall power meter's log: `wall(mean node watts)` over each period of `wall_every_seconds`
        # on a fixed grid, stamped at the period's end (as a meter stamps its average).
        self.wall_csv = wall_csv
        self.wall = wall
        self.wall_every_seconds = wall_every_seconds
        if wall_csv is not None:
            wall_csv.write_text("timestamp,watts\n")
        self.total_joules = 0.0
        self.wraps = 0
        self.ticks = 0
        self._watts = 0.0  # power since the last integration step
        self._last = time.monotonic()
        self._wall_clock = time.time() - self._last  # wall-clock time = monotonic + this
        self._wall_next = self._last + wall_every_seconds  # the end of the meter's next period
        self._wall_joules = 0.0  # total_joules at the end of its last period
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._history: deque[tuple[float, float, float]] = deque()  # (time, busy, busy + idle)

    def zone_dir(self, zone_id: str) -> Path:
        return (self.sys_root / "class/powercap" / zone_id).resolve()

    def _over(self, seconds: float, now: float) -> float:
        """Utilization over (about) the last `seconds`, from the readings kept."""
        history = self._history
        start = next((h for h in reversed(history) if now - h[0] >= seconds), history[0])
        _, busy0, total0 = start
        _, busy1, total1 = history[-1]
        if total1 - total0 <= 0:
            return 0.0
        return min(1.0, max(0.0, (busy1 - busy0) / (total1 - total0)))

    def utilization(self) -> tuple[float, float]:
        """(slow, fast) utilization, as DESIGN.md defines it, over the two windows."""
        with open(self.procfs / "stat", encoding="utf-8") as handle:
            times = parse_proc_stat(handle.readline())  # the aggregate line is enough, and cheap
        now = time.monotonic()
        self._history.append((now, times.busy, times.busy + times.not_busy))
        while len(self._history) > 2 and now - self._history[1][0] >= self.slow_seconds:
            self._history.popleft()
        return self._over(self.slow_seconds, now), self._over(self.fast_seconds, now)

    def power(self, slow: float, fast: float) -> float:
        """The curve at the slow utilization, plus its slope times the fast deviation from it.

        Steady load gets exactly curve(u). Bursts shorter than the slow window (other test runs
        on the shared CPUs) add power along the curve's tangent: passing them through a concave
        curve instead would make the mean power of a bursty second lower than the curve at its
        mean utilization — an artefact of the meter's window, not something to calibrate.
        """
        step = 0.01
        low, high = max(0.0, slow - step), min(1.0, slow + step)
        slope = (self.curve(high) - self.curve(low)) / (high - low)
        return self.curve(slow) + slope * (fast - slow)

    def _advance(self, now: float) -> None:
        """Integrate power up to `now`."""
        joules = self._watts * max(0.0, now - self._last)
        self._last = now
        self.total_joules += joules
        for zone_id, share in self.shares.items():
            value = self.energy_uj[zone_id] + joules * share * 1e6
            limit = self.range_uj[zone_id]
            if limit is not None and value >= limit:
                value -= limit
                self.wraps += 1
            self.energy_uj[zone_id] = value

    def _write(self, zone_id: str) -> None:
        path = self._dirs[zone_id] / "energy_uj"
        tmp = path.with_name(".energy_uj.tmp")
        try:
            tmp.write_text(f"{int(self.energy_uj[zone_id])}\n")
            os.replace(tmp, path)  # readers never see a half-written counter
        except FileNotFoundError:  # the test removed the zone: it stops counting
            self.removed.add(zone_id)

    def _log_wall(self, now: float) -> None:
        """The wall meter's readings for every period that ended by `now`: the exact mean power
        over the period, from the energy the counters were given (power is `_watts` since the
        last tick), so a late tick moves no reading's time or span."""
        if self.wall_csv is None or self.wall is None or self._wall_next > now:
            return
        lines = []
        while self._wall_next <= now:
            joules = self.total_joules + self._watts * max(0.0, self._wall_next - self._last)
            mean_watts = (joules - self._wall_joules) / self.wall_every_seconds
            lines.append(f"{self._wall_next + self._wall_clock:.3f},{self.wall(mean_watts):.3f}\n")
            self._wall_joules = joules
            self._wall_next += self.wall_every_seconds
        with open(self.wall_csv, "a", encoding="utf-8") as log:
            log.write("".join(lines))

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # not root: run late now and then
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # this thread only
        sampled_at = time.monotonic()
        while not self._stop.wait(self.tick_seconds):
            watts = max(0.0, self.power(*self.utilization()) + self.random.gauss(0.0, self.noise_watts))
            now = time.monotonic()
            self._log_wall(now)  # before the step: its periods' energy is at the last tick's power
            self._advance(now)
            self._watts = watts
            for zone_id in self.shares:
                if zone_id not in self.removed:
                    self._write(zone_id)
            self.ticks += 1
            if self.monitor is not None and now - sampled_at >= self.monitor.every_seconds:
                self.monitor.sample()
                sampled_at = now

    def start(self) -> None:
        self.utilization()
        self._watts = max(0.0, self.curve(0.0))
        self._last = time.monotonic()
        self._wall_clock = time.time() - self._last
        self._wall_next = self._last + self.wall_every_seconds
        self._wall_joules = self.total_joules
        self._thread = threading.Thread(target=self._run, name="virtual-meter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> VirtualMeter:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def process_cpu_seconds(pid: int | str, children: bool = False) -> float | None:
    """utime + stime of a process (all its threads), plus those of its reaped children if asked."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    used = fields[11:15] if children else fields[11:13]  # utime stime [cutime cstime]
    return sum(int(v) for v in used) / clock_ticks_per_second()


@dataclass(frozen=True)
class CpuUse:
    """Who kept the CPUs busy over a span, as shares of all CPUs' time (busy + idle + iowait,
    the denominator of the utilization the calibration measures)."""

    host: float  # everything: what the calibration sees
    calibration: float  # the calibration process and its reaped children (its load workers)
    tests: float  # this test process: the virtual meter, the monitor, pytest itself

    @property
    def others(self) -> float:
        """Every other process on the machine."""
        return max(0.0, self.host - self.calibration - self.tests)

    def __str__(self) -> str:
        return (f"host {100 * self.host:.1f} % = calibration {100 * self.calibration:.1f} % + this test "
                f"{100 * self.tests:.1f} % + others {100 * self.others:.1f} %")


@dataclass
class CpuMonitor:
    """Records /proc/stat's busy and total CPU time and the CPU time of this process and of `pid`
    (the calibration), to tell afterwards who used the CPUs in a time span.

    A VirtualMeter given the monitor calls `sample()` every `every_seconds` from its own thread: a
    thread of its own would compete for the GIL with the real-time meter thread, and a normally
    scheduled thread holding the GIL on a loaded host makes the meter late.
    """

    every_seconds: float = 0.1
    pid: int | None = None
    samples: list[tuple[float, float, float, float, float]] = field(default_factory=list)
    _calibration_seconds: float = 0.0

    def sample(self) -> None:
        with open("/proc/stat", encoding="utf-8") as handle:
            times = parse_proc_stat(handle.readline())
        if self.pid is not None:
            # after the calibration exits its last reading stays
            self._calibration_seconds = process_cpu_seconds(self.pid, children=True) or self._calibration_seconds
        own = process_cpu_seconds("self") or 0.0
        self.samples.append(
            (time.monotonic(), times.busy, times.busy + times.not_busy, self._calibration_seconds, own)
        )

    def use(self, start: float, end: float) -> CpuUse:
        """CPU use between the monotonic times START and END (the samples just inside them)."""
        inside = [s for s in self.samples if start <= s[0] <= end] or [
            min(self.samples, key=lambda s: abs(s[0] - (start + end) / 2))
        ]
        first, last = inside[0], inside[-1]
        total = last[2] - first[2]
        if total <= 0:
            return CpuUse(0.0, 0.0, 0.0)
        return CpuUse(
            host=(last[1] - first[1]) / total,
            calibration=(last[3] - first[3]) / total,
            tests=(last[4] - first[4]) / total,
        )

    def peak_others(self, start: float, end: float, window_seconds: float = 0.5) -> float:
        """The most the other processes used in any WINDOW_SECONDS between START and END."""
        peak, at = 0.0, start
        while at + window_seconds <= end + 1e-9:
            peak = max(peak, self.use(at, at + window_seconds).others)
            at += window_seconds
        return peak
