"""A real `kubejoule-agent run` on a fake host tree whose counters the test moves.

Usage::

    from tests.helpers.agent_proc import AgentProcess, WORKLOADS

    with AgentProcess(WORKLOADS / "v2-systemd-containerd" / "before", interval=0.25) as agent:
        agent.advance(energy_uj={"intel-rapl:0": 20_000_000},           # +20 J on package-0
                      cpu_ticks={"user": 200, "idle": 200},            # B = 2 s busy, 2 s idle
                      cgroup_cpu={"6f1c3b0e-2a4d-4e8b-9c71-0d5e8f2a1b01": 1.5})  # pod uid or container id
        agent.value("kubejoule_pod_energy_joules_total", pod_uid="6f1c3b0e-...")   # -> float | None
        text = agent.scrape()                                           # /metrics, raw text
    assert agent.returncode == 0                                        # clean SIGTERM shutdown

What it does:

* `AgentProcess(tree, interval=0.25, args=(), node="test-node", hermetic=False, env=None)`: copies `tree` (a host tree
  with `proc/` and `sys/`, e.g. a fixture's `before/`) to a temporary directory (symlinks kept)
  and, on `__enter__` / `start()`, runs `python -m agent.cmd.cli run --procfs COPY/proc --sysfs
  COPY/sys --listen 127.0.0.1:0 --interval INTERVAL --node NODE --log-format json *args`. The
  port is the one the agent reports in its "listening" log line (no race for a free port).
  `start()` returns once `/readyz` is 200 (the first complete sample). `hermetic=True` adds
  `--no-kube --no-network`, so the agent reads the tree and nothing else (no API even if a
  kubeconfig is around, no network counters of the machine running the tests); by default the
  agent runs with its own defaults and the Kubernetes options are yours to pass in `args`.
* `tree`, `procfs`, `sysfs`: the working copy. `url`, `port`: the agent's HTTP address.
* `logs`: the agent's stderr, one parsed JSON object per line (`{"raw": line}` if not JSON).
* `get(path) -> (status, body)`, `scrape() -> str`, `families() -> dict[name, Metric]`,
  `scrape_until(condition)`: scrape after each sample until `condition(text)` holds,
  `value(sample_name, **labels) -> float | None` (first sample whose labels include `labels`),
  `samples(sample_name) -> list[(labels, value)]`, `sample_count() -> int` (from /readyz).
* `wait_samples(n=1)`: wait until n more samples have been published.
* `advance(energy_uj=..., cpu_ticks=..., cgroup_cpu=..., process_ticks=..., wait=True)`:
  adds to the counters, like the kernel would: `energy_uj` per zone id (wrapping at the zone's
  `max_energy_range_uj`), `also()` (any other write, e.g. a GPU's counter), `/proc/stat` aggregate fields in ticks (`user`, `nice`, `system`,
  `idle`, `iowait`, `irq`, `softirq`, `steal`; 100 per second), CPU seconds per cgroup given by
  pod UID or container id (added to that cgroup and every ancestor, as the kernel accounts
  hierarchically; v1 `cpuacct.usage` or v2 `cpu.stat`), and utime ticks per pid. It first waits
  until the agent has just published a sample, so the writes usually land between two reads, and
  writes each file atomically (rename); with `wait=True` it then waits for the first sample whose
  read began after the last write (one more sample, or two when /healthz shows a read in
  progress), so that sample includes the whole change. Energy totals are then exact; so are
  interval-independent gauge checks (ratios, Σ pods + host + idle = node) when the writes fell
  between two reads, as they do unless the machine stalls.
* `set_energy_uj(zone_id, value)`: set a counter outright (e.g. just below its wrap).
* `drive(node_watts, utilization=0.5, cgroup_share={key: fraction of busy time}, cpus=4,
  process_share={pid: fraction of busy time})`:
  a background thread that, after every sample, advances the counters by one interval's worth,
  so the gauges hover at the given values (within the sampling jitter, a few per cent). Stop
  it with `stop_driving()` (also done on exit). Useful for consumers that just need a node that
  draws N watts (scheduler telemetry, dashboards).
* `stop(signal=SIGTERM)` / `__exit__`: stop the agent, wait for it, keep `returncode`, remove
  the copy.
"""

from __future__ import annotations

import json
import shutil
import signal as signals
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.helpers.host_counters import TICKS_PER_SECOND, AgentProcessError, HostCounters

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
WORKLOADS = FIXTURES / "workloads"
POWERCAP = FIXTURES / "powercap"


class AgentProcess:
    """A `kubejoule-agent run` subprocess on a copy of a fake host tree (see the module doc)."""

    def __init__(
        self,
        tree: Path,
        *,
        interval: float = 0.25,
        args: Sequence[str] = (),
        node: str = "test-node",
        ready_timeout: float = 30.0,
        hermetic: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.source = Path(tree)
        self.interval = interval
        # hermetic: the agent reads nothing but the tree — no Kubernetes API (even if a
        # kubeconfig is around) and no network counters of the machine running the tests.
        self.args = (["--no-kube", "--no-network"] if hermetic else []) + list(args)
        self.node = node
        self.env = dict(env) if env is not None else None  # the agent's environment (default: ours)
        self.ready_timeout = ready_timeout
        self._tmp = Path(tempfile.mkdtemp(prefix="kubejoule-agent-"))
        self.tree = self._tmp / "host"
        shutil.copytree(self.source, self.tree, symlinks=True)
        self.procfs = self.tree / "proc"
        self.sysfs = self.tree / "sys"
        self.counters = HostCounters(self.procfs, self.sysfs)
        self.logs: list[dict[str, Any]] = []
        self.returncode: int | None = None
        self.port: int | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._port_seen = threading.Event()
        self._reader: threading.Thread | None = None
        self._driver: threading.Thread | None = None
        self._driving = threading.Event()
        self._write_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> AgentProcess:
        command = [
            sys.executable, "-m", "agent.cmd.cli", "run",
            "--procfs", str(self.procfs), "--sysfs", str(self.sysfs),
            "--listen", "127.0.0.1:0", "--interval", str(self.interval),
            "--node", self.node, "--log-format", "json", *self.args,
        ]
        self._proc = subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, env=self.env,
        )
        self._reader = threading.Thread(target=self._read_logs, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.ready_timeout
        if not self._port_seen.wait(self.ready_timeout) or self.port is None:
            self.stop()
            raise AgentProcessError(f"the agent did not start listening; logs: {self.logs[-10:]}")
        self.wait_ready(max(deadline - time.monotonic(), 1.0))
        return self

    def __enter__(self) -> AgentProcess:
        try:
            return self.start()
        except BaseException:
            self._cleanup()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.stop()
        finally:
            self._cleanup()

    def stop(self, sig: int = signals.SIGTERM, timeout: float = 15.0) -> int | None:
        self.stop_driving()
        if self._proc is None:
            return self.returncode
        if self._proc.poll() is None:
            self._proc.send_signal(sig)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self.returncode = self._proc.returncode
        if self._reader is not None:
            self._reader.join(5)
        return self.returncode

    def _cleanup(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(5)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _read_logs(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            line = line.rstrip("\n")
            if not line:
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict):
                    entry = {"raw": line}
            except json.JSONDecodeError:
                entry = {"raw": line}
            self.logs.append(entry)
            if entry.get("msg") == "listening" and "port" in entry:
                self.port = int(entry["port"])
                self._port_seen.set()
        self._port_seen.set()  # the process ended: stop waiting for the port

    # -- HTTP ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def scrape(self) -> str:
        status, body = self.get("/metrics")
        if status != 200:
            raise AgentProcessError(f"/metrics answered {status}")
        return body

    def scrape_until(self, condition: Callable[[str], bool], timeout: float | None = None) -> str:
        """Scrape after each new sample until `condition(text)` holds; returns that scrape. For
        checks on one interval's gauges while drive() runs: on a loaded machine the driver can
        miss an interval or straddle a read, and the next sample is whole again."""
        deadline = time.monotonic() + (timeout if timeout is not None else 40 * self.interval + 10)
        while True:
            text = self.scrape()
            if condition(text):
                return text
            if time.monotonic() > deadline:
                raise AgentProcessError(f"no scrape met the condition in time; the last:\n{text}")
            self.wait_samples(1)

    def families(self) -> dict[str, Any]:
        return {f.name: f for f in text_string_to_metric_families(self.scrape())}

    def samples(self, name: str, text: str | None = None) -> list[tuple[dict[str, str], float]]:
        """(labels, value) of every sample called `name` (counters: the `_total` name)."""
        found: list[tuple[dict[str, str], float]] = []
        for family in text_string_to_metric_families(text if text is not None else self.scrape()):
            sample: Sample
            for sample in family.samples:
                if sample.name == name:
                    found.append((dict(sample.labels), float(sample.value)))
        return found

    def value(self, name: str, text: str | None = None, **labels: str) -> float | None:
        for sample_labels, value in self.samples(name, text):
            if all(sample_labels.get(k) == v for k, v in labels.items()):
                return value
        return None

    def sample_count(self) -> int:
        status, body = self.get("/readyz")
        return int(json.loads(body).get("samples", 0)) if body.startswith("{") else 0

    def _readiness(self) -> dict[str, Any]:
        _status, body = self.get("/readyz")
        data: dict[str, Any] = json.loads(body)
        return data

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise AgentProcessError(f"the agent exited with {self._proc.returncode}; logs: {self.logs[-10:]}")
            try:
                if self.get("/readyz", timeout=2.0)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise AgentProcessError(f"the agent was not ready within {timeout} s; logs: {self.logs[-10:]}")

    def wait_samples(self, n: int = 1, timeout: float | None = None) -> int:
        """Wait until `n` more samples than now are published; returns the new count."""
        target = self.sample_count() + n
        deadline = time.monotonic() + (timeout if timeout is not None else 20 * self.interval * n + 10)
        while time.monotonic() < deadline:
            count = self.sample_count()
            if count >= target:
                return count
            time.sleep(0.01)
        raise AgentProcessError(f"no new sample within the timeout; logs: {self.logs[-10:]}")

    def _just_after_a_sample(self) -> None:
        """Return once the agent has published a new sample, preferably early in its interval, so
        that writes made now usually fall between two reads (advance() checks whether they did).
        On a machine too busy to catch that moment, any new sample will do."""
        started = time.monotonic()
        deadline = started + 20 * self.interval + 10
        start = self.sample_count()
        while time.monotonic() < deadline:
            data = self._readiness()
            age = data.get("seconds_since_last_sample")
            caught_early = age is not None and age < self.interval / 3
            if data.get("samples", 0) > start and (caught_early or time.monotonic() - started > 5 * self.interval):
                return
            time.sleep(0.005)
        raise AgentProcessError("no new sample within the timeout")

    def _samples_holding_writes_made_so_far(self) -> int:
        """How many more samples until one has read every file written before this call: 1 when
        no read is in progress (the latest read is older than the latest sample: the next read
        starts after now), else 2 (the read in progress may have seen only part of the writes)."""
        body = json.loads(self.get("/healthz")[1])
        sample_age = body.get("seconds_since_last_sample")
        return 1 if sample_age is not None and body["seconds_since_last_read"] > sample_age else 2

    # -- moving the counters (tests/helpers/host_counters.py) ------------------------------

    def set_energy_uj(self, zone_id: str, value: int) -> None:
        self.counters.set_energy_uj(zone_id, value)

    def advance(
        self,
        *,
        energy_uj: Mapping[str, int] | None = None,
        cpu_ticks: Mapping[str, int] | None = None,
        cgroup_cpu: Mapping[str, float] | None = None,
        process_ticks: Mapping[int, int] | None = None,
        also: Callable[[], None] | None = None,
        wait: bool = True,
        sync: bool = True,
    ) -> None:
        """Add to the counters between two samples; see the module doc. `also` writes more in
        the same window (e.g. the stand-in NVML's state)."""
        if sync:
            self._just_after_a_sample()
        with self._write_lock:
            if also is not None:
                also()
            for pid, ticks in (process_ticks or {}).items():
                self.counters.add_process_ticks(pid, ticks)
            for key, seconds in (cgroup_cpu or {}).items():
                self.counters.add_cgroup_cpu(key, seconds)
            if cpu_ticks:
                self.counters.add_stat(cpu_ticks)
            for zone_id, delta in (energy_uj or {}).items():
                self.counters.add_energy(zone_id, delta)
        if wait:
            self.wait_samples(self._samples_holding_writes_made_so_far())

    def drive(
        self,
        node_watts: float,
        utilization: float = 0.5,
        cgroup_share: Mapping[str, float] | None = None,
        cpus: int = 4,
        zone_id: str = "intel-rapl:0",
        process_share: Mapping[int, float] | None = None,
    ) -> None:
        """Keep the node drawing about `node_watts` at `utilization` until stop_driving();
        `cgroup_share` / `process_share` give cgroups (pod uid or container id) and pids their
        fraction of the busy time."""
        self.stop_driving()
        self._driving.set()
        shares = dict(cgroup_share or {})
        process_shares = dict(process_share or {})

        def loop() -> None:
            while self._driving.is_set():
                try:
                    self._just_after_a_sample()
                except (AgentProcessError, OSError):
                    return
                if not self._driving.is_set():
                    return
                total_ticks = round(cpus * self.interval * TICKS_PER_SECOND)
                busy = round(total_ticks * utilization)
                self.advance(
                    energy_uj={zone_id: round(node_watts * self.interval * 1e6)},
                    cpu_ticks={"user": busy, "idle": total_ticks - busy},
                    cgroup_cpu={k: share * busy / TICKS_PER_SECOND for k, share in shares.items()},
                    process_ticks={pid: round(share * busy) for pid, share in process_shares.items()},
                    wait=False, sync=False,
                )

        self._driver = threading.Thread(target=loop, name="agent-driver", daemon=True)
        self._driver.start()

    def stop_driving(self) -> None:
        self._driving.clear()
        if self._driver is not None:
            self._driver.join(10)
            self._driver = None


def wait_until(predicate: Callable[[], bool], timeout_seconds: float = 15.0, what: str = "condition") -> None:
    """Poll `predicate` every 50 ms; AssertionError naming `what` after `timeout_seconds`."""
    deadline = time.monotonic() + timeout_seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not met within {timeout_seconds} s")
        time.sleep(0.05)
