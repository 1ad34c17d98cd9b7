"""A real `kubejoule-agent run` on a node with two GPUs — the stand-in libnvidia-ml.so.1 loaded by the
real nvidia-ml-py, and the kubelet's PodResources on a real gRPC Unix socket: GPU series, pods'
`component="gpu"` share, node power = RAPL + GPUs, a GPU that falls off the bus, and a node
without any GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.harness import nvml_standin
from benchmarks.harness.nvml_standin import NvmlState
from benchmarks.harness.podresources_server import GPU, serving
from tests.helpers.agent_cli import REPO, check_record, strict_json
from tests.helpers.agent_proc import WORKLOADS, AgentProcess

FIXTURE = WORKLOADS / "v2-systemd-containerd"
MANIFEST = json.loads((FIXTURE / "workload.json").read_text())
PODS = {p["name"]: p for p in MANIFEST["pods"]}
WEB, API = PODS["web-7d9f8"], PODS["api-5c4b7"]
TRAINER_PID = WEB["containers"][1]["pids"][0]  # a process of the web pod uses GPU 0
SHARER_PID = API["containers"][1]["pids"][0]  # one of the api pod uses GPU 1
HOST_PID = 990  # and one outside every pod
INTERVAL = 0.5
RAPL_WATTS, GPU_WATTS = 40.0, (300.0, 100.0)
REL = 1e-6


def write_cgroup_files(agent: AgentProcess) -> None:
    """/proc/<pid>/cgroup of the GPU processes, as cgroup v2 writes it (`0::<path>`)."""
    for pod, pid in ((WEB, TRAINER_PID), (API, SHARER_PID)):
        container = next(c for c in pod["containers"] if pid in c["pids"])
        path = f"/{pod['cgroup']}/{container['cgroup']}".replace("//", "/")
        (agent.procfs / str(pid) / "cgroup").write_text(f"0::{path}\n")
    (agent.procfs / str(HOST_PID) / "cgroup").write_text("0::/system.slice/nvidia-persistenced.service\n")


@pytest.fixture(scope="module")
def library() -> Path:
    return nvml_standin.build()


@pytest.fixture
def gpu_node(library: Path, tmp_path: Path) -> Iterator[tuple[AgentProcess, NvmlState]]:
    state = NvmlState.with_gpus(tmp_path / "nvml.state", 2)
    socket = tmp_path / "kubelet.sock"
    # GPU 0 allocated to the web pod (by UUID, as NVIDIA's device plugin does); GPU 1 to no one
    with serving(socket, [("shop", WEB["name"], "app", GPU, [state.gpus[0].uuid])]):
        agent = AgentProcess(FIXTURE / "before", interval=INTERVAL, hermetic=True, env=state.env(), args=[
            "--nvml-library", str(library), "--pod-resources-socket", str(socket), "--process-top", "0"])
        write_cgroup_files(agent)
        with agent:
            yield agent, state


def advance(agent: AgentProcess, state: NvmlState, seconds: float = INTERVAL) -> None:
    used = {0: [(TRAINER_PID, 80)], 1: [(SHARER_PID, 40), (HOST_PID, 10)]}
    agent.advance(energy_uj={"intel-rapl:0": round(RAPL_WATTS * seconds * 1e6)},
                  cpu_ticks={"user": 100, "idle": 100}, cgroup_cpu={WEB["uid"]: 0.4, API["uid"]: 0.2},
                  also=lambda: state.run(seconds, list(GPU_WATTS), used))


def test_gpus_pods_and_node_power_with_exact_energy(gpu_node: tuple[AgentProcess, NvmlState]) -> None:
    agent, state = gpu_node
    advance(agent, state)
    start = {i: agent.value("kubejoule_gpu_energy_joules_total", gpu=str(i)) or 0.0 for i in (0, 1)}
    errors = agent.value("kubejoule_agent_errors_total", kind="gpu")
    for _ in range(3):
        advance(agent, state)
    text = agent.scrape()
    for index, watts in enumerate(GPU_WATTS):  # energy: the counters' deltas exactly
        total = agent.value("kubejoule_gpu_energy_joules_total", text, gpu=str(index))
        assert total == pytest.approx(start[index] + 3 * watts * INTERVAL, rel=REL)
        labels = next(lab for lab, _ in agent.samples("kubejoule_gpu_power_watts", text) if lab["gpu"] == str(index))
        assert labels["gpu_uuid"] == state.gpus[index].uuid and labels["gpu_name"] == "NVIDIA H100 80GB HBM3"
    modes = {lab["gpu"]: (lab["mode"], lab["method"]) for lab, _ in agent.samples("kubejoule_gpu_info", text)}
    assert modes == {"0": ("exclusive", "energy"), "1": ("shared", "energy")}
    gpu_w = {i: agent.value("kubejoule_gpu_power_watts", text, gpu=str(i)) for i in (0, 1)}
    node_w = agent.value("kubejoule_node_power_watts", text, source="rapl")
    assert node_w is not None and gpu_w[0] is not None and gpu_w[1] is not None
    rapl_w = agent.value("kubejoule_zone_power_watts", text, zone="package")
    dram_w = agent.value("kubejoule_zone_power_watts", text, zone="dram") or 0.0
    assert node_w == pytest.approx(rapl_w + dram_w + gpu_w[0] + gpu_w[1], rel=REL)  # RAPL side + GPUs
    # GPU 0 is the web pod's whole; GPU 1: 40 % to the api pod, 10 % to the host, 50 % idle
    web_gpu = agent.value("kubejoule_pod_power_watts", text, pod_uid=WEB["uid"], component="gpu")
    api_gpu = agent.value("kubejoule_pod_power_watts", text, pod_uid=API["uid"], component="gpu")
    assert web_gpu == pytest.approx(gpu_w[0], rel=REL) and api_gpu == pytest.approx(0.4 * gpu_w[1], rel=REL)
    batch = PODS["batch-x2k9q"]["uid"]
    assert agent.value("kubejoule_pod_power_watts", text, pod_uid=batch, component="gpu") is None  # no GPU: no series
    # Σ pods (both components) + host + idle + unattributed = node
    pods = sum(v for _, v in agent.samples("kubejoule_pod_power_watts", text))
    host = agent.value("kubejoule_host_power_watts", text)
    idle = agent.value("kubejoule_node_idle_power_watts", text)
    unattributed = agent.value("kubejoule_gpu_unattributed_power_watts", text)
    assert host is not None and idle is not None and unattributed == 0.0
    assert pods + host + idle + unattributed == pytest.approx(node_w, rel=REL)
    assert idle >= 0.5 * gpu_w[1] * (1 - REL) and host >= 0.1 * gpu_w[1] * (1 - REL)
    # no GPU gap once the web pod was seen on its GPU (no API here: its processes named its pod)
    assert agent.value("kubejoule_agent_errors_total", text, kind="gpu") == errors
    assert agent.value("kubejoule_agent_errors_total", text, kind="invariant") == 0.0


def test_a_gpu_that_falls_off_the_bus_is_a_gap_and_node_power_is_unknown(
        gpu_node: tuple[AgentProcess, NvmlState]) -> None:
    agent, state = gpu_node
    advance(agent, state)
    state.gpus[1].errors = {"all": nvml_standin.GPU_IS_LOST}
    advance(agent, state)
    text = agent.scrape()
    assert agent.value("kubejoule_gpu_power_watts", text, gpu="1") is None
    assert agent.value("kubejoule_gpu_power_watts", text, gpu="0") is not None  # the other GPU stays measured
    assert agent.value("kubejoule_node_power_watts", text, source="rapl") is None  # never a partial sum
    assert agent.value("kubejoule_pod_power_watts", text, pod_uid=WEB["uid"], component="cpu") is None
    assert (agent.value("kubejoule_agent_errors_total", text, kind="gpu") or 0.0) >= 1.0
    gaps = [line for line in agent.logs if line.get("msg") == "gap" and "fallen off the bus" in line.get("reason", "")]
    assert gaps and gaps[0]["what"].startswith("gpu 1")
    state.gpus[1].errors = {}
    advance(agent, state)
    advance(agent, state)
    assert agent.value("kubejoule_node_power_watts", source="rapl") is not None  # back when it answers again


def test_without_a_gpu_no_series_and_one_line_saying_why(tmp_path: Path) -> None:
    state = NvmlState.with_gpus(tmp_path / "nvml.state", 1)
    state.init_rc = nvml_standin.DRIVER_NOT_LOADED
    state.write()
    with AgentProcess(FIXTURE / "before", interval=INTERVAL, hermetic=True, env=state.env(),
                      args=["--nvml-library", str(nvml_standin.build())]) as agent:
        agent.advance(energy_uj={"intel-rapl:0": 10_000_000}, cpu_ticks={"user": 100, "idle": 100})
        text = agent.scrape()
        assert "kubejoule_gpu_" not in text and 'component="gpu"' not in text
        assert agent.value("kubejoule_node_power_watts", text, source="rapl") is not None
        assert agent.value("kubejoule_agent_errors_total", text, kind="gpu") is None
    lines = [line for line in agent.logs if line.get("msg") == "no GPU series"]
    assert len(lines) == 1 and "kernel driver is not loaded" in lines[0]["reason"]


def test_once_records_each_gpu_and_the_pods_gpu_share(library: Path, tmp_path: Path) -> None:
    state = NvmlState.with_gpus(tmp_path / "nvml.state", 2)
    tree = tmp_path / "host"
    shutil.copytree(FIXTURE / "after", tree, symlinks=True)
    for pod, pid in ((WEB, TRAINER_PID), (API, SHARER_PID)):
        container = next(c for c in pod["containers"] if pid in c["pids"])
        (tree / "proc" / str(pid) / "cgroup").write_text(f"0::/{pod['cgroup']}/{container['cgroup']}\n")
    # GPUs at work: counters growing at 250 W and 100 W, processes sampled at every call
    for gpu, watts, used in ((state.gpus[0], 250, [(TRAINER_PID, 90, 0)]), (state.gpus[1], 100, [(SHARER_PID, 50, 0)])):
        gpu.energy_rate_mw, gpu.power_mw, gpu.processes = watts * 1000, watts * 1000, used
    state.write()
    socket = tmp_path / "kubelet.sock"
    with serving(socket, [("shop", WEB["name"], "app", GPU, [state.gpus[0].uuid])]):
        once = subprocess.run(
            [sys.executable, "-m", "agent.cmd.cli", "once", "--interval", "1", "--json", "--no-kube", "--no-network",
             "--procfs", str(tree / "proc"), "--sysfs", str(tree / "sys"), "--node", "n1",
             "--nvml-library", str(library), "--pod-resources-socket", str(socket)],
            cwd=REPO, env=state.env(), capture_output=True, text=True, timeout=60)
    out, err = once.stdout, once.stderr
    assert once.returncode == 0, err
    record = strict_json(out)
    check_record(record)
    assert [(g["index"], g["mode"], g["method"]) for g in record["gpus"]] == [(0, "exclusive", "energy"),
                                                                             (1, "shared", "energy")]
    assert [g["watts"] for g in record["gpus"]] == [pytest.approx(250.0, rel=0.05), pytest.approx(100.0, rel=0.05)]
    pods = {p["uid"]: p for p in record["pods"]}
    assert pods[WEB["uid"]]["gpu_watts"] == pytest.approx(record["gpus"][0]["watts"])
    assert pods[API["uid"]]["gpu_watts"] == pytest.approx(0.5 * record["gpus"][1]["watts"])
    assert "gpu_watts" not in pods[PODS["batch-x2k9q"]["uid"]]
