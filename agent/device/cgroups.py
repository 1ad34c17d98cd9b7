"""Pod and container CPU time from the kubelet's cgroups, v1 or v2, systemd or cgroupfs driver.

Where CPU time is accounted:

* cgroup v2 (unified, `<root>/cgroup.controllers` exists): `cpu.stat` `usage_usec`.
* cgroup v1: `cpuacct.usage` (nanoseconds) in the hierarchy mounted as `cpuacct`,
  `cpu,cpuacct` or `cpuacct,cpu`. Hybrid hosts (v1 controllers plus a v2 `unified` mount with no
  controllers, like systemd's default on older distributions) account CPU in v1, so v1 wins
  when both are there.

How the kubelet lays pods out (QoS class from the parent; guaranteed pods sit directly under
the kubepods root):

* systemd driver: `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/
  cri-containerd-<id>.scope` — the uid has `_` for `-`; runtimes name scopes `cri-containerd-`,
  `crio-` (plus `crio-conmon-<id>.scope`, the runtime's monitor, which is in the pod but is not
  a container) or `docker-`.
* cgroupfs driver: `kubepods/burstable/pod<uid>/<id>` (`crio-<id>` or `docker-<id>` with some
  runtimes).

Pods and containers come and go while we read: a directory that vanishes mid-read is skipped,
never an error. A pod's usage is read from the pod's own cgroup, which the kernel accounts
hierarchically (it includes every container and the runtime's monitor).

A read that fails for another reason (permissions, EIO, garbage, a negative value) is not
churn: the pod or container stays in the reading with `usage_seconds=None`, so the sampler
knows it still exists — it is a gap for its interval, never a pod whose CPU moves into the host
or whose whole lifetime CPU is charged to the next interval. A directory that cannot be listed
makes the reading `incomplete` (pods may be missing from it, not gone).

Which processes are in which pod (`cgroup.procs` of each pod and container) is read only with
`membership`: the agent's `run` without process views needs it for its qemu VMs alone, and
finds their pods from each VM's own `/proc/<pid>/cgroup` (`process_pod`) instead of three
cgroup.procs per pod. Usage files can be read through descriptors kept open between reads
(agent/device/cgroupfs.py). Without membership and without containers a pod's directory is not even
listed: its usage file is all that is read.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent.device.hostfs import HostFS

if TYPE_CHECKING:
    from agent.device.cgroupfs import KeptUsageFiles

QOS_GUARANTEED = "Guaranteed"
QOS_BURSTABLE = "Burstable"
QOS_BESTEFFORT = "BestEffort"
_QOS_BY_NAME = {"burstable": QOS_BURSTABLE, "besteffort": QOS_BESTEFFORT}

# v1 hierarchies that account CPU time, in order of preference.
V1_CPUACCT_MOUNTS = ("cpu,cpuacct", "cpuacct,cpu", "cpuacct")
# Where the kubelet's root cgroup is, relative to the hierarchy root (kind and some
# distributions nest it under a kubelet slice).
KUBEPODS_ROOTS = (
    ("kubepods.slice",),
    ("kubepods",),
    ("kubelet.slice", "kubelet-kubepods.slice"),
    ("kubelet", "kubepods"),
)

_SYSTEMD_QOS = re.compile(r"^(?:kubelet-)?kubepods-(burstable|besteffort)\.slice$")
_SYSTEMD_POD = re.compile(r"^(?:kubelet-)?kubepods(?:-(?:burstable|besteffort))?-pod([0-9a-fA-F_]+)\.slice$")
_CGROUPFS_POD = re.compile(r"^pod([0-9a-fA-F-]+)$")
# A container's cgroup: "<runtime>-<id>.scope" (systemd) or "<id>" / "<runtime>-<id>" (cgroupfs).
_CONTAINER = re.compile(r"^(?:(cri-containerd|crio|docker|containerd)-)?([0-9a-fA-F]{12,64})(?:\.scope)?$")
# The runtime's monitor (CRI-O's conmon): in the pod, not a container.
_MONITOR = re.compile(r"^crio-conmon-[0-9a-fA-F]{12,64}(?:\.scope)?$")


class _Gone:
    """A cgroup removed while it was read (churn, not an error)."""


GONE = _Gone()


@dataclass(frozen=True)
class CgroupLayout:
    """Where CPU time is accounted on this host."""

    version: int  # 1 or 2
    root: Path  # the hierarchy root used for CPU time, e.g. <sysfs>/fs/cgroup/cpuacct
    kubepods: Path | None  # the kubelet's root cgroup within it, if any

    @property
    def usage_file(self) -> str:
        return "cpu.stat" if self.version == 2 else "cpuacct.usage"


@dataclass(frozen=True)
class ContainerCgroup:
    id: str  # the runtime's container id (hex), without the runtime prefix
    runtime: str | None  # "cri-containerd", "crio", "docker", or None when the name has none
    usage_seconds: float | None  # None: the read failed (see CgroupReading.errors)


@dataclass(frozen=True)
class PodCgroup:
    uid: str  # with dashes, as the API server spells it
    qos: str
    path: str  # relative to the hierarchy root
    usage_seconds: float | None  # None: the read failed (see CgroupReading.errors)
    containers: tuple[ContainerCgroup, ...] = ()
    pids: frozenset[int] = frozenset()  # processes in the pod's cgroups (thread group ids)


@dataclass(frozen=True)
class CgroupReading:
    layout: CgroupLayout | None
    pods: dict[str, PodCgroup] = field(default_factory=dict)
    errors: tuple[str, ...] = ()  # reasons something could not be read (not churn)
    incomplete: bool = False  # a directory could not be listed: pods may be missing, not gone
    membership_incomplete: bool = False  # a cgroup.procs could not be read: some pids' pod unknown


def detect_layout(fs: HostFS) -> tuple[CgroupLayout | None, str | None]:
    """Find the CPU accounting hierarchy. Returns (layout, None), or (None, reason) when a cgroup
    filesystem is there but has no CPU accounting; (None, None) when there is no cgroup
    filesystem at all (a host tree without one, e.g. a powercap-only snapshot)."""
    base = fs.cgroup_root
    if not base.is_dir():
        return None, None
    if _readable(fs, base / "cgroup.controllers"):
        return CgroupLayout(2, base, _find_kubepods(base)), None
    for mount in V1_CPUACCT_MOUNTS:
        root = base / mount
        if _readable(fs, root / "cpuacct.usage"):
            return CgroupLayout(1, root, _find_kubepods(root)), None
    unified = base / "unified"
    if _readable(fs, unified / "cgroup.controllers"):
        return CgroupLayout(2, unified, _find_kubepods(unified)), None
    return None, (
        f"no CPU accounting cgroup under {base}: expected cgroup v2 (cgroup.controllers) or a v1 "
        f"cpuacct hierarchy ({', '.join(V1_CPUACCT_MOUNTS)})"
    )


def _readable(fs: HostFS, path: Path) -> bool:
    # Read, not only stat: the read is recorded, so a snapshot keeps what detection relied on;
    # paths that do not exist are not recorded (a snapshot would warn about each of them).
    if not path.exists():
        return False
    try:
        fs.read_bytes(path)
    except OSError:
        return False
    return True


def _find_kubepods(root: Path) -> Path | None:
    for parts in KUBEPODS_ROOTS:
        candidate = root.joinpath(*parts)
        if candidate.is_dir():
            return candidate
    return None


def parse_usage_seconds(version: int, data: bytes) -> float:
    """CPU seconds from a v2 `cpu.stat` (usage_usec) or a v1 `cpuacct.usage` (ns): an unsigned
    integer, as the kernel writes it, or ValueError."""
    if version == 1:
        return _unsigned(data, "cpuacct.usage") / 1e9
    start = data.find(b"usage_usec ")
    if start < 0:
        raise ValueError("cpu.stat has no usage_usec")
    end = data.find(b"\n", start)
    return _unsigned(data[start + 11 : end if end >= 0 else None], "usage_usec") / 1e6


def _unsigned(text: bytes, what: str) -> int:
    digits = text.strip()
    if not digits.isdigit():  # no sign, no '.', no exponent, not empty
        raise ValueError(f"{what} is not an unsigned integer: {digits[:40]!r}")
    return int(digits)


def parse_pids(data: bytes) -> list[int]:
    return [int(line) for line in data.split()]


class _Reader:
    """One pass over the kubepods tree; collects pods and real read errors."""

    def __init__(self, fs: HostFS, layout: CgroupLayout, containers: bool, membership: bool = True,
                 kept: KeptUsageFiles | None = None) -> None:
        self.fs = fs
        self.kept = kept
        self.layout = layout
        self.containers = containers
        self.membership = membership
        self.usage_name = layout.usage_file
        self.root_text = str(layout.root)
        self.errors: list[str] = []
        self.incomplete = False
        self.membership_incomplete = False

    def usage(self, directory: str) -> float | None | _Gone:
        """CPU seconds; None when the read failed (recorded); GONE when the cgroup was removed."""
        path = f"{directory}/{self.usage_name}"
        try:
            data = self.kept.read(path) if self.kept is not None else self.fs.read_if_exists(path)
            if data is None:
                return GONE  # removed while we read: churn
            return parse_usage_seconds(self.layout.version, data)
        except OSError as exc:
            self.errors.append(f"cannot read {path}: {exc.strerror or exc}")
        except ValueError as exc:
            self.errors.append(f"{path}: not a CPU usage ({exc})")
        return None

    def pids(self, directory: str) -> list[int]:
        path = f"{directory}/cgroup.procs"
        try:
            data = self.fs.read_if_exists(path)
            return parse_pids(data) if data is not None else []
        except OSError as exc:
            self.errors.append(f"cannot read {path}: {exc.strerror or exc}")
        except ValueError:
            self.errors.append(f"{path}: not a list of pids")
        self.membership_incomplete = True
        return []

    def subdirs(self, directory: str) -> list[str]:
        try:
            return self.fs.subdirs(directory)
        except OSError as exc:
            self.errors.append(f"cannot list {directory}: {exc.strerror or exc}")
            self.incomplete = True
            return []

    def pod(self, directory: str, uid: str, qos: str) -> PodCgroup | None:
        usage = self.usage(directory)
        if usage is GONE:
            return None
        assert not isinstance(usage, _Gone)
        containers: list[ContainerCgroup] = []
        rel = directory[len(self.root_text) + 1 :]
        if not self.membership and not self.containers:
            return PodCgroup(uid, qos, rel, usage)
        # v1 allows processes in the pod's own cgroup; v2 does not (its controllers are enabled
        # for the children), so that read is skipped there.
        pids = self.pids(directory) if self.layout.version == 1 and self.membership else []
        # Children are told apart by name, not by stat: every cgroup interface file has a name
        # that matches neither pattern, and one listdir is much cheaper than a stat per entry.
        try:
            names = self.fs.listdir(directory)
        except OSError as exc:
            self.errors.append(f"cannot list {directory}: {exc.strerror or exc}")
            self.membership_incomplete = True
            names = []
        for name in names:
            kind = _child_kind(name)
            if kind is None:
                continue
            child = f"{directory}/{name}"
            if self.membership:
                pids.extend(self.pids(child))
            if kind and self.containers:
                container_usage = self.usage(child)
                if not isinstance(container_usage, _Gone):
                    containers.append(ContainerCgroup(kind[1], kind[0], container_usage))
        return PodCgroup(uid, qos, rel, usage, tuple(containers), frozenset(pids))


@functools.lru_cache(maxsize=4096)
def _child_kind(name: str) -> tuple[str | None, str] | tuple[()] | None:
    """A pod cgroup's child by its name: (runtime, container id) for a container, () for the
    runtime's monitor, None for anything else (interface files: a v1 pod directory lists about
    twenty). Memoized: the same names come back for every pod at every sample."""
    match = _CONTAINER.match(name)
    if match is not None:
        return match.group(1), match.group(2)
    return () if _MONITOR.match(name) is not None else None


def read_cgroups(fs: HostFS, containers: bool = True, membership: bool = True,
                 kept: KeptUsageFiles | None = None) -> CgroupReading:
    """Every pod's CPU time, (with `membership`) processes and (with `containers`) containers'
    CPU time, as the kubelet laid them out; usage files through KEPT descriptors when given."""
    try:
        return _read_cgroups(fs, containers, membership, kept)
    finally:
        if kept is not None:
            kept.sweep()


def _read_cgroups(fs: HostFS, containers: bool, membership: bool, kept: KeptUsageFiles | None) -> CgroupReading:
    layout, reason = detect_layout(fs)
    if layout is None:  # with a reason, cgroups are there but unreadable: pods may exist unseen
        return CgroupReading(None, errors=(reason,) if reason else (), incomplete=reason is not None)
    pods: dict[str, PodCgroup] = {}
    if layout.kubepods is None:
        return CgroupReading(layout, pods)
    reader = _Reader(fs, layout, containers, membership, None if fs.record else kept)
    top = str(layout.kubepods)
    for name in reader.subdirs(top):
        directory = f"{top}/{name}"
        qos_match = _SYSTEMD_QOS.match(name)
        qos_name = qos_match.group(1) if qos_match else name if name in _QOS_BY_NAME else None
        if qos_name is not None:
            qos = _QOS_BY_NAME[qos_name]
            for pod_name in reader.subdirs(directory):
                uid = pod_uid(pod_name)
                if uid is not None:
                    pod = reader.pod(f"{directory}/{pod_name}", uid, qos)
                    if pod is not None:
                        pods[uid] = pod
            continue
        uid = pod_uid(name)
        if uid is not None:  # guaranteed pods sit directly under the kubepods root
            pod = reader.pod(directory, uid, QOS_GUARANTEED)
            if pod is not None:
                pods[uid] = pod
    return CgroupReading(layout, pods, tuple(reader.errors), reader.incomplete, reader.membership_incomplete)


def pod_uid(name: str) -> str | None:
    """The pod UID (with dashes) a pod cgroup's directory name carries, or None."""
    match = _SYSTEMD_POD.match(name) or _CGROUPFS_POD.match(name)
    if match is None:
        return None
    return match.group(1).replace("_", "-").lower()


def pod_pids(fs: HostFS, layout: CgroupLayout, pod: PodCgroup) -> list[int]:
    """The processes of one pod (its cgroup.procs and its children's), read on demand when the
    reading was made without membership; an unreadable file gives no pids."""
    reader = _Reader(fs, layout, containers=False)
    directory = f"{layout.root}/{pod.path}"
    pids = reader.pids(directory) if layout.version == 1 else []
    try:
        names = fs.listdir(directory)
    except OSError:
        return pids
    for name in names:
        if _child_kind(name) is not None:
            pids.extend(reader.pids(f"{directory}/{name}"))
    return pids


def process_pod(fs: HostFS, pid: int, layout: CgroupLayout) -> str | None:
    """The uid of the pod whose cgroup holds process PID, from its `/proc/<pid>/cgroup` line for
    the CPU accounting hierarchy (v2: `0::`; v1: the one whose controllers include cpuacct);
    None for a process outside every pod. The pod is found by its cgroup's name anywhere in
    the path, so a path seen through a cgroup namespace (`/../../kubepods-…`) or a cgroup
    nested inside a container gives the same pod. OSError when the file cannot be read
    (FileNotFoundError or ProcessLookupError: the process exited), ValueError when it has no
    line for that hierarchy."""
    data = fs.read_bytes(fs.proc(pid, "cgroup"))
    for line in data.splitlines():
        hierarchy, _, rest = line.partition(b":")
        controllers, _, path = rest.partition(b":")
        if layout.version == 2:
            wanted = hierarchy == b"0" and controllers == b""
        else:
            wanted = b"cpuacct" in controllers.split(b",")
        if wanted:
            for part in path.decode("utf-8", errors="replace").split("/"):
                uid = pod_uid(part) if part.startswith(("pod", "kube")) else None
                if uid is not None:
                    return uid
            return None
    raise ValueError(f"{fs.proc(pid, 'cgroup')} has no line for the CPU accounting hierarchy")
