"""`run` without process views reads only what VMs need (agent/device/processes.py, agent/device/cgroups.py).

On a real procfs with `--process-top 0`: every process's comm, stat only for qemu processes,
and a VM's pod from its own /proc/<pid>/cgroup instead of every pod's cgroup.procs. These tests
check that this reads the same VMs, CPU time, pods and watts as the full read, on real
processes (and real cgroups where this machine lets root make them).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import agent.monitor.sampler as sampler_module
from agent.device.cgroups import CgroupLayout, process_pod
from agent.device.hostfs import HostFS
from agent.device.processes import ProcessReader
from agent.monitor.sampler import Sampler
from tests.fixtures.make_powercap import zone

UID = "0c0ffee0-0000-4000-8000-00000000abcd"


def fake_qemu(tmp_path: Path) -> Path:
    """A script whose comm is what qemu's is ("qemu-system-x86": 15 characters)."""
    script = tmp_path / "qemu-system-x86_64"
    script.write_text("#!/bin/sh\nwhile :; do sleep 1; done\n")
    script.chmod(0o755)
    return script


@contextlib.contextmanager
def processes(*commands: list[str]) -> Iterator[list[subprocess.Popen[bytes]]]:
    children = [subprocess.Popen(c, stdin=subprocess.DEVNULL, start_new_session=True) for c in commands]
    try:
        time.sleep(0.3)  # let the shells start
        yield children
    finally:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, 9)
            child.wait()


def test_vms_only_reads_the_qemu_processes_stat_and_sees_an_exec_into_qemu(tmp_path: Path) -> None:
    qemu = fake_qemu(tmp_path)
    # a process that becomes qemu later, keeping its pid and start time (libvirt forks, then execs)
    late = ["sh", "-c", f"sleep 0.8; exec {qemu} -name guest=late"]
    with processes([str(qemu), "-name", "guest=vm1"], ["sleep", "60"], late) as (vm, other, becomes):
        light = ProcessReader(HostFS(), vms_only=True)
        unkept = ProcessReader(HostFS(), vms_only=True)
        unkept._budget = 0  # no descriptor kept: the exec is still seen (by the start time)
        full = ProcessReader(HostFS())
        try:
            assert light.vms_only
            first, _ = light.read()
            unkept.read()
            everything, _ = full.read()
            assert vm.pid in first and other.pid not in first and becomes.pid not in first
            assert first[vm.pid] == everything[vm.pid]  # the same parse as the full read
            assert all(stat.comm.startswith(b"qemu") for stat in first.values())
            deadline = time.monotonic() + 10
            while becomes.pid not in (later := light.read()[0]) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert becomes.pid in later and later[becomes.pid].comm == b"qemu-system-x86"
            assert later[becomes.pid].start_ticks == everything[becomes.pid].start_ticks  # same process
            # its CPU time at the read before was not read: this interval is unknown for it, not
            # its lifetime's CPU (a full read would have had its stat); the next read knows it
            assert light.execed == {becomes.pid}
            assert becomes.pid in unkept.read()[0] and unkept.execed == {becomes.pid}
            assert unkept.open_descriptors == 0
            with processes([str(qemu), "-name", "guest=fresh"]) as (fresh,):  # started after the last read
                again, _ = light.read()
                assert becomes.pid in again and fresh.pid in again
                assert light.execed == frozenset()  # a new process counts from 0: not unknown
            assert light.open_descriptors >= len(everything) - 20  # comm descriptors are kept
        finally:
            light.close()
            unkept.close()
            full.close()
    assert light.open_descriptors == 0


def test_a_fixture_tree_is_always_read_whole(tmp_path: Path) -> None:
    """Replays and snapshots list every process whatever --process-top is."""
    (tmp_path / "proc/10").mkdir(parents=True)
    (tmp_path / "proc/10/stat").write_bytes(b"10 (nginx) S 1 10 10 0 -1 0 0 0 0 0 5 2 0 0 20 0 1 0 7 " + b"0 " * 30 + b"\n")
    reader = ProcessReader(HostFS(tmp_path / "proc", tmp_path / "sys"), vms_only=True)
    assert not reader.vms_only and 10 in reader.read()[0]
    recording = ProcessReader(HostFS(record=True), vms_only=True)
    assert not recording.vms_only  # a snapshot keeps every stat


@pytest.mark.parametrize(
    ("version", "text", "expected"),
    [
        (2, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c0ffee0_0000_4000_8000_00000000abcd"
            ".slice/cri-containerd-" + "a" * 64 + ".scope\n", UID),
        (2, "0::/system.slice/libvirtd.service\n", None),
        # seen through the agent's own cgroup namespace (a DaemonSet on cgroup v2)
        (2, "0::/../../kubepods-pod0c0ffee0_0000_4000_8000_00000000abcd.slice/cri-containerd-"
            + "b" * 64 + ".scope\n", UID),
        # cgroup v1 (cgroupfs driver): the cpuacct hierarchy's line, a cgroup nested in the container
        (1, "12:memory:/kubepods/burstable/pod" + UID + "/x\n4:cpu,cpuacct:/kubepods/burstable/pod" + UID
            + "/" + "c" * 64 + "/nested\n1:name=systemd:/\n", UID),
        (1, "4:cpu,cpuacct:/machine.slice/machine-qemu\\x2d1\\x2dwin10.scope\n", None),
    ],
    ids=["v2-systemd", "v2-host", "v2-namespace", "v1-cgroupfs-nested", "v1-host"],
)
def test_process_pod_reads_the_pod_from_the_cpu_hierarchys_line(
    tmp_path: Path, version: int, text: str, expected: str | None
) -> None:
    (tmp_path / "proc/77").mkdir(parents=True)
    (tmp_path / "proc/77/cgroup").write_text(text)
    fs = HostFS(tmp_path / "proc", tmp_path / "sys")
    assert process_pod(fs, 77, CgroupLayout(version, tmp_path, None)) == expected


def test_process_pod_without_a_line_for_the_hierarchy_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "proc/77").mkdir(parents=True)
    (tmp_path / "proc/77/cgroup").write_text("3:memory:/kubepods/pod" + UID + "\n")
    fs = HostFS(tmp_path / "proc", tmp_path / "sys")
    with pytest.raises(ValueError, match="no line"):
        process_pod(fs, 77, CgroupLayout(1, tmp_path, None))
    with pytest.raises(FileNotFoundError):
        process_pod(fs, 78, CgroupLayout(1, tmp_path, None))


def cpu_hierarchy() -> tuple[Path, int] | None:
    """A CPU accounting hierarchy root may make cgroups in (the one the agent would read)."""
    base = Path("/sys/fs/cgroup")
    if os.geteuid() != 0:
        return None
    if (base / "cgroup.controllers").exists():
        return base, 2
    for mount in ("cpu,cpuacct", "cpuacct,cpu", "cpuacct"):
        if (base / mount / "cpuacct.usage").exists():
            return base / mount, 1
    return None


def test_light_and_full_reads_give_the_same_vms_over_real_cgroups(tmp_path: Path) -> None:
    """A pod with a VM and a VM on the host, as real cgroups: `run`'s read (process_top 0) and
    the full read (process_top 10) give each VM the same pod, CPU time and watts."""
    found = cpu_hierarchy()
    if found is None:
        pytest.skip("needs root and a CPU-accounting cgroup hierarchy to make a pod's cgroup in")
    hierarchy, version = found
    if (hierarchy / "kubepods.slice").exists():
        pytest.skip("a kubelet owns kubepods.slice here: never touched")
    sysfs = tmp_path / "sys"
    zone(sysfs, "intel-rapl", "intel-rapl:0", "package-0", "1000000000\n")
    (sysfs / "fs").mkdir()
    (sysfs / "fs/cgroup").symlink_to(hierarchy.parent if version == 1 else hierarchy)
    slug = UID.replace("-", "_")
    top = hierarchy / "kubepods.slice"
    pod = top / f"kubepods-pod{slug}.slice"
    container = pod / f"cri-containerd-{'d' * 64}.scope"
    made: list[Path] = []
    qemu = fake_qemu(tmp_path)
    busy_vm = ["sh", "-c", f"exec {qemu} -name guest=in-pod -uuid 11111111-2222-4333-8444-555555555555"]
    try:
        with processes(busy_vm, [str(qemu), "-name", "guest=on-host"], ["sleep", "60"]) as (in_pod, on_host, _):
            for path in (top, pod, container):
                path.mkdir()
                made.append(path)
            (container / "cgroup.procs").write_text(f"{in_pod.pid}\n")
            fs = HostFS(Path("/proc"), sysfs)
            light, full = Sampler(fs, "n1", process_top=0), Sampler(fs, "n1", process_top=10)
            try:
                assert light._processes.vms_only and not full._processes.vms_only
                before = light.read(), full.read()
                time.sleep(0.5)
                energy = sysfs / "devices/virtual/powercap/intel-rapl/intel-rapl:0/energy_uj"
                energy.write_text("1010000000\n")
                after = light.read(), full.read()
                # the same instants for both, so only what each read differs
                snaps = [sampler.compute(b, a, 0.5) for sampler, b, a in
                         ((light, before[0], after[0]), (full, before[1], after[1]))]
                # a VM's pod is read once per process: the next read keeps it
                def read_again(*_: object) -> None:
                    raise AssertionError("a known VM's /proc/<pid>/cgroup read again")

                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(sampler_module, "process_pod", read_again)
                    third = light.read()
                assert third.vm_pods is not None and third.vm_pods[in_pod.pid] == UID
                assert third.vm_pods[on_host.pid] is None and not third.unplaced_vms
            finally:
                light.close()
                full.close()
            light_vms = {vm.pid: vm for vm in snaps[0].vms}
            full_vms = {vm.pid: vm for vm in snaps[1].vms}
            assert {in_pod.pid, on_host.pid} <= set(light_vms)
            assert set(light_vms) == set(full_vms)
            assert light_vms[in_pod.pid].pod_uid == UID and light_vms[on_host.pid].pod_uid is None
            assert light_vms[in_pod.pid].uuid == "11111111-2222-4333-8444-555555555555"
            for pid, vm in light_vms.items():
                assert (vm.name, vm.uuid, vm.pod_uid) == (full_vms[pid].name, full_vms[pid].uuid, full_vms[pid].pod_uid)
            # the pod's cgroup is read the same way by both, and no cgroup.procs by the light one
            assert [p.uid for p in snaps[0].pods] == [p.uid for p in snaps[1].pods] == [UID]
            assert after[0].cgroups is not None and after[0].cgroups.pods[UID].pids == frozenset()
            assert after[1].cgroups is not None and in_pod.pid in after[1].cgroups.pods[UID].pids
            assert not any(g.what == "vms" for g in snaps[0].gaps)
            # the network read still gets a live process per pod, read for that pod alone
            from agent.device.podprocs import PodProcesses

            kept = PodProcesses(fs)
            try:
                assert kept.pids(after[0].cgroups) == {UID: [in_pod.pid]}
                assert kept.pids(after[0].cgroups) == {UID: [in_pod.pid]}  # kept, not re-read
                st = os.stat(f"/proc/{in_pod.pid}/net/dev")  # and its namespace from the same look
                assert kept.namespaces == {UID: ((st.st_dev, st.st_ino), f"/proc/{in_pod.pid}/net/dev")}
                assert kept.pids(after[1].cgroups)[UID] == sorted(after[1].cgroups.pods[UID].pids)  # full: all
                os.killpg(in_pod.pid, 9)
                in_pod.wait()
                assert kept.pids(after[0].cgroups) == {UID: []}  # gone: never another process's pid
                assert kept.namespaces == {}
            finally:
                kept.close()
    finally:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                for member in (path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (hierarchy / "cgroup.procs").write_text(f"{member}\n")
            path.rmdir()


def test_a_vms_watts_do_not_depend_on_process_views() -> None:
    """Host processes whose ticks add up to more than the host part (read skew) scale the
    process views, never the VMs: a VM is shared among the VMs of its part."""
    from agent.device.processes import ProcStat
    from agent.device.procstat import CpuTimes
    from agent.device.rapl import RaplReading, Zone
    from agent.device.vms import VMIdentity
    from agent.monitor.raw_sample import RawSample

    package = Zone("intel-rapl:0", "intel-rapl", (0,), "package-0", 0, 262_143_328_850, None)

    def raw(t: float, energy_uj: int, busy: float, idle: float, ticks: dict[int, int]) -> RawSample:
        stats = {pid: ProcStat(pid, b"qemu-kvm" if pid == 50 else b"worker", n, 1) for pid, n in ticks.items()}
        return RawSample(t, t, RaplReading(True, {package.zone_id: package}, {package.zone_id: energy_uj}),
                         CpuTimes(busy, 0, 0, idle, 0, 0, 0, 0, cpus=4), None, None, stats,
                         {50: VMIdentity("vm", None)})

    # 2 s, 40 W, u = 0.5: active 20 W, all host (no pods), B = 4 s; the VM used 1 s, the others 6 s
    before = raw(0.0, 1_000_000_000, 100.0, 400.0, {50: 1000, 60: 500, 61: 500})
    after = raw(2.0, 1_080_000_000, 104.0, 404.0, {50: 1100, 60: 800, 61: 800})
    watts = {}
    for top in (0, 10):
        snap = Sampler(HostFS(), "n1", process_top=top).compute(before, after)
        assert snap.host_watts == pytest.approx(20.0)
        (vm,) = snap.vms
        watts[top] = vm.watts
        if top:  # the process views are scaled to fit the host part: 7 s of ticks in 4 s
            assert sum(p.watts or 0.0 for p in snap.processes) == pytest.approx(20.0)
    assert watts[0] == watts[10] == pytest.approx(20.0 * 1.0 / 4.0)
    # a VM that exec'd into qemu since the last read: unknown this interval, never its lifetime CPU
    import dataclasses

    snap = Sampler(HostFS(), "n1", process_top=0).compute(before, dataclasses.replace(after, execed=frozenset({50})))
    (vm,) = snap.vms
    assert vm.watts is None and vm.cpu_seconds is None
    assert any(g.what == "processes" and g.kind == "incomplete" and "exec" in g.reason for g in snap.gaps)


def test_kept_usage_descriptors_read_fresh_values_and_let_go_of_removed_cgroups(tmp_path: Path) -> None:
    """A pod's usage file kept open is re-generated by each pread; a removed cgroup reads as gone
    and its descriptor is closed; plain files (fixture trees) are never kept."""
    import sys

    from agent.device.cgroupfs import KeptUsageFiles
    from agent.device.cgroups import parse_usage_seconds

    plain = tmp_path / "cpu.stat"
    plain.write_text("usage_usec 5\n")
    kept = KeptUsageFiles(limit=10)
    assert kept.read(str(plain)) == b"usage_usec 5\n" and kept.open_descriptors == 0
    found = cpu_hierarchy()
    if found is None:
        pytest.skip("needs root and a CPU-accounting cgroup hierarchy to make a cgroup in")
    hierarchy, version = found
    cgroup = hierarchy / f"kj-test-usage-{os.getpid()}"
    cgroup.mkdir()
    path = str(cgroup / ("cpuacct.usage" if version == 1 else "cpu.stat"))
    try:
        first = parse_usage_seconds(version, kept.read(path) or b"")
        assert kept.open_descriptors == 1
        busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 0.4\nwhile time.time() < end: pass"])
        (cgroup / "cgroup.procs").write_text(f"{busy.pid}\n")
        busy.wait()
        second = parse_usage_seconds(version, kept.read(path) or b"")
        assert second > first + 0.05  # through the same descriptor
        kept.sweep()
        assert kept.open_descriptors == 1  # read since the last sweep: still kept
    finally:
        cgroup.rmdir()
    assert kept.read(path) is None  # removed: gone, not an error
    kept.sweep()
    assert kept.open_descriptors == 0
    kept.close()
