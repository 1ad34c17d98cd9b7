"""Network byte counters with pyroute2 (netlink): the node's interfaces and each pod's own.

Node: the per-interface counters of the host's network namespace (that of <procfs>/1), loopback
left out, and veth interfaces left out by default — each is one pod's end of a pair whose traffic
the pod series already carry, and there is one per pod, which would multiply the series.

Pods: each pod's bytes are read inside its own network namespace, entered through
<procfs>/<pid>/ns/net of one of its processes; loopback is left out (it never leaves the pod).
A pod whose namespace is the host's (`hostNetwork: true`) is reported as such, with no bytes of
its own: its traffic is already in the node's interfaces and is not counted twice.

The counters are the kernel's own (bytes since the interface was created) and are exported as
they are; a pod restarted in a new sandbox starts again from 0, which Prometheus' rate() reads as
a counter reset. Namespaces are entered only in a short-lived worker thread (setns changes the
calling thread only), so the agent's other threads never leave the host's namespace
(agent/rtnetlink.py).

Cost: pyroute2's IPRoute costs about a millisecond to open and decodes every attribute of every
link; per pod per interval that adds up. So requests go through a plain rtnetlink socket, with
pyroute2's message classes to encode and decode them (agent/rtnetlink.py): RTM_GETSTATS (64-bit
counters only) for the bytes, and RTM_GETLINK (names, kinds, flags) for the host only when an
interface it has not seen appears, or every LINK_REFRESH_SECONDS for renames. benchmarks/bench_agent_kubernetes.py
measures it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent.rtnetlink import LOOPBACK_IFINDEX, LinkInfo, NamespaceWorker, Rtnetlink, in_worker_thread
from agent.snapshot import Gap, Snapshot

log = logging.getLogger(__name__)

EXTRA_KEY = "network"
DEFAULT_EXCLUDED_KINDS: tuple[str, ...] = ("veth",)
DIRECTIONS = ("rx", "tx")


@dataclass(frozen=True)
class InterfaceBytes:
    interface: str
    rx_bytes: int
    tx_bytes: int
    kind: str | None = None  # rtnetlink link kind: veth, bridge, vxlan, ... (None for physical)


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

    def to_record(self, names: Mapping[str, tuple[str | None, str | None]] | None = None) -> dict[str, Any]:
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


LINK_REFRESH_SECONDS = 60.0


def pod_bytes(stats: Mapping[int, tuple[int, int]]) -> tuple[int, int]:
    """A pod's (rx, tx) bytes: all its interfaces but loopback."""
    rx = sum(v[0] for i, v in stats.items() if i != LOOPBACK_IFINDEX)
    tx = sum(v[1] for i, v in stats.items() if i != LOOPBACK_IFINDEX)
    return rx, tx


class LinkSource(Protocol):
    def links(self) -> dict[int, LinkInfo]: ...


class _LinkNames:
    """The host's ifindex → LinkInfo, dumped again only when needed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.links: dict[int, LinkInfo] = {}
        self.dumped_at = float("-inf")
        self.clock = clock

    def resolve(self, nl: LinkSource, indexes: Iterable[int]) -> dict[int, LinkInfo]:
        now = self.clock()
        if now - self.dumped_at > LINK_REFRESH_SECONDS or any(i not in self.links for i in indexes):
            self.links = nl.links()
            self.dumped_at = now
        return self.links


def interface_counters(
    stats: Mapping[int, tuple[int, int]], links: Mapping[int, LinkInfo], exclude_kinds: Iterable[str] = ()
) -> list[InterfaceBytes]:
    """Named counters of the interfaces, without loopback and the excluded kinds."""
    excluded = set(exclude_kinds)
    out = []
    for index, (rx, tx) in stats.items():
        link = links.get(index)
        if link is None or link.loopback or link.kind in excluded:
            continue
        out.append(InterfaceBytes(link.name, rx, tx, link.kind))
    return sorted(out, key=lambda i: i.interface)


def _ns_identity(path: Path | str) -> tuple[int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


class NetworkReader:
    """Reads node and pod byte counters; needs CAP_SYS_ADMIN (setns) for other namespaces."""

    def __init__(
        self,
        procfs: Path = Path("/proc"),
        host_pid: int = 1,
        exclude_kinds: Sequence[str] = DEFAULT_EXCLUDED_KINDS,
    ) -> None:
        self.procfs = Path(procfs)
        self.host_ns_path = self.procfs / str(host_pid) / "ns" / "net"
        self.exclude_kinds = tuple(exclude_kinds)
        self._host_fallback_logged = False
        self._host_links = _LinkNames()

    def _host_identity(self, own: tuple[int, int] | None) -> tuple[int, int] | None:
        """The host namespace's identity: that of <procfs>/<host_pid>, else the agent's own.

        Some hosts refuse even root a look at pid 1's namespace (ptrace rules); the agent then
        takes its own namespace for the host's, which is right for a DaemonSet pod with
        hostNetwork: true (what the manifests deploy) or an agent run on the host itself.
        """
        try:
            return _ns_identity(self.host_ns_path)
        except OSError as exc:
            if not self._host_fallback_logged:
                log.info(
                    "cannot see %s (%s); taking the agent's own network namespace for the node's",
                    self.host_ns_path,
                    exc.strerror or exc,
                )
                self._host_fallback_logged = True
            return own

    def read(
        self, pod_pids: Mapping[str, Sequence[int]],
        namespaces: Mapping[str, tuple[tuple[int, int], str]] | None = None,
    ) -> NetworkSample:
        """One reading of the node's interfaces and of the pods (uid → some of their pids);
        NAMESPACES: pods whose namespace (identity, path) the caller already has."""
        try:
            own: tuple[int, int] | None = _ns_identity(Path("/proc/thread-self/ns/net"))
        except OSError:
            own = None
        host = self._host_identity(own)
        known = namespaces or {}
        targets = {uid: known[uid] if uid in known else self._pod_namespace(pids) for uid, pids in pod_pids.items()}

        def work(worker: NamespaceWorker) -> NetworkSample:
            node_error = None
            interfaces: tuple[InterfaceBytes, ...] = ()
            try:
                with Rtnetlink() if host in (None, own) else worker.socket_in(self.host_ns_path) as nl:
                    stats = nl.stats()
                    links = self._host_links.resolve(nl, stats)
                interfaces = tuple(interface_counters(stats, links, self.exclude_kinds))
            except OSError as exc:
                node_error = f"cannot read the node's interfaces in {self.host_ns_path}: {exc}"
            pods: list[PodNetwork] = []
            seen: dict[tuple[int, int], str] = {}
            for uid in sorted(targets):
                target = targets[uid]
                if target is None:
                    continue  # no process of the pod is running (yet): nothing to read
                if isinstance(target, str):
                    pods.append(PodNetwork(uid, False, None, None, target))
                    continue
                identity, path = target
                if identity == host:
                    pods.append(PodNetwork(uid, True, None, None))
                    continue
                if identity in seen:
                    # Not in Kubernetes (each pod has its own sandbox), but never count bytes twice.
                    pods.append(PodNetwork(uid, False, None, None, f"shares its network namespace with pod {seen[identity]}"))
                    continue
                seen[identity] = uid
                try:
                    with Rtnetlink() if identity == own else worker.socket_in(Path(path)) as nl:
                        rx, tx = pod_bytes(nl.stats())
                except OSError as exc:
                    pods.append(PodNetwork(uid, False, None, None, f"cannot enter {path}: {exc.strerror or exc}"))
                    if worker.broken:
                        break
                    continue
                pods.append(PodNetwork(uid, False, rx, tx))
            return NetworkSample(interfaces, tuple(pods), node_error)

        try:
            return in_worker_thread(work)
        except OSError as exc:  # e.g. no thread of our own to switch namespaces in
            return NetworkSample(node_error=f"cannot read network counters: {exc}")

    def _pod_namespace(self, pids: Sequence[int]) -> tuple[tuple[int, int], str] | str | None:
        """(identity, path) of the pod's namespace; an error text when it is not readable; None
        when none of its processes exists any more."""
        error = None
        for pid in pids:
            path = f"{self.procfs}/{pid}/ns/net"  # a string: 100 pods' Path objects cost more than the stats
            try:
                return (_ns_identity(path), path)
            except (FileNotFoundError, ProcessLookupError):
                continue  # the process ended: try the next one
            except OSError as exc:
                # Typically EACCES: a ptrace-mode check, CAP_SYS_PTRACE is missing.
                error = f"cannot open {path}: {exc.strerror or exc}"
        return error


def network_gaps(sample: NetworkSample) -> list[Gap]:
    """What the sample could not read, as gaps (one for all the pods, not one per pod)."""
    gaps = []
    if sample.node_error:
        gaps.append(Gap("network", sample.node_error))
    failed = [p for p in sample.pods if p.error is not None]
    if failed:
        gaps.append(Gap("pod network", f"{len(failed)} pod(s) unreadable, e.g. {failed[0].uid}: {failed[0].error}"))
    return gaps


def with_network(
    snapshot: Snapshot, sample: NetworkSample | None, names: Mapping[str, tuple[str | None, str | None]] | None = None
) -> Snapshot:
    """The snapshot with the `network` section (record form) added.

    Pod names come from NAMES, else from the snapshot's own pods (already named by podmeta).
    """
    if sample is None:
        return snapshot
    known: dict[str, tuple[str | None, str | None]] = {p.uid: (p.namespace, p.name) for p in snapshot.pods}
    known.update(names or {})
    extra = tuple((k, v) for k, v in snapshot.extra if k != EXTRA_KEY)
    return dataclasses.replace(
        snapshot,
        extra=extra + ((EXTRA_KEY, sample.to_record(known)),),
        gaps=snapshot.gaps + tuple(g for g in network_gaps(sample) if g not in snapshot.gaps),
    )
