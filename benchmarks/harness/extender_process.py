"""`kubejoule-scheduler extender` as a real process on 127.0.0.1, and a raw HTTP client for it
that keeps sending a body while it reads the answer (so an early 503 is read, not lost to a
reset), for the abuse and crash tests and benchmarks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness.processes import free_port
from benchmarks.harness.realistic_nodes import realistic_node

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ExtenderProcess:
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    def memory_kib(self) -> dict[str, int]:
        """VmRSS and VmHWM (peak RSS) of the whole server process and its children (the
        telemetry refresher: the container's memory is both), summed, in KiB — the peaks'
        sum bounds the pair's peak from above."""
        found = {"VmRSS": 0, "VmHWM": 0}
        try:
            with open(f"/proc/{self.pid}/task/{self.pid}/children") as listing:
                children = listing.read().split()
        except OSError:
            children = []
        for pid in [str(self.pid), *children]:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        key, _, value = line.partition(":")
                        if key in found:
                            found[key] += int(value.split()[0])
            except OSError:
                continue  # a child that just ended
        return found

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)


def start_extender(
    workdir: Path, mode: str = "shadow", decision_log: Path | None = None, timeout_seconds: float = 30.0
) -> ExtenderProcess:
    """An extender with no telemetry source (every node neutral), started and answering."""
    config = workdir / "extender.yaml"
    if not config.exists():
        config.write_text(yaml.safe_dump({"refresh_seconds": 5, "extender": {"watch_cluster": False}}))
    port = free_port()
    args = [sys.executable, "-m", "scheduler.cmd.cli", "extender", "--config", str(config),
            "--listen", f"127.0.0.1:{port}", "--mode", mode, "--log-level", "warning"]
    if decision_log is not None:
        args += ["--decision-log", str(decision_log)]
    proc = subprocess.Popen(
        args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    server = ExtenderProcess(proc, port)
    deadline = time.monotonic() + timeout_seconds
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the extender exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            if post(port, "/healthz", b"", method="GET", timeout=2).status == 200:
                return server
        if time.monotonic() > deadline:
            server.kill()
            raise RuntimeError("the extender did not start")
        time.sleep(0.1)


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    seconds: float = 0.0


def post(
    port: int, path: str, body: bytes, method: str = "POST", timeout: float = 60.0
) -> Answer:
    """One HTTP/1.1 request on a new connection. The body is sent from a thread while the
    answer is read, so a server that answers before reading everything is heard."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()

        def send() -> None:
            with contextlib.suppress(OSError):
                sock.sendall(head)
                sock.sendall(body)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        data = bytearray()
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
        sender.join(timeout)
    seconds = time.perf_counter() - started
    header_bytes, _, payload = bytes(data).partition(b"\r\n\r\n")
    lines = header_bytes.decode("latin-1").split("\r\n")
    if not lines or not lines[0].startswith("HTTP/"):
        raise OSError(f"no HTTP answer: {bytes(data[:80])!r}")
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return Answer(int(lines[0].split()[1]), headers, payload, seconds)


def small_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}}}]},
    }


def small_body(name: str, nodes: int = 20) -> bytes:
    """A NodeNames request, as kube-scheduler sends one with nodeCacheCapable: true."""
    return json.dumps({"Pod": small_pod(name), "NodeNames": [f"node-{i}" for i in range(nodes)]}).encode()


def maximal_body(limit: int) -> bytes:
    """A Nodes.items request of realistic Node objects, as close under `limit` as they fit."""
    prefix = b'{"Pod":' + json.dumps(small_pod("big")).encode() + b',"Nodes":{"items":['
    parts: list[bytes] = []
    size = len(prefix) + 3
    index = 0
    while True:
        node = json.dumps(realistic_node(f"node-{index}", index), separators=(",", ":")).encode()
        if size + len(node) + 1 > limit:
            break
        parts.append(node)
        size += len(node) + 1
        index += 1
    return prefix + b",".join(parts) + b"]}}"


@contextlib.contextmanager
def running_extender(workdir: Path, **kwargs: Any) -> Iterator[ExtenderProcess]:
    server = start_extender(workdir, **kwargs)
    try:
        yield server
    finally:
        server.kill()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(answers: Mapping[str, list[Answer]]) -> dict[str, Any]:
    return {
        name: {"count": len(a), "statuses": sorted({x.status for x in a})} for name, a in answers.items()
    }


def flood(port: int, body: bytes, clients: int, rounds: int = 1) -> list[Answer]:
    """`clients` concurrent posts of `body`, `rounds` times; every answer (status -1: none)."""
    answers: list[Answer] = []

    def one() -> None:
        try:
            answers.append(post(port, "/prioritize", body, timeout=300))
        except OSError:
            answers.append(Answer(-1))

    for _ in range(rounds):
        threads = [threading.Thread(target=one) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    return answers


def flood_process(port: int, clients: int, rounds: int, limit: int) -> subprocess.Popen[str]:
    """The flood from a process of its own (its senders do not share the measuring client's
    interpreter); `collect_flood` reads its answers."""
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.harness.extender_process", str(port), str(clients), str(rounds), str(limit)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True,
    )


def collect_flood(proc: subprocess.Popen[str], timeout: float = 600) -> list[Answer]:
    out, _ = proc.communicate(timeout=timeout)
    return [Answer(a["status"], a["headers"], a["body"].encode("latin-1"), a["seconds"]) for a in json.loads(out)]


if __name__ == "__main__":
    port_, clients_, rounds_, limit_ = (int(v) for v in sys.argv[1:5])
    got = flood(port_, maximal_body(limit_), clients_, rounds_)
    print(json.dumps([
        {"status": a.status, "headers": a.headers, "body": a.body.decode("latin-1"), "seconds": a.seconds}
        for a in got
    ]))
