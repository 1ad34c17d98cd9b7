"""The `run` service's lifecycle: readiness, failing samples, listen errors, SIGINT; and `top`."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent.cmd.server import AgentService, JsonFormatter, parse_listen
from agent.device.hostfs import HostFS
from agent.exporter.prometheus import SnapshotCollector
from agent.exporter.top import render
from agent.monitor.raw_sample import RawSample
from agent.monitor.sampler import Sampler
from agent.monitor.snapshot import Snapshot
from tests.helpers.agent_cli import REPO, run_agent
from tests.helpers.agent_proc import WORKLOADS

TREE = WORKLOADS / "v1-cgroupfs-docker" / "after"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class FlakySampler(Sampler):
    """Fails its first reads, like a host that is briefly unreadable."""

    def __init__(self, failures: int) -> None:
        super().__init__(HostFS(TREE / "proc", TREE / "sys"), "n1")
        self.failures = failures

    def read(self) -> RawSample:
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("simulated read failure")
        return super().read()


def test_ready_only_after_a_complete_sample_and_failures_are_counted_not_fatal() -> None:
    collector = SnapshotCollector()
    published: list[Snapshot] = []
    service = AgentService(FlakySampler(failures=2), collector, 0.3, ("127.0.0.1", 0), on_snapshot=published.append)
    service.start()
    try:
        base = f"http://127.0.0.1:{service.port}"
        status, body = get(base + "/readyz")
        assert status == 503 and json.loads(body)["samples"] == 0
        assert get(base + "/healthz")[0] == 200  # alive while not ready
        deadline = time.monotonic() + 15
        while get(base + "/readyz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert get(base + "/readyz")[0] == 200
        assert published and published[0].node == "n1"
        health = json.loads(get(base + "/healthz")[1])
        assert health["samples"] >= 1 and health["seconds_since_last_sample"] >= 0.0
        assert health["seconds_since_last_read"] >= 0.0
        metrics = get(base + "/metrics")[1]
        assert 'kubejoule_agent_errors_total{kind="sample",node="n1"} 2.0' in metrics
    finally:
        service.stop()
    assert not service._thread.is_alive()


class HangingSampler(Sampler):
    """Its reads block while `hang` is set, like a read of a frozen filesystem."""

    def __init__(self) -> None:
        super().__init__(HostFS(TREE / "proc", TREE / "sys"), "n1")
        self.hang = threading.Event()
        self.release = threading.Event()
        self.hanging = threading.Event()

    def read(self) -> RawSample:
        if self.hang.is_set():
            self.hanging.set()
            self.release.wait(30)
        return super().read()


def wait_for_status(url: str, status: int, timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        code, body = get(url)
        if code == status or time.monotonic() > deadline:
            assert code == status, body
            data: dict[str, Any] = json.loads(body)
            return data
        time.sleep(0.02)


def test_healthz_fails_while_a_read_hangs_and_recovers_after() -> None:
    sampler = HangingSampler()
    service = AgentService(sampler, SnapshotCollector(), 0.1, ("127.0.0.1", 0), stale_after_seconds=0.5)
    service.start()
    try:
        base = f"http://127.0.0.1:{service.port}"
        wait_for_status(base + "/readyz", 200)
        assert get(base + "/healthz")[0] == 200
        sampler.hang.set()
        assert sampler.hanging.wait(10)
        stuck = wait_for_status(base + "/healthz", 503)
        assert stuck["status"] == "stuck" and stuck["seconds_since_last_read"] >= 0.5  # rounded to ms
        assert get(base + "/metrics")[0] == 200  # still serving the last sample
        sampler.hang.clear()
        sampler.release.set()
        assert wait_for_status(base + "/healthz", 200)["status"] == "ok"
    finally:
        sampler.release.set()
        service.stop()


def test_json_log_lines_carry_fields() -> None:
    record = logging.LogRecord("kubejoule.agent", logging.WARNING, __file__, 1, "gap", None, None)
    record.fields = {"what": "node", "reason": "no powercap"}
    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "warning" and entry["msg"] == "gap" and entry["what"] == "node"
    assert entry["time"].endswith("+00:00")


@pytest.mark.parametrize(("text", "address"), [(":9102", ("", 9102)), ("127.0.0.1:0", ("127.0.0.1", 0)),
                                               ("[::1]:9102", ("::1", 9102))])
def test_listen_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_listen(text) == address


@pytest.mark.parametrize("argv", [["run", "--listen", "9102"], ["run", "--listen", "host:port"],
                                  ["run", "--interval", "0"], ["run", "--process-top", "-1"], ["top", "--count", "0"]])
def test_run_and_top_misuse_exits_2(argv: list[str]) -> None:
    proc = run_agent(*argv)
    assert proc.returncode == 2 and "usage:" in proc.stderr


def test_a_port_in_use_is_a_clear_error_and_sigint_stops_cleanly() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_agent("run", "--procfs", str(TREE / "proc"), "--sysfs", str(TREE / "sys"),
                         "--listen", f"127.0.0.1:{port}", "--interval", "0.2")
    assert proc.returncode == 1
    errors = [json.loads(line) for line in proc.stderr.splitlines() if '"cannot listen"' in line]
    assert errors and "Address already in use" in errors[0]["error"]

    agent = subprocess.Popen(
        [sys.executable, "-m", "agent.cmd.cli", "run", "--procfs", str(TREE / "proc"), "--sysfs", str(TREE / "sys"),
         "--listen", "127.0.0.1:0", "--interval", "0.2", "--log-format", "text"],
        cwd=REPO, stderr=subprocess.PIPE, text=True,
    )
    assert agent.stderr is not None
    for line in agent.stderr:
        if "first sample ready" in line:
            break
    agent.send_signal(signal.SIGINT)
    _, rest = agent.communicate(timeout=15)
    assert agent.returncode == 0
    assert "stopping signal=SIGINT" in rest and "Traceback" not in rest


def test_top_prints_frames_with_pods_vms_and_processes() -> None:
    tree = WORKLOADS / "v2-systemd-containerd" / "after"
    proc = run_agent("top", "--procfs", str(tree / "proc"), "--sysfs", str(tree / "sys"),
                     "--interval", "0.1", "--count", "2", "--rows", "3", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("kubejoule top — node") == 2
    assert "\x1b[2J" not in proc.stdout  # not a terminal: frames one after another
    assert "PODS  (top 3 of 4)" in proc.stdout and "VMS" in proc.stdout and "PROCESSES" in proc.stdout


def test_top_frame_ranks_by_watts_and_fits_the_width() -> None:
    from agent.monitor.sampler import Sampler as RealSampler

    case = WORKLOADS / "v2-systemd-containerd"
    before = RealSampler(HostFS(case / "before/proc", case / "before/sys"), "n1").read()
    sampler = RealSampler(HostFS(case / "after/proc", case / "after/sys"), "n1")
    snap = sampler.compute(before, sampler.read(), 2.0)
    frame = render(snap, width=80, rows=2)
    assert all(len(line) <= 80 for line in frame.splitlines())
    lines = frame.splitlines()
    pods = lines[lines.index(next(line for line in lines if line.startswith("PODS"))) + 2:][:2]
    best = max(snap.pods, key=lambda p: p.watts or 0.0)
    assert pods[0].startswith(best.uid[:20])
    assert "27.50 W" in frame and "VMS" in frame and "default_fedora" in frame


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_top_on_a_terminal_redraws_each_frame_in_place_and_quits_on_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    from agent.exporter.top import CLEAR, run_top
    from agent.monitor import sampler as sampler_module
    from agent.monitor.sampler import Sampler as RealSampler

    # the sleep is fake, so the clock the sampler measures intervals with is too (a real
    # millisecond would make the fixture's 50 J an implausible 50 kW)
    clock = [1000.0]
    monkeypatch.setattr(sampler_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0], time=lambda: clock[0]))

    case = WORKLOADS / "v2-systemd-containerd"
    host = tmp_path / "host"
    shutil.copytree(case / "before", host, symlinks=True)
    sampler = RealSampler(HostFS(host / "proc", host / "sys"), "n1")
    slept: list[float] = []

    def one_interval(seconds: float) -> None:  # the host moves on, then the user presses Ctrl-C
        slept.append(seconds)
        clock[0] += seconds
        if len(slept) > 2:
            raise KeyboardInterrupt
        for directory, _subdirs, files in os.walk(case / "after"):
            for name in files:
                source = Path(directory) / name
                if not source.is_symlink():
                    target = host / source.relative_to(case / "after")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, target)

    screen = Terminal()
    assert run_top(sampler, 2.0, rows=5, out=screen, sleep=one_interval) == 0
    frames = screen.getvalue().split(CLEAR)
    assert frames[0] == "" and len(frames) == 3 and slept == [2.0, 2.0, 2.0]
    assert all(f.startswith("kubejoule top — node n1") and "source rapl" in f for f in frames[1:])
    assert "\nPODS\n" in frames[1] and "default_fedora" in frames[1] and "nginx" in frames[1]
    assert frames[2].endswith("\n\n")  # Ctrl-C: a clean line, exit 0


def test_idle_connections_are_closed_and_capped() -> None:
    # Each connection holds a thread: idle ones time out, and past the cap new ones are closed
    # at once (692 idle connections once held 692 threads). Scrapes go on once they are gone.
    service = AgentService(FlakySampler(failures=0), SnapshotCollector(), 0.3, ("127.0.0.1", 0),
                           idle_timeout_seconds=1.0, max_connections=4)
    service.start()
    idle: list[socket.socket] = []
    try:
        threads_before = threading.active_count()
        for _ in range(12):
            idle.append(socket.create_connection(("127.0.0.1", service.port), timeout=5))
        time.sleep(0.3)
        closed_at_once = 0
        for sock in idle[4:]:
            sock.settimeout(0.5)
            with contextlib.suppress(TimeoutError):
                closed_at_once += sock.recv(1) == b""
        assert closed_at_once >= 7  # all past the cap (one may still be in the accept queue)
        assert threading.active_count() <= threads_before + 4
        for sock in idle[:4]:  # the idle timeout closes the ones it took
            sock.settimeout(5)
            assert sock.recv(1) == b""
        deadline = time.monotonic() + 10
        while get(f"http://127.0.0.1:{service.port}/healthz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert get(f"http://127.0.0.1:{service.port}/healthz")[0] == 200
    finally:
        for sock in idle:
            sock.close()
        service.stop()
