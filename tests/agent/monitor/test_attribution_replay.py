"""Acceptance: `kubejoule-agent replay` on node trees with pods and VMs attributes power exactly as
DESIGN.md says, for cgroup v1/v2, both kubelet drivers and three runtimes.

Expected values are computed here from the fixture files themselves (counters read by path,
DESIGN.md's formulas applied), never copied from the agent's output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agent_cli import FIXTURES, replay_record, run_agent

WORKLOADS = FIXTURES / "workloads"
CASES = sorted(p.name for p in WORKLOADS.iterdir() if (p / "workload.json").is_file())
REL = 1e-6
QOS = {"guaranteed": "Guaranteed", "burstable": "Burstable", "besteffort": "BestEffort"}


def manifest(case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((WORKLOADS / case / "workload.json").read_text())
    return data


def usage_seconds(tree: Path, m: dict[str, Any], cgroup: str) -> float:
    path = tree / m["cgroup_root"] / cgroup / m["usage_file"]
    text = path.read_text()
    if m["usage_file"] == "cpuacct.usage":
        return int(text) / 1e9
    return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6


def energy_j(tree: Path, zone_id: str) -> float:
    return int((tree / "sys/class/powercap" / zone_id / "energy_uj").read_text()) / 1e6


def stat_ticks(tree: Path) -> tuple[float, float]:
    fields = [float(v) for v in (tree / "proc/stat").read_text().splitlines()[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, _steal = fields
    return (user + nice + system + irq + softirq), (idle + iowait)


def proc_seconds(tree: Path, pid: int) -> tuple[float, int] | None:
    path = tree / "proc" / str(pid) / "stat"
    if not path.is_file():
        return None
    rest = path.read_text().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / 100, int(rest[19])


def proc_delta(case: str, pid: int) -> float:
    after = proc_seconds(WORKLOADS / case / "after", pid)
    before = proc_seconds(WORKLOADS / case / "before", pid)
    assert after is not None
    if before is None or before[1] != after[1]:
        return after[0]
    return after[0] - before[0]


@dataclass
class Expected:
    node: float
    idle: float
    active: float
    busy: float
    pods: dict[str, float]  # uid -> watts
    pod_cpu: dict[str, float]
    host: float
    host_cpu: float
    skewed: bool


def expected(case: str, calibrated_idle: float | None = None) -> Expected:
    m = manifest(case)
    before, after = WORKLOADS / case / "before", WORKLOADS / case / "after"
    interval = m["interval_seconds"]
    node = sum(energy_j(after, z) - energy_j(before, z) for z in ("intel-rapl:0", "intel-rapl:0:1")) / interval
    busy_a, idle_a = stat_ticks(after)
    busy_b, idle_b = stat_ticks(before)
    busy = (busy_a - busy_b) / 100
    utilization = busy / (busy + (idle_a - idle_b) / 100)
    idle = node * (1 - utilization) if calibrated_idle is None else min(calibrated_idle, node)
    active = node - idle
    pod_cpu = {
        p["uid"]: usage_seconds(after, m, p["cgroup"]) - usage_seconds(before, m, p["cgroup"]) for p in m["pods"]
    }
    total = sum(pod_cpu.values())
    skewed = total > busy
    scale = busy / total if skewed else 1.0
    pods = {uid: active * c * scale / busy for uid, c in pod_cpu.items()}
    host = max(active * (busy - total) / busy, 0.0)
    return Expected(node, idle, active, busy, pods, pod_cpu, host, max(busy - total, 0.0), skewed)


def replay(case: str, *extra: str) -> dict[str, Any]:
    return replay_record(WORKLOADS / case / "before", WORKLOADS / case / "after", 2.0, "--node", "n1", *extra)


@pytest.mark.parametrize("case", CASES)
def test_replay_attributes_pods_host_and_idle_as_designed(case: str) -> None:
    record = replay(case)
    exp = expected(case)
    m = manifest(case)
    assert record["source"] == "rapl" and record["idle_source"] == "utilization"
    assert record["node_watts"] == pytest.approx(exp.node, rel=REL)
    assert record["idle_watts"] == pytest.approx(exp.idle, rel=REL)
    assert record["active_watts"] == pytest.approx(exp.active, rel=REL)
    pods = {p["uid"]: p for p in record["pods"]}
    assert set(pods) == {p["uid"] for p in m["pods"]}
    for spec in m["pods"]:
        pod = pods[spec["uid"]]
        assert pod["qos"] == QOS[spec["qos"]]
        assert pod["cpu_seconds"] == pytest.approx(exp.pod_cpu[spec["uid"]], rel=REL)
        assert pod["watts"] == pytest.approx(exp.pods[spec["uid"]], rel=REL)
        # containers: the runtime's id, the pod's watts shared by the containers' CPU time
        by_id = {c["id"]: c for c in pod["containers"]}
        assert set(by_id) == {c["id"] for c in spec["containers"]}  # a runtime monitor is no container
        for container in spec["containers"]:
            tree_path = f"{spec['cgroup']}/{container['cgroup']}"
            cpu = usage_seconds(WORKLOADS / case / "after", m, tree_path) - usage_seconds(
                WORKLOADS / case / "before", m, tree_path
            )
            assert by_id[container["id"]]["cpu_seconds"] == pytest.approx(cpu, rel=REL, abs=1e-12)
            assert by_id[container["id"]]["watts"] == pytest.approx(
                exp.pods[spec["uid"]] * cpu / exp.pod_cpu[spec["uid"]], rel=REL, abs=1e-12
            )
    assert record["host_watts"] == pytest.approx(exp.host, rel=REL, abs=1e-12)
    total = sum(p["watts"] for p in record["pods"]) + record["host_watts"] + record["idle_watts"]
    assert total == pytest.approx(record["node_watts"], rel=REL)
    assert record["gaps"] == []


@pytest.mark.parametrize("case", CASES)
def test_vms_are_views_inside_the_pod_or_host_part_that_holds_them(case: str) -> None:
    record = replay(case)
    exp = expected(case)
    m = manifest(case)
    pod_of_pid = {pid: p["uid"] for p in m["pods"] for c in p["containers"] for pid in c["pids"]}
    vms = {vm["pid"]: vm for vm in record["vms"]}
    assert set(vms) == set(m["qemu_pids"])
    for pid, vm in vms.items():
        cpu = proc_delta(case, pid)
        assert vm["cpu_seconds"] == pytest.approx(cpu, rel=REL)
        uid = pod_of_pid.get(pid)
        assert vm["pod_uid"] == uid
        part_watts = exp.pods[uid] if uid else exp.host
        part_cpu = exp.pod_cpu[uid] if uid else exp.host_cpu
        expected_watts = part_watts * cpu / part_cpu if part_cpu else 0.0
        assert vm["watts"] == pytest.approx(expected_watts, rel=REL, abs=1e-12)
        assert vm["watts"] <= part_watts + 1e-12
    by_name = {vm["name"]: vm for vm in record["vms"]}
    # KubeVirt: -name guest=<namespace>_<vmi>; libvirt on the host: -name guest=<domain>
    assert by_name["default_fedora"]["uuid"] == "8c1a2f7e-3b4d-4c5e-9f60-718293a4b5c6"
    assert by_name["default_fedora"]["pod_uid"] is not None
    assert by_name["win10"]["uuid"] == "4b9d6f2a-1c3e-4a5b-8d7f-9e0a1b2c3d4e"
    assert by_name["win10"]["pod_uid"] is None


def test_without_skew_a_view_is_active_power_times_its_cpu_share_of_busy_time() -> None:
    case = "v2-systemd-containerd"
    record = replay(case)
    exp = expected(case)
    for vm in record["vms"]:
        assert vm["watts"] == pytest.approx(exp.active * proc_delta(case, vm["pid"]) / exp.busy, rel=REL)
    for proc in record["processes"]:
        assert proc["watts"] == pytest.approx(exp.active * proc_delta(case, proc["pid"]) / exp.busy, rel=REL)


def test_read_skew_scales_pods_to_fit_and_leaves_the_host_nothing() -> None:
    case = "v2-cgroupfs-skew"
    exp = expected(case)
    assert exp.skewed  # the fixture really has Σc_i > B
    record = replay(case)
    assert sum(p["watts"] for p in record["pods"]) == pytest.approx(exp.active, rel=REL)
    assert record["host_watts"] == 0.0
    ratios = {p["uid"]: p["watts"] / p["cpu_seconds"] for p in record["pods"]}
    assert max(ratios.values()) == pytest.approx(min(ratios.values()), rel=REL)  # scaled together
    host_vm = next(vm for vm in record["vms"] if vm["pod_uid"] is None)
    assert host_vm["watts"] == 0.0 and host_vm["cpu_seconds"] > 0


def test_processes_carry_comm_only_and_churn_is_not_an_error() -> None:
    case = "v1-cgroupfs-docker"
    record = replay(case, "--process-top", "50")
    text = json.dumps(record)
    # the qemu command lines in the tree hold a secret; nothing of them but name and uuid leaves
    assert "c2VjcmV0" not in text and "masterKey0" not in text and "/usr/libexec" not in text
    procs = {p["pid"]: p for p in record["processes"]}
    assert procs[2403]["comm"] == "qemu-kvm"
    assert 960 not in procs  # exited during the interval
    assert 990 not in procs  # its stat vanished while read
    assert procs[970]["cpu_seconds"] == pytest.approx(proc_delta(case, 970))  # started in the interval
    assert procs[980]["comm"] == "gzip"  # the pid was reused: all of the new process's time counts
    assert procs[980]["cpu_seconds"] == pytest.approx(0.05)
    assert all(p["cpu_seconds"] > 0 for p in record["processes"])
    assert [p["watts"] for p in record["processes"]] == sorted((p["watts"] for p in record["processes"]), reverse=True)
    assert record["gaps"] == []


def test_process_top_limits_the_list() -> None:
    record = replay("v2-systemd-containerd", "--process-top", "3")
    assert len(record["processes"]) == 3
    assert replay("v2-systemd-containerd", "--process-top", "0")["processes"] == []


def test_calibrated_idle_replaces_the_utilization_rule(tmp_path: Path) -> None:
    case = "v2-systemd-containerd"
    profile = tmp_path / "profile.yaml"
    profile.write_text("schema: kubejoule.calibration/v1\nidle_watts: 10.0\nmax_watts: 60\nmodel: linear\n")
    record = replay(case, "--power-profile", str(profile))
    exp = expected(case, calibrated_idle=10.0)
    assert record["idle_source"] == "calibration"
    assert record["idle_watts"] == pytest.approx(10.0)
    assert record["active_watts"] == pytest.approx(exp.node - 10.0, rel=REL)
    for pod in record["pods"]:
        assert pod["watts"] == pytest.approx(exp.pods[pod["uid"]], rel=REL)
    total = sum(p["watts"] for p in record["pods"]) + record["host_watts"] + record["idle_watts"]
    assert total == pytest.approx(record["node_watts"], rel=REL)


def test_calibrated_idle_above_node_power_is_clamped_to_it(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("idle_watts: 500\n")
    record = replay("v1-hybrid-systemd-crio", "--power-profile", str(profile))
    assert record["idle_watts"] == pytest.approx(record["node_watts"], rel=1e-12)
    assert record["active_watts"] == 0.0
    assert all(p["watts"] == 0.0 for p in record["pods"]) and record["host_watts"] == 0.0


@pytest.mark.parametrize(
    ("content", "message"),
    [("max_watts: 50\n", "idle_watts"), ("idle_watts: lots\n", "must be a number"), ("- 1\n", "mapping"), ("a: [\n", "YAML")],
)
def test_a_bad_calibration_profile_is_a_usage_error(tmp_path: Path, content: str, message: str) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(content)
    case = WORKLOADS / "v2-systemd-containerd"
    proc = run_agent("replay", str(case / "before"), str(case / "after"), "--interval", "2", "--power-profile", str(profile))
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("case", ["v2-systemd-containerd", "v1-hybrid-systemd-crio"])
def test_snapshot_of_a_node_with_pods_replays_identically_and_redacts_qemu_command_lines(
    tmp_path: Path, case: str
) -> None:
    for phase in ("before", "after"):
        tree = WORKLOADS / case / phase
        proc = run_agent("snapshot", str(tmp_path / phase), "--procfs", str(tree / "proc"), "--sysfs", str(tree / "sys"))
        assert proc.returncode == 0, proc.stderr
        assert "warning" not in proc.stderr  # probing for cgroup layouts that are not there is no warning
    m = manifest(case)
    pod = m["pods"][0]
    copied = tmp_path / "after" / m["cgroup_root"] / pod["cgroup"]
    assert (copied / m["usage_file"]).is_file()
    assert (copied / pod["containers"][1]["cgroup"] / "cgroup.procs").is_file()
    assert (tmp_path / "after/proc/2403/stat").is_file()
    cmdline = (tmp_path / "after/proc/2403/cmdline").read_bytes()
    assert b"guest=default_fedora" in cmdline and b"-uuid" in cmdline
    assert b"c2VjcmV0" not in cmdline and b"rootdisk" not in cmdline
    original = replay(case)
    replayed = replay_record(tmp_path / "before", tmp_path / "after", 2.0, "--node", "n1")
    assert replayed == original


def test_the_table_shows_the_records_numbers() -> None:
    case = "v1-hybrid-systemd-crio"
    record = replay(case)
    proc = run_agent("replay", str(WORKLOADS / case / "before"), str(WORKLOADS / case / "after"), "--interval", "2",
                     "--node", "n1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"node power   {record['node_watts']:.2f} W" in lines
    assert f"host power   {record['host_watts']:.2f} W (active power of everything not in a pod)" in lines
    assert any(line.startswith(f"idle power   {record['idle_watts']:.2f} W (utilization)") for line in lines)
    for pod in record["pods"]:
        row = next(line for line in lines if line.startswith(pod["uid"]))
        assert row.split()[1:] == [pod["qos"], f"{pod['cpu_seconds']:.3f}", f"{pod['watts']:.2f}", "W"]
    for vm in record["vms"]:
        row = next(line for line in lines if line.startswith(vm["name"] + " "))
        assert row.split()[1:] == [str(vm["pid"]), f"{vm['cpu_seconds']:.3f}", f"{vm['watts']:.2f}", "W"]
    assert "gaps" not in proc.stdout
