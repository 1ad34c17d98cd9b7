"""rtnetlink without pyroute2's IPRoute (agent/network.py uses it): one plain NETLINK_ROUTE socket
per namespace, pyroute2's message classes to encode and decode RTM_GETSTATS (64-bit byte
counters) and RTM_GETLINK (names, kinds, flags); and other network namespaces entered only from
a short-lived worker thread (setns changes the calling thread only), so the agent's other
threads never leave the host's namespace.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pyroute2 import netns as pyroute2_netns
from pyroute2.netlink import NETLINK_ROUTE, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR
from pyroute2.netlink.rtnl import RTM_GETLINK, RTM_GETSTATS
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg
from pyroute2.netlink.rtnl.ifstatsmsg import ifstatsmsg
from pyroute2.netlink.rtnl.marshal import MarshalRtnl

IFF_LOOPBACK = 0x8  # <linux/if.h>
IFLA_STATS_LINK_64 = 1  # <linux/if_link.h>
T = TypeVar("T")

# Every network namespace's loopback device has this index (LOOPBACK_IFINDEX in the kernel's
# include/net/net_namespace.h), so pods need no link dump to leave it out.
LOOPBACK_IFINDEX = 1
IFLA_STATS_FILTER_LINK_64 = 1 << (IFLA_STATS_LINK_64 - 1)
_RECV_BYTES = 1 << 16


@dataclass(frozen=True)
class LinkInfo:
    name: str
    kind: str | None
    loopback: bool


class Rtnetlink:
    """One NETLINK_ROUTE socket. It belongs to the network namespace of the thread that opened
    it, for its whole life, whatever namespace the thread moves to afterwards."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        self._sock.bind((0, 0))
        self._seq = 0

    def __enter__(self) -> Rtnetlink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def _dump(self, msg: Any, msg_type: int) -> list[Any]:
        self._seq += 1
        msg["header"]["type"] = msg_type
        msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_DUMP
        msg["header"]["sequence_number"] = self._seq
        msg.encode()
        self._sock.send(msg.data)
        marshal = MarshalRtnl()
        replies: list[Any] = []
        while True:
            for reply in marshal.parse(self._sock.recv(_RECV_BYTES)):
                if reply["header"]["sequence_number"] != self._seq:
                    continue
                kind = reply["header"]["type"]
                if kind == NLMSG_DONE:
                    return replies
                if kind == NLMSG_ERROR:
                    error = reply["header"].get("error")
                    raise OSError(getattr(error, "code", 0) or 0, f"rtnetlink dump failed: {error}")
                replies.append(reply)

    def stats(self) -> dict[int, tuple[int, int]]:
        """ifindex → (rx_bytes, tx_bytes), for every interface of the socket's namespace."""
        msg = ifstatsmsg()
        msg["filter_mask"] = IFLA_STATS_FILTER_LINK_64
        out: dict[int, tuple[int, int]] = {}
        for reply in self._dump(msg, RTM_GETSTATS):
            counters = reply.get_attr("IFLA_STATS_LINK_64")
            if counters:
                out[int(reply["ifindex"])] = (int(counters["rx_bytes"]), int(counters["tx_bytes"]))
        return out

    def links(self) -> dict[int, LinkInfo]:
        """ifindex → name, kind (veth, bridge, vxlan...; None for physical), loopback flag."""
        out: dict[int, LinkInfo] = {}
        for reply in self._dump(ifinfmsg(), RTM_GETLINK):
            info = reply.get_attr("IFLA_LINKINFO")
            kind = info.get_attr("IFLA_INFO_KIND") if info is not None else None
            out[int(reply["index"])] = LinkInfo(
                str(reply.get_attr("IFLA_IFNAME")), kind, bool(reply["flags"] & IFF_LOOPBACK)
            )
        return out


class NamespaceWorker:
    """Opens rtnetlink sockets in other network namespaces, from one short-lived thread.

    setns(target), open the socket, setns back at once; the socket keeps the target namespace.
    If switching back ever failed, the worker refuses further work and its thread exits,
    taking the wrong namespace with it.
    """

    def __init__(self) -> None:
        self.broken: str | None = None
        self._home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)

    def close(self) -> None:
        os.close(self._home)

    def socket_in(self, ns_path: Path) -> Rtnetlink:
        if self.broken:
            raise OSError(self.broken)
        fd = os.open(ns_path, os.O_RDONLY)
        try:
            pyroute2_netns.setns(fd)
            try:
                return Rtnetlink()
            finally:
                try:
                    pyroute2_netns.setns(self._home)
                except OSError as exc:
                    self.broken = f"cannot return to the agent's network namespace: {exc}"
                    raise
        finally:
            os.close(fd)


def in_worker_thread(work: Callable[[NamespaceWorker], T]) -> T:
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        worker = NamespaceWorker()
        try:
            result.append(work(worker))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failure.append(exc)
        finally:
            worker.close()

    thread = threading.Thread(target=run, name="kubejoule-netns")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
