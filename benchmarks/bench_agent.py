"""Agent overhead: the whole `kubejoule-agent run` process as a node runs it — CPU per sample and
peak memory, from the process itself.

Setup, as close to a node as this machine allows:

* 1,000 processes in the real /proc (spawned here: 995 `sleep`, 5 fake qemu VMs whose command
  lines carry `-name guest=…` and `-uuid`);
* 100 pods (systemd driver, all three QoS classes, a pause and an app container each, the spawned
  processes spread over the app containers) as REAL cgroups where the machine allows it (root and
  a writable CPU-accounting hierarchy: cgroup v2, or v1 `cpu,cpuacct`/`cpuacct`), the processes
  moved into them; the directories are removed afterwards. Elsewhere a generated cgroup v2 tree of
  plain files (the output says which);
* RAPL: a one-socket powercap tree laid out like the kernel's (this machine has none), its
  package counter moved every interval so every sample has power to attribute;
* Kubernetes: kmock's emulator (benchmarks/harness/agent_kube_emulator.py) serving the 100 pods on
  this node and their Metrics Server data; the agent runs against it through a kubeconfig, so
  the pod watch and the Metrics Server reads are on, as they are by default;
* `kubejoule-agent run` with its defaults otherwise (5 s interval, network counters on, pods and
  VMs exported), scraped at /metrics every 15 s as Prometheus would;
* and then the same node with 8 GPUs and a BMC (benchmarks/bench_agent_devices.py): the stand-in
  NVML library through the real nvidia-ml-py, the kubelet's PodResources over gRPC, an HTTPS
  Redfish BMC polled every 10 s. `--config cpu|devices` runs one of the two.

Measured, after the first sample and one more (start-up excluded): the agent process's own CPU
time (utime + stime from /proc/PID/stat, all its threads) divided by the samples it took, and its
peak RSS (VmHWM). Targets: ≤ 25 ms CPU per sample (0.5 % of a core at 5 s), peak RSS ≤ 80 MB;
stretch ≤ 10 ms. The emulator and the scraper run in this benchmark's process, not the agent's.

Run alone: `python benchmarks/bench_agent.py [--seconds 120] [--config both|cpu|devices] [--json]
[--profile FILE]` (120 s each: 24
samples, so one 10 ms clock tick of the agent's CPU time is 0.4 ms per sample)
(`--profile` runs the agent under cProfile and writes its stats to FILE); `make bench` runs it
with the others.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROCESSES = 1000
VMS = 5
PODS = 100
NODE = "bench"
INTERVAL_S = 5.0  # the agent's default
SCRAPE_EVERY_S = 15.0  # Prometheus' default scrape interval
TARGET_MS = 25.0
STRETCH_MS = 10.0
TARGET_RSS_MB = 80.0
REAL_CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_MOUNTS = ("cpu,cpuacct", "cpuacct,cpu", "cpuacct")


def spawn(workdir: Path, children: list[subprocess.Popen[bytes]]) -> None:
    """1000 idle processes; 5 of them look like qemu VMs (comm qemu-system-x86, -name, -uuid).
    Appends to `children` as it goes, so the caller can stop a partial spawn."""
    fake_qemu = workdir / "qemu-system-x86_64"
    fake_qemu.write_text("#!/bin/sh\nsleep 3600\n")
    fake_qemu.chmod(0o755)
    for index in range(VMS):
        children.append(subprocess.Popen(
            [str(fake_qemu), "-name", f"guest=bench-vm-{index},debug-threads=on",
             "-uuid", f"00000000-0000-4000-8000-{index:012d}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopping it also stops its sleep
        ))
    while len(children) + VMS < PROCESSES:  # each fake VM is a shell plus its sleep: count both
        children.append(subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL))


def stop(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children[:VMS]:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the group this benchmark created for the fake VM
    for child in children:
        child.kill()
    for child in children:
        child.wait()


def pod_uid(index: int) -> str:
    return f"{index:08x}-0000-4000-8000-{index:012x}"


def pod_layout(pids: list[int]) -> Iterator[tuple[int, str, list[str], list[int]]]:
    """(index, uid, path parts of the pod's cgroup under kubepods.slice, its app's pids)."""
    per_pod = max(1, len(pids) // PODS)
    for index in range(PODS):
        qos = ("guaranteed", "burstable", "besteffort")[index % 3]
        uid = pod_uid(index)
        slug = uid.replace("-", "_")
        if qos == "guaranteed":
            parts = [f"kubepods-pod{slug}.slice"]
        else:
            parts = [f"kubepods-{qos}.slice", f"kubepods-{qos}-pod{slug}.slice"]
        yield index, uid, parts, pids[index * per_pod : (index + 1) * per_pod]


def container_names(index: int) -> tuple[str, str]:
    return f"cri-containerd-{index:064x}.scope", f"cri-containerd-{index + PODS:064x}.scope"


@dataclass
class RealCgroups:
    """Pods as real cgroups in the host's CPU-accounting hierarchy; removed by `remove()`."""

    hierarchy: Path
    version: int
    made: list[Path] = field(default_factory=list)  # created, parents first

    @classmethod
    def find(cls) -> RealCgroups | None:
        """The hierarchy the agent would read, if this process may create cgroups in it."""
        if os.geteuid() != 0:
            return None
        if (REAL_CGROUP_ROOT / "cgroup.controllers").exists():
            candidates = [(REAL_CGROUP_ROOT, 2)]
        else:
            candidates = [(REAL_CGROUP_ROOT / m, 1) for m in V1_MOUNTS if (REAL_CGROUP_ROOT / m / "cpuacct.usage").exists()]
        for hierarchy, version in candidates[:1]:
            if (hierarchy / "kubepods.slice").exists():
                return None  # a kubelet (or another run) owns it: never touch it
            return cls(hierarchy, version)
        return None

    def mkdir(self, path: Path) -> None:
        if not path.exists():
            path.mkdir()
            self.made.append(path)

    def build(self, pids: list[int]) -> None:
        top = self.hierarchy / "kubepods.slice"
        self.mkdir(top)
        for index, _uid, parts, members in pod_layout(pids):
            pod = top
            for part in parts:
                pod = pod / part
                self.mkdir(pod)
            pause, app = (pod / name for name in container_names(index))
            self.mkdir(pause)
            self.mkdir(app)
            for pid, target in [(p, app) for p in members[1:]] + [(p, pause) for p in members[:1]]:
                with contextlib.suppress(ProcessLookupError):
                    (target / "cgroup.procs").write_text(f"{pid}\n")

    def remove(self) -> None:
        """Move any process left back to the root, then remove what was made, children first."""
        for path in reversed(self.made):
            with contextlib.suppress(OSError):
                for pid in (path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (self.hierarchy / "cgroup.procs").write_text(f"{pid}\n")
            with contextlib.suppress(OSError):
                path.rmdir()
        self.made = [p for p in self.made if p.exists()]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def generated_cgroups(base: Path, pids: list[int]) -> None:
    """A cgroup v2 tree of plain files, for machines where real cgroups cannot be made."""
    write(base / "cgroup.controllers", "cpuset cpu io memory pids\n")

    def cgroup(directory: Path, usage_usec: int, members: list[int]) -> None:
        write(directory / "cpu.stat", f"usage_usec {usage_usec}\nuser_usec {usage_usec}\nsystem_usec 0\n")
        write(directory / "cgroup.procs", "".join(f"{p}\n" for p in members))

    top = base / "kubepods.slice"
    cgroup(top, 0, [])
    for index, _uid, parts, members in pod_layout(pids):
        pod = top.joinpath(*parts)
        cgroup(pod, 2_000_000 + index, [])
        pause, app = container_names(index)
        cgroup(pod / pause, 1000, members[:1])
        cgroup(pod / app, 1_990_000 + index, members[1:])


def build_sysfs(root: Path, pids: list[int], real: RealCgroups | None) -> Path:
    sysfs = root / "sys"
    shutil.copytree(REPO / "tests/fixtures/powercap/intel-1s/after/sys", sysfs, symlinks=True)
    if real is not None:
        (sysfs / "fs").mkdir(exist_ok=True)
        (sysfs / "fs/cgroup").symlink_to(REAL_CGROUP_ROOT)  # the host's cgroupfs itself
    else:
        generated_cgroups(sysfs / "fs/cgroup", pids)
    return sysfs


def bump_counters(sysfs: Path, joules: float) -> None:
    """Move the package counter so every sample has a node power to attribute."""
    path = (sysfs / "class/powercap/intel-rapl:0").resolve() / "energy_uj"
    path.write_text(f"{int(path.read_text()) + int(joules * 1e6)}\n")


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


def run_agent(sysfs: Path, kubeconfig: Path, seconds: float, profile: Path | None, extra: list[str],
              env: dict[str, str] | None = None) -> dict[str, Any]:
    command = [sys.executable]
    if profile is not None:
        command += ["-m", "cProfile", "-o", str(profile)]
    command += ["-m", "agent.cmd.cli", "run", "--procfs", "/proc", "--sysfs", str(sysfs), "--listen", "127.0.0.1:0",
                "--node", NODE, "--kubeconfig", str(kubeconfig), "--interval", str(INTERVAL_S), *extra]
    agent = subprocess.Popen(command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    try:
        assert agent.stderr is not None
        port = None
        for line in agent.stderr:
            if '"listening"' in line:
                port = int(line.rsplit('"port": ', 1)[1].rstrip("}\n"))
                break
        if port is None:
            raise RuntimeError("the agent did not start")
        threading.Thread(target=agent.stderr.read, daemon=True).start()  # never block on its log
        url = f"http://127.0.0.1:{port}"

        def samples() -> int:
            return int(json.loads(_get(url + "/readyz"))["samples"])

        def wait_samples(count: int) -> None:
            deadline = time.monotonic() + 60 + 2 * INTERVAL_S * count
            while True:
                if agent.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the agent did not sample (exit code {agent.poll()})")
                try:
                    if samples() >= count:
                        return
                except OSError:
                    pass
                time.sleep(0.05)

        wait_samples(2)  # the first sample is ready; one more so start-up work is behind us
        start_samples, start_cpu = samples(), proc_cpu_seconds(agent.pid)
        started = next_scrape = next_bump = time.monotonic()
        scrapes, size = 0, 0
        while (now := time.monotonic()) < started + seconds:
            if now >= next_bump:
                bump_counters(sysfs, 40.0 * INTERVAL_S)  # about 40 W
                next_bump += INTERVAL_S
            if now >= next_scrape:
                size = len(_get(url + "/metrics"))
                scrapes += 1
                next_scrape += SCRAPE_EVERY_S
            time.sleep(max(0.0, min(next_bump, next_scrape, started + seconds) - time.monotonic()))
        taken, cpu = samples() - start_samples, proc_cpu_seconds(agent.pid) - start_cpu
        metrics = _get(url + "/metrics").decode()
        rss, peak = status_mb(agent.pid, "VmRSS"), status_mb(agent.pid, "VmHWM")
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
    named = sum(1 for line in metrics.splitlines() if line.startswith("kubejoule_pod_power_watts{")
                and 'pod=""' not in line)
    return {"samples": taken, "cpu_ms_per_sample": 1000 * cpu / max(taken, 1), "cpu_seconds": cpu,
            "scrapes": scrapes, "metrics_bytes": size, "rss_mb": rss, "peak_rss_mb": peak,
            "pods_named": named, "pod_series": metrics.count("kubejoule_pod_power_watts{"),
            "gpu_series": metrics.count("kubejoule_gpu_power_watts{"),
            "pod_gpu_series": metrics.count('component="gpu"') // 2,  # power and energy
            "platform_source": 'source="platform"' in metrics}


def measure(seconds: float, profile: Path | None = None, extra: list[str] | None = None,
            devices: bool = False) -> dict[str, Any]:
    from benchmarks.bench_agent_devices import gpu_node
    from benchmarks.harness.agent_kube_emulator import EmulatedCluster

    workdir = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    children: list[subprocess.Popen[bytes]] = []
    real = RealCgroups.find()
    try:
        print(f"spawning {PROCESSES} processes and {PODS} pod cgroups…", file=sys.stderr)
        spawn(workdir, children)
        time.sleep(0.5)  # let the fake VMs' shells start their sleeps
        pids = [c.pid for c in children[VMS:]]
        if real is not None:
            real.build(pids)
        sysfs = build_sysfs(workdir, pids, real)
        with EmulatedCluster() as cluster:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            cluster.set_node_metrics(NODE, "2", "4Gi", stamp)
            for index, uid, _parts, _members in pod_layout(pids):
                name = f"app-{index}"
                cluster.add_pod("bench", name, NODE, uid=uid)
                cluster.set_pod_metrics("bench", name, {"main": ("10m", "20Mi")}, stamp)
            kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
            if devices:
                users = [("bench", f"app-{index}", members[1:]) for index, _, _, members in pod_layout(pids)]
                with gpu_node(workdir, users) as (device_args, env):
                    result = run_agent(sysfs, kubeconfig, seconds, profile, [*(extra or []), *device_args], env)
            else:
                result = run_agent(sysfs, kubeconfig, seconds, profile, extra or [])
        processes = sum(1 for name in os.listdir("/proc") if name.isdigit())
    finally:
        stop(children)
        if real is not None:
            real.remove()
        shutil.rmtree(workdir, ignore_errors=True)
    if real is not None and real.made:
        raise RuntimeError(f"could not remove the benchmark's cgroups: {real.made}")
    cgroups = f"real cgroup v{real.version} ({real.hierarchy})" if real is not None else "generated files (not root)"
    return {**result, "agent_args": extra or [], "devices": devices, "processes_in_proc": processes, "pods": PODS,
            "cgroups": cgroups,
            "interval_seconds": INTERVAL_S, "scrape_every_seconds": SCRAPE_EVERY_S, "seconds": seconds,
            "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}


def table(results: list[dict[str, Any]]) -> str:
    first = results[0]
    lines = [
        f"Host during the runs: {first['processes_in_proc']} processes in /proc ({PROCESSES} spawned by the "
        f"benchmark), {first['pods']} pods as {first['cgroups']}, {first['cpus']} CPUs. `kubejoule-agent run` with "
        f"its defaults (interval {INTERVAL_S:g} s, network counters, pod watch and Metrics Server against kmock's "
        f"emulator), scraped every {SCRAPE_EVERY_S:g} s; \"GPUs + BMC\": 8 stand-in GPUs through nvidia-ml-py "
        "(4 allocated through PodResources, 4 shared by processes) and an HTTPS Redfish BMC polled every 10 s.",
        "",
        "| configuration | CPU per sample (target ≤ 25 ms) | share of a core | peak RSS (target ≤ 80 MB) | samples "
        "| load average | series |",
        "|---|---|---|---|---|---|---|",
    ]
    for result in results:
        ms, peak = result["cpu_ms_per_sample"], result["peak_rss_mb"]
        verdict = "met" if ms <= TARGET_MS else "MISSED"
        rss_verdict = "met" if peak <= TARGET_RSS_MB else "MISSED"
        series = f"{result['pods_named']} of {result['pod_series']} pod series named"
        if result["devices"]:
            series += (f"; {result['gpu_series']} GPU, {result['pod_gpu_series']} pod GPU series; "
                       f"platform source: {'yes' if result['platform_source'] else 'NO'}")
        lines.append(
            f"| {'GPUs + BMC' if result['devices'] else 'CPU only'} | {ms:.1f} ms ({verdict}) "
            f"| {100 * ms / (INTERVAL_S * 1000):.2f} % | {peak:.1f} MB ({rss_verdict}) | {result['samples']} "
            f"| {result['load_average']:.1f} | {series} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to measure (default 120)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--profile", type=Path, help="run the agent under cProfile, stats to this file")
    parser.add_argument("--agent-arg", action="append", default=[], metavar="ARG",
                        help="one more argument for `kubejoule-agent run`, e.g. --agent-arg=--no-network (repeatable)")
    parser.add_argument("--config", choices=["both", "cpu", "devices"], default="both",
                        help="the CPU-only node, the node with 8 GPUs and a BMC, or both one after the other (default)")
    args = parser.parse_args([] if argv is None else argv)
    if args.seconds < 2 * INTERVAL_S:
        parser.error(f"--seconds must be at least {2 * INTERVAL_S:g} (two samples)")
    configs = {"both": [False, True], "cpu": [False], "devices": [True]}[args.config]
    results = [measure(args.seconds, args.profile, args.agent_arg, devices) for devices in configs]
    return json.dumps(results, sort_keys=True) if args.json else table(results)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
