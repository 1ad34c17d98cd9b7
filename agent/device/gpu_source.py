"""What the sampler reads of the GPUs each time: NVML's values, the kubelet's allocations, and the
pod of each process NVML saw on a GPU — one `GpuSample` (agent/monitor/gpu_power.py turns two into watts)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent.device.cgroups import CgroupReading, process_pod
from agent.device.hostfs import HostFS
from agent.device.nvml import GpuReading, NvmlReader, NvmlUnavailable
from agent.device.podresources import Allocations, PodResourcesClient


@dataclass(frozen=True)
class GpuSample:
    """One read of the GPUs with what attribution needs at that instant."""

    reading: GpuReading
    allocations: Allocations | None  # None: no PodResources socket (no exclusive allocations known)
    process_pods: Mapping[int, str | None] = field(default_factory=dict)  # pid → pod uid (None: host)
    holder_uids: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (namespace, pod) → uid



# (namespace, pod name) → the pod's UID, from the pod watch's names; None until it knows the pod
UidLookup = Callable[[str, str], "str | None"]


class GpuSource:
    def __init__(self, reader: NvmlReader, pod_resources: PodResourcesClient | None = None) -> None:
        self.reader = reader
        self.pod_resources = pod_resources
        self.uid_of: UidLookup | None = None  # set once the pod watch runs (agent/cmd/cluster_cli.py)
        # an exclusive GPU's holder → the pod its processes were seen in: without the API (or
        # before it names the pod) an idle GPU stays charged to the pod that used it
        self._learned: dict[tuple[str, str], str] = {}

    @classmethod
    def open(cls, library: Path | None, socket: Path | None) -> GpuSource:
        """NvmlUnavailable (with the reason) when no GPU can be read here."""
        return cls(NvmlReader.open(library), PodResourcesClient(socket) if socket is not None else None)

    def sample(self, fs: HostFS, cgroups: CgroupReading | None) -> GpuSample:
        """NVML's values now; the allocations (listed again when the pods changed, see
        agent/device/podresources.py); the pod of each process NVML saw on a GPU."""
        reading = self.reader.read()
        layout = cgroups.layout if cgroups is not None else None
        pods = frozenset(cgroups.pods) if cgroups is not None else None
        allocations = self.pod_resources.list(pods) if self.pod_resources is not None else None
        owners: dict[int, str | None] = {}
        for device in reading.devices:
            for process in device.processes or ():
                if process.pid in owners:
                    continue
                if layout is None:
                    owners[process.pid] = None  # no pod cgroups on this host: every process is the host's
                    continue
                # exited (or unreadable): left out, so its share is unattributed, with a gap
                with contextlib.suppress(OSError, ValueError):
                    owners[process.pid] = process_pod(fs, process.pid, layout)
        return GpuSample(reading, allocations, owners, self._holder_uids(reading, allocations, owners))

    def _holder_uids(self, reading: GpuReading, allocations: Allocations | None,
                     pods: dict[int, str | None]) -> dict[tuple[str, str], str]:
        """The UID of each GPU holder: from the pod watch's names, else the pod in which the
        processes on its (exclusive) GPU were seen, then or earlier while it holds it."""
        if allocations is None or allocations.error is not None:
            return {}
        learned: dict[tuple[str, str], str] = {}
        for device in reading.devices:
            holders, replicated = allocations.holders(device.device)
            if len(holders) != 1 or replicated:
                continue
            key = (holders[0].namespace, holders[0].pod)
            seen = {pods.get(p.pid) for p in device.processes or () if p.pid in pods}
            if len(seen) == 1 and None not in seen:
                learned[key] = str(seen.pop())
            elif key in self._learned:
                learned[key] = self._learned[key]
        self._learned = learned  # holders that no longer hold a GPU are forgotten
        uids = dict(learned)
        if self.uid_of is not None:
            for holders in allocations.devices.values():
                for holder in holders:
                    uid = self.uid_of(holder.namespace, holder.pod)
                    if uid is not None:
                        uids[(holder.namespace, holder.pod)] = uid
        return uids

    def close(self) -> None:
        self.reader.close()
        if self.pod_resources is not None:
            self.pod_resources.close()


__all__ = ["GpuSource", "NvmlUnavailable", "UidLookup"]
