"""agent/device/network.py on fake trees: parsing net/dev, loopback, stacked interfaces, telling a pod's
namespace from the host's by the net/dev entry's inode."""

from __future__ import annotations

import os
from pathlib import Path

from agent.device.network import (
    NetworkReader,
    interface_counters,
    is_stacked,
    parse_net_dev,
    pod_bytes,
)

HEADER = (
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
)


def net_dev(rows: dict[str, tuple[int, int]]) -> str:
    return HEADER + "".join(f"{n:>6}: {rx} 1 0 0 0 0 0 0 {tx} 2 0 0 0 0 0 0\n" for n, (rx, tx) in rows.items())


def test_net_dev_rows_give_rx_and_tx_bytes_and_malformed_rows_are_left_out() -> None:
    text = net_dev({"lo": (5, 5), "eth0": (2**40, 7)}) + "  bad0: 1 2 3\n  bad1: x 1 0 0 0 0 0 0 y\nnocolon\n"
    assert parse_net_dev(text) == {"lo": (5, 5), "eth0": (2**40, 7)}


def test_a_pod_counts_every_interface_but_loopback() -> None:
    assert pod_bytes({"lo": (1000, 1000), "eth0": (10, 20), "net1": (1, 2)}) == (11, 22)
    assert pod_bytes({"lo": (1000, 1000)}) == (0, 0)


def test_node_interfaces_leave_out_loopback_and_stacked_ones_unless_kept() -> None:
    counters = {"lo": (10, 10), "eth0": (100, 200), "cali12345": (5, 6), "cni0": (7, 8)}
    named = interface_counters(counters, {"cali12345"})
    assert [(i.interface, i.rx_bytes, i.tx_bytes) for i in named] == [("cni0", 7, 8), ("eth0", 100, 200)]
    kept = interface_counters(counters, {"cali12345"}, keep_stacked=True)
    assert [(i.interface, i.stacked) for i in kept] == [("cali12345", True), ("cni0", False), ("eth0", False)]


def _sys_link(sysfs: Path, name: str, virtual: bool, ifindex: int, iflink: int) -> None:
    device = sysfs / "devices" / ("virtual" if virtual else "pci0000:00/0000:00:03.0") / "net" / name
    device.mkdir(parents=True)
    (device / "ifindex").write_text(f"{ifindex}\n")
    (device / "iflink").write_text(f"{iflink}\n")
    (sysfs / "class" / "net").mkdir(parents=True, exist_ok=True)
    (sysfs / "class" / "net" / name).symlink_to(os.path.relpath(device, sysfs / "class" / "net"))


def test_stacked_means_virtual_and_linked_to_another_interface(tmp_path: Path) -> None:
    _sys_link(tmp_path, "eth0", virtual=False, ifindex=2, iflink=2)
    _sys_link(tmp_path, "veth1", virtual=True, ifindex=7, iflink=3)  # its peer, in a pod
    _sys_link(tmp_path, "cni0", virtual=True, ifindex=4, iflink=4)  # a bridge: its own traffic
    assert [is_stacked(tmp_path, n) for n in ("eth0", "veth1", "cni0")] == [False, True, False]
    assert is_stacked(tmp_path, "absent") is False  # no sysfs view: kept


def test_pods_read_from_their_net_dev_and_host_network_pods_told_apart_by_inode(tmp_path: Path) -> None:
    procfs, sysfs = tmp_path / "proc", tmp_path / "sys"
    _sys_link(sysfs, "veth1", virtual=True, ifindex=7, iflink=3)
    for pid, rows in ((1, {"lo": (1, 1), "eth0": (500, 600), "veth1": (9, 9)}), (40, {"lo": (3, 3), "eth0": (10, 20)})):
        (procfs / str(pid) / "net").mkdir(parents=True)
        (procfs / str(pid) / "net" / "dev").write_text(net_dev(rows))
    (procfs / "41").mkdir()
    (procfs / "41" / "net").symlink_to(procfs / "1" / "net")  # in the host's namespace: same entry
    (procfs / "42").mkdir()
    (procfs / "42" / "net").symlink_to(procfs / "40" / "net")  # shares pod-a's namespace

    sample = NetworkReader(procfs, sysfs=sysfs).read(
        {"pod-a": [999, 40], "pod-h": [41], "pod-s": [42], "gone": [998]}
    )
    assert [(i.interface, i.rx_bytes) for i in sample.interfaces] == [("eth0", 500)]
    assert sample.node_error is None
    by_uid = {p.uid: p for p in sample.pods}
    assert set(by_uid) == {"pod-a", "pod-h", "pod-s"}  # no process left: nothing to say
    assert (by_uid["pod-a"].rx_bytes, by_uid["pod-a"].tx_bytes) == (10, 20)
    assert by_uid["pod-h"].host_network and by_uid["pod-h"].rx_bytes is None
    assert by_uid["pod-s"].rx_bytes is None and "shares" in (by_uid["pod-s"].error or "")


def test_an_unreadable_host_is_a_node_error_and_pods_are_still_read(tmp_path: Path) -> None:
    (tmp_path / "7" / "net").mkdir(parents=True)
    (tmp_path / "7" / "net" / "dev").write_text(net_dev({"eth0": (1, 2)}))
    sample = NetworkReader(tmp_path, sysfs=tmp_path / "nosys").read({"u": [7]})
    assert sample.interfaces == () and sample.node_error and "/1/net/dev" in sample.node_error
    assert [(p.uid, p.rx_bytes) for p in sample.pods] == [("u", 1)]
