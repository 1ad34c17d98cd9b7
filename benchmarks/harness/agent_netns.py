"""Real network namespaces standing in for pods, for the agent's network tests (root only).

Each fake pod gets a named namespace (`ip netns add`), a veth pair whose pod end is `eth0`
inside it (10.251.N.2/30) and whose host end stays in the host namespace (10.251.N.1/30), and a
`sleep` process inside it: the agent finds the namespace through /proc/<pid>/ns/net of that
process, as it does for a real pod. IPv6 is turned off on both ends so that no neighbour
discovery traffic moves the counters behind the test's back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pytest

from benchmarks.harness.components import require_binary


def need_netns() -> None:
    """Skip (with the reason) where namespaces and veths cannot be made."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces and veth pairs")
    require_binary("ip", "needs the `ip` command (iproute2)")


def _run(*args: str) -> None:
    subprocess.run(list(args), check=True, capture_output=True, text=True)


def _disable_ipv6(ns: str | None, ifname: str) -> None:
    path = f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"
    cmd = ["sh", "-c", f"[ ! -e {path} ] || echo 1 > {path}"]
    _run(*(["ip", "netns", "exec", ns, *cmd] if ns else cmd))


@dataclass
class FakePod:
    ns: str
    host_if: str
    pod_ip: str
    host_ip: str
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def send_udp(self, payload_bytes: int, datagram_bytes: int = 1000) -> None:
        """Send PAYLOAD_BYTES of UDP from inside the pod to its host end (nobody listens)."""
        script = (
            "import socket\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"left = {payload_bytes}\n"
            "while left > 0:\n"
            f"    n = min(left, {datagram_bytes})\n"
            f"    s.sendto(b'x' * n, ('{self.host_ip}', 9))\n"
            "    left -= n\n"
        )
        _run("ip", "netns", "exec", self.ns, sys.executable, "-c", script)


@dataclass
class NetnsLab:
    """Creates fake pods; remove() tears everything down (also after a failed test)."""

    tag: str = field(default_factory=lambda: f"kj{os.getpid() % 100000}")
    pods: list[FakePod] = field(default_factory=list)

    def add_pod(self) -> FakePod:
        index = len(self.pods) + 1
        ns = f"{self.tag}-p{index}"
        host_if = f"{self.tag}h{index}"[:15]
        subnet = 200 + (os.getpid() + index) % 50
        host_ip, pod_ip = f"10.251.{subnet}.1", f"10.251.{subnet}.2"
        _run("ip", "netns", "add", ns)
        try:
            _run("ip", "link", "add", host_if, "type", "veth", "peer", "name", f"{host_if}p")
            _disable_ipv6(None, host_if)
            _run("ip", "link", "set", f"{host_if}p", "netns", ns)
            _run("ip", "-n", ns, "link", "set", f"{host_if}p", "name", "eth0")
            _disable_ipv6(ns, "eth0")
            _disable_ipv6(ns, "lo")
            _run("ip", "addr", "add", f"{host_ip}/30", "dev", host_if)
            _run("ip", "-n", ns, "addr", "add", f"{pod_ip}/30", "dev", "eth0")
            _run("ip", "link", "set", host_if, "up")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        except subprocess.CalledProcessError as exc:
            subprocess.run(["ip", "link", "del", host_if], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            pytest.skip(f"cannot set up a veth pair in a namespace here: {exc.stderr.strip()}")
        process = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "300"])
        pod = FakePod(ns, host_if, pod_ip, host_ip, process)
        self.pods.append(pod)
        _wait_in_namespace(pod)
        return pod

    def remove(self) -> None:
        for pod in self.pods:
            pod.process.kill()
            pod.process.wait()
            subprocess.run(["ip", "link", "del", pod.host_if], capture_output=True)
            subprocess.run(["ip", "netns", "del", pod.ns], capture_output=True)
        self.pods.clear()


def _wait_in_namespace(pod: FakePod, timeout_seconds: float = 5.0) -> None:
    """`ip netns exec` enters the namespace and then execs sleep: wait until it has."""
    own = os.stat("/proc/self/ns/net").st_ino
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        try:
            if os.stat(f"/proc/{pod.pid}/ns/net").st_ino != own:
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError(f"process {pod.pid} did not enter namespace {pod.ns}")


def host_process() -> subprocess.Popen[bytes]:
    """A process in the host's namespace, like a hostNetwork pod's."""
    return subprocess.Popen(["sleep", "300"])


__all__ = ["FakePod", "NetnsLab", "host_process", "need_netns"]
