"""agent/network.py (and agent/rtnetlink.py's LinkInfo) without namespaces: naming counters, loopback, the host's link-name cache."""

from __future__ import annotations

from agent.network import (
    LINK_REFRESH_SECONDS,
    _LinkNames,
    interface_counters,
    pod_bytes,
)
from agent.rtnetlink import LinkInfo


class FakeNetlink:
    def __init__(self, links: dict[int, LinkInfo]) -> None:
        self.current = links
        self.dumps = 0

    def links(self) -> dict[int, LinkInfo]:
        self.dumps += 1
        return dict(self.current)


LINKS = {
    1: LinkInfo("lo", None, True),
    2: LinkInfo("eth0", None, False),
    3: LinkInfo("cali12345", "veth", False),
    4: LinkInfo("vxlan.calico", "vxlan", False),
}


def test_node_interfaces_leave_out_loopback_and_excluded_kinds() -> None:
    stats = {1: (10, 10), 2: (100, 200), 3: (5, 6), 4: (7, 8), 9: (1, 1)}  # 9: no name known
    named = interface_counters(stats, LINKS, exclude_kinds=("veth",))
    assert [(i.interface, i.rx_bytes, i.tx_bytes) for i in named] == [("eth0", 100, 200), ("vxlan.calico", 7, 8)]
    assert {i.interface for i in interface_counters(stats, LINKS)} == {"eth0", "cali12345", "vxlan.calico"}


def test_a_pod_counts_every_interface_but_loopback() -> None:
    assert pod_bytes({1: (1000, 1000), 2: (10, 20), 5: (1, 2)}) == (11, 22)
    assert pod_bytes({1: (1000, 1000)}) == (0, 0)


def test_link_names_are_dumped_again_only_for_new_interfaces_or_after_a_while() -> None:
    now = [0.0]
    cache = _LinkNames(clock=lambda: now[0])
    netlink = FakeNetlink(LINKS)
    assert cache.resolve(netlink, [1, 2, 3]) == LINKS
    cache.resolve(netlink, [1, 2])
    assert netlink.dumps == 1
    netlink.current = {**LINKS, 7: LinkInfo("cali999", "veth", False)}
    assert cache.resolve(netlink, [1, 7])[7].name == "cali999"
    assert netlink.dumps == 2
    netlink.current = {**netlink.current, 2: LinkInfo("renamed0", None, False)}
    now[0] += LINK_REFRESH_SECONDS + 1
    assert cache.resolve(netlink, [2])[2].name == "renamed0"
    assert netlink.dumps == 3
