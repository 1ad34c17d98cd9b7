"""Agent overhead: CPU time per sample and peak memory of `kubejoule-agent run`.

Setup: 1000 real processes (spawned here, so /proc is the real one: 995 `sleep` and 5 fake
qemu VMs whose command lines carry `-name guest=…` and `-uuid`), and a generated cgroup v2 tree
of 100 pods (systemd driver, all three QoS classes, a pause and an app container each, the
spawned processes spread over them) next to a one-socket powercap tree.

Measured:
* in-process: CPU time (`time.process_time`) of `Sampler.read()` + `Sampler.compute()` per
  sample, with the default process top-10, as ms per sample and % of one core at the default
  5 s interval; target ≤ 25 ms (≤ 0.5 % of a core);
* `kubejoule-agent run --containers --process-top 10` (otherwise its defaults) as a subprocess
  on the same host for a few seconds at a 0.25 s interval, scraped every third sample (as
  Prometheus at 15 s against 5 s sampling): its own CPU time (utime + stime) per sample, and its
  peak RSS (VmHWM); target ≤ 80 MB.

Run alone: `python benchmarks/bench_agent.py`; `make bench` runs it with the others.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.cgroups import read_cgroups  # noqa: E402
from agent.hostfs import HostFS  # noqa: E402
from agent.processes import ProcessReader  # noqa: E402
from agent.sampler import Sampler  # noqa: E402

PROCESSES = 1000
VMS = 5
PODS = 100
SAMPLES = 60
TARGET_MS = 25.0
TARGET_RSS_MB = 80.0
DEFAULT_INTERVAL_S = 5.0
# A scrape every 3 samples: Prometheus at 15 s against the default 5 s sampling interval.
SAMPLES_PER_SCRAPE = 3


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
    # each fake VM is a shell plus its sleep: count both
    while len(children) + VMS < PROCESSES:
        children.append(subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL))


def stop(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children[:VMS]:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the group this benchmark created for the fake VM
    for child in children:
        child.kill()
    for child in children:
        child.wait()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def cgroup(directory: Path, usage_usec: int, pids: list[int]) -> None:
    write(directory / "cpu.stat", f"usage_usec {usage_usec}\nuser_usec {usage_usec}\nsystem_usec 0\n")
    write(directory / "cgroup.procs", "".join(f"{p}\n" for p in pids))


def build_sysfs(root: Path, pids: list[int]) -> Path:
    sysfs = root / "sys"
    shutil.copytree(REPO / "tests/fixtures/powercap/intel-1s/after/sys", sysfs, symlinks=True)
    base = sysfs / "fs/cgroup"
    write(base / "cgroup.controllers", "cpuset cpu io memory pids\n")
    top = base / "kubepods.slice"
    cgroup(top, 0, [])
    per_pod = max(1, len(pids) // PODS)
    for index in range(PODS):
        qos = ("guaranteed", "burstable", "besteffort")[index % 3]
        uid = f"{index:08x}-0000-4000-8000-{index:012x}"
        slug = uid.replace("-", "_")
        if qos == "guaranteed":
            pod = top / f"kubepods-pod{slug}.slice"
        else:
            pod = top / f"kubepods-{qos}.slice" / f"kubepods-{qos}-pod{slug}.slice"
        members = pids[index * per_pod : (index + 1) * per_pod]
        cgroup(pod, 2_000_000 + index, [])
        cgroup(pod / f"cri-containerd-{index:064x}.scope", 1000, members[:1])
        cgroup(pod / f"cri-containerd-{index + PODS:064x}.scope", 1_990_000 + index, members[1:])
    return sysfs


def bump_counters(sysfs: Path, step: int) -> None:
    """Move the package counter so every sample has a node power to attribute."""
    path = (sysfs / "class/powercap/intel-rapl:0").resolve() / "energy_uj"
    path.write_text(f"{int(path.read_text()) + 5_000_000 * step}\n")


def _cpu_ms(step: object, samples: int) -> list[float]:
    """CPU milliseconds of each call of `step` (a zero-argument callable)."""
    assert callable(step)
    times = []
    for _ in range(samples):
        started = time.process_time()
        step()
        times.append((time.process_time() - started) * 1000)
    return times


def in_process(sysfs: Path, process_top: int, containers: bool) -> dict[str, float]:
    """Read + compute per sample, and its two big parts measured alone (processes, cgroups)."""
    fs = HostFS(Path("/proc"), sysfs)
    sampler = Sampler(fs, "bench", process_top=process_top, containers=containers)
    state = {"before": sampler.read()}
    counts = {"processes": 0.0, "vms": 0.0, "pods": 0.0}

    def sample() -> None:
        after = sampler.read()
        snap = sampler.compute(state["before"], after)
        state["before"] = after
        counts.update(processes=len(after.processes), vms=len(snap.vms), pods=len(snap.pods))

    cpu_ms: list[float] = []
    wall_ms: list[float] = []
    for _ in range(SAMPLES):
        bump_counters(sysfs, 1)
        time.sleep(0.02)
        wall = time.perf_counter()
        cpu_ms += _cpu_ms(sample, 1)
        wall_ms.append((time.perf_counter() - wall) * 1000)
    reader = ProcessReader(fs)
    reader.read()
    process_ms = _cpu_ms(reader.read, SAMPLES // 2)
    reader.close()
    cgroup_ms = _cpu_ms(lambda: read_cgroups(fs, containers), SAMPLES // 2)
    sampler.close()
    cpu_ms.sort()
    mean = statistics.mean(cpu_ms)
    per_process_us = 1000 * statistics.mean(process_ms) / max(counts["processes"], 1)
    return {
        "cpu_ms": mean,
        "cpu_p95_ms": cpu_ms[int(0.95 * (len(cpu_ms) - 1))],
        "wall_ms": statistics.median(wall_ms),
        "per_process_us": per_process_us,
        "per_pod_us": 1000 * statistics.mean(cgroup_ms) / PODS,
        # the same sample on a host with exactly PROCESSES processes: scale the process part
        "at_1000_ms": mean - statistics.mean(process_ms) + per_process_us * PROCESSES / 1000,
        **counts,
    }


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def as_subprocess(sysfs: Path, seconds: float = 8.0, interval: float = 0.25) -> dict[str, float]:
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "run", "--procfs", "/proc", "--sysfs", str(sysfs),
         "--listen", "127.0.0.1:0", "--interval", str(interval), "--containers", "--process-top", "10",
         "--node", "bench"],
        cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert agent.stderr is not None
        port = None
        for line in agent.stderr:
            if '"listening"' in line:
                port = int(line.rsplit('"port": ', 1)[1].rstrip("}\n"))
                break
        if port is None:
            raise RuntimeError("the agent did not start")
        # keep reading its log, so a chatty agent never blocks on a full stderr pipe
        threading.Thread(target=agent.stderr.read, daemon=True).start()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:  # ready after the first complete sample
            if agent.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the agent did not become ready (exit code {agent.poll()})")
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.05)
        startup_cpu = proc_cpu_seconds(agent.pid)
        samples_at_start = _samples(url)
        end = time.monotonic() + seconds
        scrapes = ticks = size = 0
        while time.monotonic() < end:
            bump_counters(sysfs, 1)
            if ticks % SAMPLES_PER_SCRAPE == 0:
                with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
                    size = len(response.read())
                scrapes += 1
            ticks += 1
            time.sleep(interval)
        samples = _samples(url) - samples_at_start
        cpu = proc_cpu_seconds(agent.pid) - startup_cpu
        rss = peak_rss_mb(agent.pid)
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
    return {"cpu_ms": 1000 * cpu / max(samples, 1), "samples": samples, "scrapes": scrapes, "rss_mb": rss,
            "metrics_bytes": size}


def _samples(url: str) -> int:
    import json

    with urllib.request.urlopen(url + "/readyz", timeout=5) as response:
        return int(json.loads(response.read())["samples"])


def main() -> str:
    workdir = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    children: list[subprocess.Popen[bytes]] = []
    try:
        print(f"spawning {PROCESSES} processes and {PODS} pod cgroups…", file=sys.stderr)
        spawn(workdir, children)
        time.sleep(0.5)  # let the fake VMs' shells start their sleeps
        pids = [c.pid for c in children[VMS:]]
        sysfs = build_sysfs(workdir, pids)
        full = in_process(sysfs, process_top=10, containers=True)
        lean = in_process(sysfs, process_top=0, containers=False)
        sub = as_subprocess(sysfs)
    finally:
        stop(children)
        shutil.rmtree(workdir, ignore_errors=True)
    load = os.getloadavg()[0]

    def percent(ms: float) -> float:
        return 100 * ms / (DEFAULT_INTERVAL_S * 1000)

    def verdict(ms: float) -> str:
        return "met" if ms <= TARGET_MS else "MISSED"

    rows = [
        f"Host during the run: {full['processes']:.0f} processes in /proc ({PROCESSES} spawned by the benchmark, "
        f"the rest the machine's own), {full['pods']:.0f} pods, {full['vms']:.0f} VMs; "
        f"{os.cpu_count()} CPUs, load average {load:.1f}.",
        "",
        "| measure | default `run` (pods, VMs) | with `--containers --process-top 10` | target |",
        "|---|---|---|---|",
        f"| CPU per sample, read + attribution (mean) | {lean['cpu_ms']:.1f} ms | {full['cpu_ms']:.1f} ms | ≤ {TARGET_MS:.0f} ms |",
        f"| same, projected to exactly {PROCESSES} processes | {lean['at_1000_ms']:.1f} ms ({verdict(lean['at_1000_ms'])}) "
        f"| {full['at_1000_ms']:.1f} ms ({verdict(full['at_1000_ms'])}) | ≤ {TARGET_MS:.0f} ms |",
        f"| CPU per sample, p95 | {lean['cpu_p95_ms']:.1f} ms | {full['cpu_p95_ms']:.1f} ms | |",
        f"| share of one core at a 5 s interval | {percent(lean['at_1000_ms']):.2f} % | {percent(full['at_1000_ms']):.2f} % | ≤ 0.5 % |",
        f"| wall time per sample (median) | {lean['wall_ms']:.1f} ms | {full['wall_ms']:.1f} ms | |",
        f"| reading one process (`/proc/<pid>/stat`) | {lean['per_process_us']:.1f} µs | {full['per_process_us']:.1f} µs | |",
        f"| reading one pod's cgroups | {lean['per_pod_us']:.0f} µs | {full['per_pod_us']:.0f} µs | |",
        f"| `run`: whole-process CPU per sample ({sub['samples']:.0f} samples, a scrape of "
        f"{sub['metrics_bytes'] / 1024:.0f} KiB every {SAMPLES_PER_SCRAPE}) | | {sub['cpu_ms']:.1f} ms "
        f"({percent(sub['cpu_ms']):.2f} % of a core at 5 s) | |",
        f"| `run`: peak RSS (VmHWM) | | {sub['rss_mb']:.1f} MB ({'met' if sub['rss_mb'] <= TARGET_RSS_MB else 'MISSED'}) "
        f"| ≤ {TARGET_RSS_MB:.0f} MB |",
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    print(main())
