"""cgroup readers: which hierarchy accounts CPU, kubelet layouts, churn versus real errors."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent.device.cgroups import (
    QOS_BESTEFFORT,
    QOS_BURSTABLE,
    QOS_GUARANTEED,
    detect_layout,
    parse_usage_seconds,
    pod_uid,
    read_cgroups,
)
from agent.device.hostfs import HostFS
from tests.helpers.agent_cli import FIXTURES

WORKLOADS = FIXTURES / "workloads"
UID = "6f1c3b0e-2a4d-4e8b-9c71-0d5e8f2a1b01"
CID = "ab" * 32


def fs_for(tree: Path) -> HostFS:
    return HostFS(tree / "proc", tree / "sys")


@pytest.mark.parametrize(
    ("case", "version", "root"),
    [
        ("v2-systemd-containerd", 2, "fs/cgroup"),
        ("v1-cgroupfs-docker", 1, "fs/cgroup/cpu,cpuacct"),
        ("v1-hybrid-systemd-crio", 1, "fs/cgroup/cpuacct"),  # v1 wins over the unified mount
    ],
)
def test_the_cpu_accounting_hierarchy_is_found(case: str, version: int, root: str) -> None:
    tree = WORKLOADS / case / "after"
    layout, reason = detect_layout(fs_for(tree))
    assert reason is None and layout is not None
    assert layout.version == version
    assert layout.root == tree / "sys" / root
    assert layout.kubepods is not None and layout.kubepods.parent == layout.root


def test_no_cgroup_filesystem_is_not_an_error_but_one_without_cpu_accounting_is(tmp_path: Path) -> None:
    assert detect_layout(HostFS(tmp_path / "proc", tmp_path / "sys")) == (None, None)
    (tmp_path / "sys/fs/cgroup/memory").mkdir(parents=True)
    layout, reason = detect_layout(HostFS(tmp_path / "proc", tmp_path / "sys"))
    assert layout is None and reason is not None and "cpuacct" in reason
    reading = read_cgroups(HostFS(tmp_path / "proc", tmp_path / "sys"))
    assert reading.pods == {} and reading.errors == (reason,)


def test_a_unified_mount_alone_is_used_when_there_is_no_v1_cpuacct(tmp_path: Path) -> None:
    base = tmp_path / "sys/fs/cgroup"
    (base / "unified").mkdir(parents=True)
    (base / "unified/cgroup.controllers").write_text("cpu\n")
    layout, _ = detect_layout(HostFS(tmp_path / "proc", tmp_path / "sys"))
    assert layout is not None and layout.version == 2 and layout.root == base / "unified"


@pytest.mark.parametrize(
    ("name", "uid"),
    [
        (f"kubepods-burstable-pod{UID.replace('-', '_')}.slice", UID),
        (f"kubepods-besteffort-pod{UID.replace('-', '_')}.slice", UID),
        (f"kubepods-pod{UID.replace('-', '_')}.slice", UID),
        (f"kubelet-kubepods-burstable-pod{UID.replace('-', '_')}.slice", UID),  # kind's nesting
        (f"pod{UID}", UID),
        (f"pod{UID.upper()}", UID),
        ("kubepods-burstable.slice", None),
        ("burstable", None),
        (f"cri-containerd-{CID}.scope", None),
        ("system.slice", None),
    ],
)
def test_pod_uid_from_cgroup_names(name: str, uid: str | None) -> None:
    assert pod_uid(name) == uid


def _v2_cgroup(directory: Path, usage_usec: int, pids: Sequence[int] = ()) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cpu.stat").write_text(f"usage_usec {usage_usec}\nuser_usec 0\nsystem_usec 0\n")
    (directory / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))


def test_kind_nested_systemd_layout_with_every_runtime_naming(tmp_path: Path) -> None:
    base = tmp_path / "sys/fs/cgroup"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text("cpu\n")
    top = base / "kubelet.slice/kubelet-kubepods.slice"
    pod = top / "kubelet-kubepods-besteffort.slice" / f"kubelet-kubepods-besteffort-pod{UID.replace('-', '_')}.slice"
    _v2_cgroup(top, 0)
    _v2_cgroup(pod, 3_000_000)
    _v2_cgroup(pod / f"cri-containerd-{'1' * 64}.scope", 1_000_000, [11])
    _v2_cgroup(pod / f"crio-{'2' * 64}.scope", 1_000_000, [12])
    _v2_cgroup(pod / f"docker-{'3' * 64}.scope", 500_000, [13])
    _v2_cgroup(pod / f"crio-conmon-{'4' * 64}.scope", 500_000, [14])
    reading = read_cgroups(HostFS(tmp_path / "proc", tmp_path / "sys"))
    assert reading.errors == ()
    found = reading.pods[UID]
    assert found.qos == QOS_BESTEFFORT and found.usage_seconds == 3.0
    assert {(c.runtime, c.id) for c in found.containers} == {
        ("cri-containerd", "1" * 64), ("crio", "2" * 64), ("docker", "3" * 64)
    }
    assert found.pids == frozenset({11, 12, 13, 14})  # the monitor's process is in the pod


def test_fixture_pods_have_their_qos_classes_and_processes() -> None:
    for case in ("v2-systemd-containerd", "v1-cgroupfs-docker", "v1-hybrid-systemd-crio"):
        reading = read_cgroups(fs_for(WORKLOADS / case / "after"))
        qos = {uid: pod.qos for uid, pod in reading.pods.items()}
        assert sorted(qos.values()) == sorted([QOS_GUARANTEED, QOS_BURSTABLE, QOS_BESTEFFORT, QOS_BURSTABLE]), case
        assert 2403 in reading.pods["5e8d1c2b-7a6f-4e3d-9c8b-2a1f0e9d8c04"].pids  # qemu in virt-launcher
        assert all(len(pod.containers) >= 2 for pod in reading.pods.values())


def test_a_pod_removed_while_read_is_churn_but_unreadable_counters_are_errors(tmp_path: Path) -> None:
    base = tmp_path / "sys/fs/cgroup"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text("cpu\n")
    top = base / "kubepods"
    _v2_cgroup(top / "burstable" / f"pod{UID}", 1_000_000)
    # a pod directory already emptied by the kernel (its files gone): churn, not an error
    (top / "besteffort" / "pod00000000-0000-0000-0000-000000000001").mkdir(parents=True)
    # a usage file that is not a file, and one with garbage: real errors, with the path
    broken = top / "pod00000000-0000-0000-0000-000000000002"
    (broken / "cpu.stat").mkdir(parents=True)
    garbage = top / "pod00000000-0000-0000-0000-000000000003"
    garbage.mkdir(parents=True)
    (garbage / "cpu.stat").write_text("nr_periods 0\n")
    reading = read_cgroups(HostFS(tmp_path / "proc", tmp_path / "sys"))
    # the unreadable ones still exist (usage unknown: a gap for them, never a pod that vanished)
    unreadable = {"00000000-0000-0000-0000-000000000002", "00000000-0000-0000-0000-000000000003"}
    assert set(reading.pods) == {UID} | unreadable
    assert {uid for uid, pod in reading.pods.items() if pod.usage_seconds is None} == unreadable
    assert len(reading.errors) == 2
    assert any(str(broken / "cpu.stat") in e for e in reading.errors)
    assert any("usage_usec" in e for e in reading.errors)


def test_usage_parsing_units() -> None:
    assert parse_usage_seconds(1, b"1500000000\n") == 1.5
    assert parse_usage_seconds(2, b"usage_usec 2500000\nuser_usec 1\n") == 2.5
    assert parse_usage_seconds(2, b"nr_periods 1\nusage_usec 7\n") == 7e-6
    with pytest.raises(ValueError):
        parse_usage_seconds(1, b"abc")


@pytest.mark.skipif(not Path("/sys/fs/cgroup").is_dir(), reason="no cgroup filesystem here")
def test_this_host_has_a_cpu_accounting_hierarchy() -> None:
    layout, reason = detect_layout(HostFS())
    assert layout is not None, reason
    if not os.path.exists("/sys/fs/cgroup/cgroup.controllers") and os.path.exists("/sys/fs/cgroup/cpuacct/cpuacct.usage"):
        assert layout.version == 1  # hybrid/v1 host: CPU is accounted in v1
    assert read_cgroups(HostFS()).errors == ()


def _v1_cgroup(directory: Path, usage_ns: int, pids: Sequence[int] = ()) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cpuacct.usage").write_text(f"{usage_ns}\n")
    (directory / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))


@pytest.mark.parametrize(
    ("child", "runtime"),
    [(CID, None), (f"crio-{CID}", "crio"), (f"docker-{CID}", "docker"), (f"cri-containerd-{CID}", "cri-containerd")],
)
@pytest.mark.parametrize("qos", ["guaranteed", "burstable", "besteffort"])
def test_cgroupfs_driver_on_v1_with_each_runtime_naming_and_qos(tmp_path: Path, child: str, runtime: str | None,
                                                                 qos: str) -> None:
    root = tmp_path / "sys/fs/cgroup/cpuacct"
    _v1_cgroup(root, 10**12)
    top = root / "kubepods"
    pod = top / f"pod{UID}" if qos == "guaranteed" else top / qos / f"pod{UID}"
    _v1_cgroup(pod, 3 * 10**9, [7])  # v1 allows processes in the pod's own cgroup
    _v1_cgroup(pod / child, 2 * 10**9, [8, 9])
    _v1_cgroup(pod / f"crio-conmon-{'4' * 64}", 10**9, [10])  # CRI-O's monitor: in the pod, no container
    reading = read_cgroups(HostFS(tmp_path / "proc", tmp_path / "sys"))
    assert reading.errors == () and reading.layout is not None and reading.layout.version == 1
    found = reading.pods[UID]
    assert found.qos == {"guaranteed": QOS_GUARANTEED, "burstable": QOS_BURSTABLE, "besteffort": QOS_BESTEFFORT}[qos]
    assert found.usage_seconds == 3.0 and found.pids == frozenset({7, 8, 9, 10})
    assert [(c.id, c.runtime, c.usage_seconds) for c in found.containers] == [(CID, runtime, 2.0)]
