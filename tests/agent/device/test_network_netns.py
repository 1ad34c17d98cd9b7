"""Network counters read from procfs in real namespaces and veth pairs (root only), also by a
process with no capability in a network namespace of its own, as the agent is deployed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.device.network import NetworkReader, NetworkSample, PodNetwork
from agent.monitor.network_section import with_network
from agent.monitor.snapshot import PodPower, Snapshot
from benchmarks.harness.agent_netns import NetnsLab, host_process, need_netns
from benchmarks.harness.components import require_binary

REPO = Path(__file__).resolve().parents[3]
PAYLOAD_BYTES = 200_000
# UDP/IP/Ethernet headers on 1000-byte datagrams, ARP, and ICMP port-unreachable replies.
OVERHEAD_BYTES = 20_000


@pytest.fixture
def lab() -> Iterator[NetnsLab]:
    need_netns()
    lab = NetnsLab()
    try:
        yield lab
    finally:
        lab.remove()


def pod_entry(sample: NetworkSample, uid: str) -> PodNetwork:
    matches = [p for p in sample.pods if p.uid == uid]
    assert len(matches) == 1, sample.pods
    return matches[0]


def test_pod_counters_move_only_for_the_pod_that_sends(lab: NetnsLab) -> None:
    sender, quiet = lab.add_pod(), lab.add_pod()
    host = host_process()
    try:
        reader = NetworkReader()
        pods = {"uid-sender": [sender.pid], "uid-quiet": [quiet.pid], "uid-host": [host.pid]}
        before = reader.read(pods)
        sender.send_udp(PAYLOAD_BYTES)
        after = reader.read(pods)
    finally:
        host.kill()
        host.wait()

    sent_after, sent_before = pod_entry(after, "uid-sender").tx_bytes, pod_entry(before, "uid-sender").tx_bytes
    assert sent_after is not None and sent_before is not None
    sent = sent_after - sent_before
    assert PAYLOAD_BYTES <= sent <= PAYLOAD_BYTES + OVERHEAD_BYTES
    assert pod_entry(after, "uid-quiet") == pod_entry(before, "uid-quiet")
    assert pod_entry(after, "uid-quiet").rx_bytes is not None

    # The host-network pod is marked, and has no bytes of its own (they are the node's).
    hosted = pod_entry(after, "uid-host")
    assert hosted.host_network is True
    assert hosted.rx_bytes is None and hosted.tx_bytes is None


def test_loopback_traffic_inside_a_pod_is_not_counted(lab: NetnsLab) -> None:
    pod = lab.add_pod()
    reader = NetworkReader()
    before = pod_entry(reader.read({"u": [pod.pid]}), "u")
    script = "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n[s.sendto(b'x' * 1000, ('127.0.0.1', 9)) for _ in range(100)]\n"
    subprocess.run(["ip", "netns", "exec", pod.ns, sys.executable, "-c", script], check=True)
    after = pod_entry(reader.read({"u": [pod.pid]}), "u")
    assert after == before


def test_node_interfaces_count_the_host_end_and_leave_out_veth_by_default(lab: NetnsLab) -> None:
    pod = lab.add_pod()
    everything = NetworkReader(keep_stacked=True)
    before = {i.interface: i for i in everything.read({}).interfaces}
    pod.send_udp(PAYLOAD_BYTES)
    after = {i.interface: i for i in everything.read({}).interfaces}

    assert "lo" not in after
    host_end_rx = after[pod.host_if].rx_bytes - before[pod.host_if].rx_bytes
    assert PAYLOAD_BYTES <= host_end_rx <= PAYLOAD_BYTES + OVERHEAD_BYTES
    assert after[pod.host_if].stacked is True

    default = {i.interface for i in NetworkReader().read({}).interfaces}
    assert pod.host_if not in default and "lo" not in default
    assert default  # the node's own interfaces are still there


def test_node_interfaces_are_read_in_the_namespace_of_host_pid(lab: NetnsLab) -> None:
    # An agent outside the host's namespace reads the node's interfaces from
    # <procfs>/<host_pid>/net/dev; here a fake pod's namespace plays the host's.
    pod = lab.add_pod()
    sample = NetworkReader(host_pid=pod.pid, keep_stacked=True).read({"same-as-host": [pod.pid]})
    assert [i.interface for i in sample.interfaces] == ["eth0"]
    assert sample.node_error is None
    assert pod_entry(sample, "same-as-host").host_network is True


def test_a_pod_whose_processes_are_gone_is_left_out_and_the_next_pid_is_tried(lab: NetnsLab) -> None:
    pod = lab.add_pod()
    sample = NetworkReader().read({"gone": [999_999_999], "alive": [999_999_998, pod.pid]})
    assert [p.uid for p in sample.pods] == ["alive"]
    assert pod_entry(sample, "alive").rx_bytes is not None


def test_the_record_section_names_pods_and_round_trips_as_json(lab: NetnsLab, tmp_path: Path) -> None:
    pod = lab.add_pod()
    sample = NetworkReader().read({"uid-1": [pod.pid]})
    snapshot = Snapshot(
        node="n", interval_seconds=1.0, timestamp=0.0, source="none", node_watts=None, idle_watts=None,
        active_watts=None, idle_source="utilization", cpu_utilization=None, busy_cpu_seconds=None,
        pods=(PodPower(uid="uid-1", qos=None, cpu_seconds=0.0, watts=None, namespace="shop", name="cart"),),
    )
    record = json.loads(json.dumps(with_network(snapshot, sample).to_record()))
    [entry] = record["network"]["pods"]
    assert entry["namespace"] == "shop" and entry["name"] == "cart" and entry["host_network"] is False
    assert isinstance(entry["rx_bytes"], int)
    assert all(set(i) == {"interface", "rx_bytes", "tx_bytes"} for i in record["network"]["interfaces"])


def test_with_no_capability_and_no_host_network_pods_and_node_are_read(lab: NetnsLab) -> None:
    # As the DaemonSet deploys it: every capability dropped (root's included), no hostNetwork
    # (here: inside a fake pod's namespace, entered with nsenter, which keeps the host's /sys as
    # the DaemonSet's /host/sys mount does), hostPID. No setns, no ns/net opened.
    require_binary("setpriv", "needs setpriv (util-linux) to drop capabilities")
    agent_ns, pod = lab.add_pod(), lab.add_pod()
    pod.send_udp(PAYLOAD_BYTES)
    script = (
        "import json\n"
        "from agent.device.network import NetworkReader, network_gaps\n"
        f"sample = NetworkReader().read({{'uid-1': [{pod.pid}], 'uid-host': [1]}})\n"
        "caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')]\n"
        "print(json.dumps({'pods': {p.uid: [p.tx_bytes, p.host_network, p.error] for p in sample.pods},\n"
        "                  'interfaces': [i.interface for i in sample.interfaces], 'caps': caps,\n"
        "                  'gaps': [g.what for g in network_gaps(sample)]}))\n"
    )
    result = subprocess.run(
        ["nsenter", f"--net=/var/run/netns/{agent_ns.ns}", "setpriv", "--bounding-set", "-all", "--inh-caps", "-all",
         sys.executable, "-c", script],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=True,
    )
    seen = json.loads(result.stdout)
    assert seen["caps"] == ["0000000000000000"]
    tx_bytes, host_network, error = seen["pods"]["uid-1"]
    assert error is None and host_network is False and tx_bytes >= PAYLOAD_BYTES
    assert seen["pods"]["uid-host"][1] is True  # pid 1 is in the node's namespace, not the agent's
    # The node's interfaces are pid 1's (the host's), not those of the agent's own namespace.
    assert seen["interfaces"] == [i.interface for i in NetworkReader().read({}).interfaces]
    assert seen["gaps"] == []
