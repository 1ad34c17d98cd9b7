"""`kubejoule-agent run --vm-energy-dir` on a VM host and `--host-energy` (or the mount point) in
its guest, as real processes on fake trees (tests/helpers/agent_proc.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.cmd.vm_energy_cli import filesystem_type
from tests.fixtures.make_powercap import stat
from tests.helpers.agent_cli import run_agent, strict_json
from tests.helpers.agent_proc import WORKLOADS, AgentProcess

HOST_TREE = WORKLOADS / "v2-systemd-containerd" / "before"
WIN10 = 3001  # the libvirt VM on the host (-name guest=win10); 2403 is KubeVirt's default_fedora


def guest_tree(root: Path, mounted: Path | None) -> Path:
    """A guest's tree: its /proc/stat, an empty sys/, and the host's directory at the mount point."""
    stat(root, 1_000, 0, 10_000)
    (root / "sys").mkdir()
    if mounted is not None:
        (root / "run" / "kubejoule").mkdir(parents=True)
        (root / "run" / "kubejoule" / "host-energy").symlink_to(mounted)
    return root


@pytest.mark.slow
def test_the_host_publishes_each_vm_and_the_guest_reads_its_own_as_source_host(tmp_path: Path) -> None:
    vms = tmp_path / "vms"
    with AgentProcess(HOST_TREE, hermetic=True, args=["--vm-energy-dir", str(vms)]) as host:
        host.drive(40.0, utilization=0.5, process_share={WIN10: 0.4, 2403: 0.1})
        host.wait_samples(3)
        assert sorted(os.listdir(vms)) == ["default_fedora", "win10"]
        assert (vms / "win10" / "name").read_text() == "win10\n"
        with AgentProcess(guest_tree(tmp_path / "guest", vms / "win10"), hermetic=True) as guest:
            guest.scrape_until(lambda text: 'kubejoule_node_energy_joules_total{node="test-node",source="host"}' in text)
            guest_joules = guest.value("kubejoule_node_energy_joules_total", source="host")
            assert guest.samples("kubejoule_vm_power_watts") == []  # a guest sees no VM series of the host's
        host_joules = host.value("kubejoule_vm_energy_joules_total", vm="win10")
        once = run_agent("once", "--interval", "1", "--json", "--no-kube", "--no-network", "--procfs",
                         str(tmp_path / "guest" / "proc"), "--sysfs", str(tmp_path / "guest" / "sys"),
                         "--host-energy", str(vms / "win10"))
        host.stop_driving()
    assert guest_joules is not None and host_joules is not None
    assert 0 < guest_joules <= host_joules * 1.001  # the guest started later: part of its VM's energy
    assert once.returncode == 0, once.stderr
    record = strict_json(once.stdout)  # the host wrote four times during the second
    assert record["source"] == "host" and record["node_watts"] > 0, record
    # the agent stopped, the directories stay: a restarted agent resumes the counters
    assert sorted(os.listdir(vms)) == ["default_fedora", "win10"]


def test_bad_vm_energy_dir_and_host_energy_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    made = run_agent("run", "--no-kube", "--vm-energy-dir", str(tmp_path / "file" / "sub"))
    assert made.returncode == 2 and "--vm-energy-dir" in made.stderr
    given = run_agent("once", "--no-kube", "--host-energy", str(tmp_path / "file"))
    assert given.returncode == 2 and "not a directory" in given.stderr


def test_a_guest_without_the_mount_reads_rapl_as_before(tmp_path: Path) -> None:
    root = guest_tree(tmp_path / "guest", None)
    (root / "run" / "kubejoule" / "host-energy").mkdir(parents=True)  # an empty mount point: not used
    once = run_agent("once", "--interval", "0.2", "--json", "--no-kube", "--no-network", "--procfs",
                     str(root / "proc"), "--sysfs", str(root / "sys"))
    assert once.returncode == 0, once.stderr
    record = strict_json(once.stdout)
    assert record["source"] == "none" and any("powercap" in g["reason"] for g in record["gaps"])


def test_the_filesystem_of_the_vm_energy_dir_is_the_longest_mount_above_it(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda / ext4 rw 0 0\ntmpfs /run tmpfs rw 0 0\ntmpfs /run/user/0 tmpfs rw 0 0\n"
                      "/dev/vdb /run/kubejoule\\040disk xfs rw 0 0\nbroken\n")
    assert filesystem_type(Path("/run/kubejoule/vms"), mounts) == "tmpfs"
    assert filesystem_type(Path("/run/kubejoule disk/vms"), mounts) == "xfs"
    assert filesystem_type(Path("/var/lib/vms"), mounts) == "ext4"
    assert filesystem_type(Path("/run"), mounts) == "tmpfs"
    assert filesystem_type(Path("/x"), tmp_path / "absent") is None
