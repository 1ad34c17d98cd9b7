"""One live process per pod, for what needs a pod's processes but not all of them (the network
read takes a pod's counters from any of its processes' net/dev).

`run` without process views reads no cgroup.procs (agent/device/cgroups.py), so a pod's processes are
read here, for that pod alone, only when the process kept for it is gone. A process is kept as a
descriptor of its /proc/<pid> directory: the descriptor belongs to that task, so once it exits a
lookup through it fails even if the pid is reused — the kept pid is never another process's.
Processes do not leave their pod's cgroup, so a live kept process is still in its pod.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from agent.device.cgroups import CgroupReading, pod_pids
from agent.device.hostfs import HostFS


class PodProcesses:
    def __init__(self, fs: HostFS) -> None:
        self.fs = fs
        self._kept: dict[str, tuple[int, int]] = {}  # pod uid -> (pid, descriptor of /proc/<pid>)
        # After pids(): each kept process's network namespace (identity, net/dev path), from the same stat
        # that found it alive, so the network read need not stat it again.
        self.namespaces: dict[str, tuple[tuple[int, int], str]] = {}

    def pids(self, reading: CgroupReading | None) -> dict[str, list[int]]:
        """uid -> some of the pod's pids (all of them when the reading has them; else one live one)."""
        pods = reading.pods if reading is not None else {}
        self.namespaces = {}
        if reading is None or reading.layout is None or any(pod.pids for pod in pods.values()):
            return {uid: sorted(pod.pids) for uid, pod in pods.items()}
        out: dict[str, list[int]] = {}
        namespaces = self.namespaces
        procfs = self.fs.procfs
        for uid, pod in pods.items():
            kept = self._kept.get(uid)
            identity = self._namespace(kept[1]) if kept is not None else None
            if kept is not None and identity is not None:
                out[uid] = [kept[0]]
                namespaces[uid] = (identity, f"{procfs}/{kept[0]}/net/dev")
                continue
            if kept is not None:
                os.close(self._kept.pop(uid)[1])
            out[uid] = []
            for pid in pod_pids(self.fs, reading.layout, pod):
                try:
                    fd = os.open(self.fs.proc(pid), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                except OSError:
                    continue  # exited: the next one
                self._kept[uid] = (pid, fd)
                out[uid] = [pid]
                break
        self._forget(pods)
        return out

    @staticmethod
    def _namespace(fd: int) -> tuple[int, int] | None:
        """The kept process's network namespace identity; None once it has exited (or it
        cannot be seen: the network read then says why)."""
        try:
            st = os.stat("net/dev", dir_fd=fd)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _forget(self, pods: Mapping[str, object]) -> None:
        for uid in [uid for uid in self._kept if uid not in pods]:
            os.close(self._kept.pop(uid)[1])

    def close(self) -> None:
        for _pid, fd in self._kept.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._kept.clear()
