"""Network byte counters from procfs: the node's interfaces and each pod's own, with no capability.

`<procfs>/<pid>/net/dev` lists the interfaces of the network namespace that process <pid> is in,
with their byte counters (64-bit, the kernel's own). Reading it needs neither entering the
namespace (setns: CAP_SYS_ADMIN) nor opening `/proc/<pid>/ns/net` (a ptrace-mode check:
CAP_SYS_PTRACE for processes holding capabilities the agent lacks): the agent runs with every
capability dropped and without hostNetwork, and still reads them all.

Node: the interfaces of the host's namespace, that of `<procfs>/<host_pid>` (pid 1 of the host
with hostPID), loopback left out, and "stacked" interfaces left out by default — a veth (one pod's
end of a pair, whose traffic the pod series already carry; one per pod would multiply the
series), a VLAN or macvlan on another interface. Which interfaces are stacked comes from the
host's sysfs (`<sysfs>/class/net/<name>`: virtual, and `iflink` not its own `ifindex`); without
that view every interface is kept.

Pods: the bytes of every interface but loopback of the namespace of one of the pod's processes.
A namespace is told apart by the inode of its `net/dev` entry (each network namespace has its own
procfs entries); a pod in the host's (`hostNetwork: true`) is reported as such, with no bytes of
its own: its traffic is already in the node's interfaces and is not counted twice.

The counters are exported as they are; a pod restarted in a new sandbox starts again from 0, which
Prometheus' rate() reads as a counter reset. benchmarks/bench_agent_kubernetes.py measures it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.device.gaps import Gap, Subject

log = logging.getLogger("agent.network")  # the name its log lines have always carried

DIRECTIONS = ("rx", "tx")
LOOPBACK = "lo"
_READ_BYTES = 1 << 16
# Columns of /proc/net/dev after "name:": rx bytes packets errs drop fifo frame compressed
# multicast, then tx bytes ...
_RX_BYTES_COLUMN = 0
_TX_BYTES_COLUMN = 8


@dataclass(frozen=True)
class InterfaceBytes:
    interface: str
    rx_bytes: int
    tx_bytes: int
    stacked: bool = False  # virtual and linked to another interface (veth, VLAN, macvlan)


@dataclass(frozen=True)
class PodNetwork:
    uid: str
    host_network: bool
    rx_bytes: int | None  # None: host network, or not readable (see error)
    tx_bytes: int | None
    error: str | None = None


@dataclass(frozen=True)
class NetworkSample:
    interfaces: tuple[InterfaceBytes, ...] = ()
    pods: tuple[PodNetwork, ...] = ()
    node_error: str | None = None

    def to_record(self, names: Mapping[str, tuple[str | None, str | None]] | None = None) -> dict[str, object]:
        """The sample record's `network` section; NAMES: pod uid → (namespace, name)."""
        names = names or {}
        return {
            "interfaces": [
                {"interface": i.interface, "rx_bytes": i.rx_bytes, "tx_bytes": i.tx_bytes} for i in self.interfaces
            ],
            "pods": [
                {
                    "uid": p.uid,
                    "namespace": names.get(p.uid, (None, None))[0],
                    "name": names.get(p.uid, (None, None))[1],
                    "host_network": p.host_network,
                    "rx_bytes": p.rx_bytes,
                    "tx_bytes": p.tx_bytes,
                }
                for p in self.pods
            ],
        }


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """/proc/<pid>/net/dev → interface → (rx bytes, tx bytes); malformed rows are left out."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines()[2:]:  # two header lines
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or len(fields) <= _TX_BYTES_COLUMN:
            continue
        try:
            out[name.strip()] = (int(fields[_RX_BYTES_COLUMN]), int(fields[_TX_BYTES_COLUMN]))
        except ValueError:
            continue
    return out


def pod_bytes(counters: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """A pod's (rx, tx) bytes: all its interfaces but loopback."""
    rx = sum(v[0] for name, v in counters.items() if name != LOOPBACK)
    tx = sum(v[1] for name, v in counters.items() if name != LOOPBACK)
    return rx, tx


def read_net_dev(
    path: str, skip: frozenset[tuple[int, int]] | set[tuple[int, int]] = frozenset()
) -> tuple[tuple[int, int], dict[str, tuple[int, int]]]:
    """(namespace identity, counters) of one net/dev file; OSError when it cannot be read.
    The identity is the entry's (device, inode), taken from the descriptor that was read; a
    namespace in SKIP (the host's, one already read) is not read again: its counters are {}."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) in skip:
            return (st.st_dev, st.st_ino), {}
        chunks = []
        while chunk := os.read(fd, _READ_BYTES):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return (st.st_dev, st.st_ino), parse_net_dev(b"".join(chunks).decode("ascii", errors="replace"))


def is_stacked(sysfs: Path, name: str) -> bool:
    """Is NAME (in the host's namespace) a virtual interface linked to another one? False when
    sysfs does not say (not mounted, a physical device whose directory is not mounted)."""
    base = sysfs / "class" / "net" / name
    try:
        virtual = "/devices/virtual/" in os.path.realpath(base)
        iflink = (base / "iflink").read_text().strip()
        ifindex = (base / "ifindex").read_text().strip()
    except (OSError, ValueError):
        return False
    return virtual and iflink != ifindex


def interface_counters(
    counters: Mapping[str, tuple[int, int]], stacked: frozenset[str] | set[str] = frozenset(), keep_stacked: bool = False
) -> list[InterfaceBytes]:
    """Named counters of the interfaces, without loopback and (unless KEEP_STACKED) the stacked ones."""
    out = []
    for name, (rx, tx) in counters.items():
        if name == LOOPBACK or (name in stacked and not keep_stacked):
            continue
        out.append(InterfaceBytes(name, rx, tx, name in stacked))
    return sorted(out, key=lambda i: i.interface)


class NetworkReader:
    """Reads node and pod byte counters from procfs (no capability, no setns)."""

    def __init__(
        self,
        procfs: Path = Path("/proc"),
        host_pid: int = 1,
        sysfs: Path = Path("/sys"),
        keep_stacked: bool = False,
    ) -> None:
        self.procfs = Path(procfs)
        self.sysfs = Path(sysfs)
        self.host_path = f"{self.procfs}/{host_pid}/net/dev"
        self.keep_stacked = keep_stacked
        self._stacked: dict[str, bool] = {}  # interface name → stacked, asked of sysfs once

    def read(
        self, pod_pids: Mapping[str, Sequence[int]],
        namespaces: Mapping[str, tuple[tuple[int, int], str]] | None = None,
    ) -> NetworkSample:
        """One reading of the node's interfaces and of the pods (uid → some of their pids);
        NAMESPACES: pods whose namespace (identity, net/dev path) the caller already has."""
        node_error = None
        interfaces: tuple[InterfaceBytes, ...] = ()
        host: tuple[int, int] | None = None
        try:
            host, counters = read_net_dev(self.host_path)
            interfaces = tuple(interface_counters(counters, self._stacked_names(counters), self.keep_stacked))
        except OSError as exc:
            node_error = f"cannot read the node's interfaces in {self.host_path}: {exc.strerror or exc}"
        known = namespaces or {}
        pods: list[PodNetwork] = []
        seen: dict[tuple[int, int], str] = {}
        for uid in sorted(pod_pids):
            paths = [known[uid][1]] if uid in known else [f"{self.procfs}/{pid}/net/dev" for pid in pod_pids[uid]]
            # Host-network pods and shared namespaces are told by the inode alone: not read.
            read = self._first_readable(paths, {host, *seen} if host is not None else set(seen))
            if read is None:
                continue  # no process of the pod is running (yet): nothing to read
            if isinstance(read, str):
                pods.append(PodNetwork(uid, False, None, None, read))
                continue
            identity, counters = read
            if identity == host:
                pods.append(PodNetwork(uid, True, None, None))
                continue
            if identity in seen:
                # Not in Kubernetes (each pod has its own sandbox), but never count bytes twice.
                pods.append(PodNetwork(uid, False, None, None, f"shares its network namespace with pod {seen[identity]}"))
                continue
            seen[identity] = uid
            rx, tx = pod_bytes(counters)
            pods.append(PodNetwork(uid, False, rx, tx))
        return NetworkSample(interfaces, tuple(pods), node_error)

    def _stacked_names(self, counters: Mapping[str, tuple[int, int]]) -> set[str]:
        for name in counters:
            if name not in self._stacked:
                self._stacked[name] = is_stacked(self.sysfs, name)
        if len(self._stacked) > 4 * len(counters) + 64:  # interfaces come and go with pods
            self._stacked = {n: s for n, s in self._stacked.items() if n in counters}
        return {n for n in counters if self._stacked[n]}

    @staticmethod
    def _first_readable(
        paths: Sequence[str], skip: set[tuple[int, int]],
    ) -> tuple[tuple[int, int], dict[str, tuple[int, int]]] | str | None:
        """The first of PATHS that reads; an error text when one exists but cannot be read; None
        when none of the processes exists any more."""
        error = None
        for path in paths:
            try:
                return read_net_dev(path, skip)
            except (FileNotFoundError, ProcessLookupError):
                continue  # the process ended: try the next one
            except OSError as exc:
                error = f"cannot read {path}: {exc.strerror or exc}"
        return error


def network_gaps(sample: NetworkSample) -> list[Gap]:
    """What the sample could not read, as gaps (one for all the pods, not one per pod)."""
    gaps = []
    if sample.node_error:
        gaps.append(Gap(Subject.NETWORK, sample.node_error))
    failed = [p for p in sample.pods if p.error is not None]
    if failed:
        gaps.append(Gap(Subject.POD_NETWORK, f"{len(failed)} pod(s) unreadable, e.g. {failed[0].uid}: {failed[0].error}"))
    return gaps
