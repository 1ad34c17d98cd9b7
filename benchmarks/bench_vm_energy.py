"""What `--vm-energy-dir` costs a VM host's agent per sample, with 20 VMs (issue 37: ≤ 1 ms more).

Setup: 20 fake qemu VMs as real processes (comm `qemu-system-x86`, `-name guest=…` and `-uuid`
on their command lines) in this machine's /proc, a one-package powercap tree moved every sample,
and the sampler as `run` builds it (`process_top` 0: the light read of what VMs need). Each sample
is measured twice in one run, in the sampler's own thread: the sample without the flag (read and
compute) and what the flag adds (agent/exporter/vm_energy.py: 20 counters written atomically), on
tmpfs (/dev/shm, where a host would keep DIR: /run) and on the disk of the temporary directory.
CPU time is the thread's (CLOCK_THREAD_CPUTIME_ID: user and system); wall time beside it.

Run alone: `python benchmarks/bench_vm_energy.py [--samples 300] [--json]`; `make bench` runs it
with the others.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VMS = 20
SAMPLES = 300
INTERVAL_S = 5.0
TARGET_MS = 1.0


def spawn(workdir: Path) -> list[subprocess.Popen[bytes]]:
    fake_qemu = workdir / "qemu-system-x86_64"
    fake_qemu.write_text("#!/bin/sh\nsleep 3600\n")
    fake_qemu.chmod(0o755)
    return [subprocess.Popen([str(fake_qemu), "-name", f"guest=bench-vm-{i},debug-threads=on",
                              "-uuid", f"00000000-0000-4000-8000-{i:012d}"], stdin=subprocess.DEVNULL,
                             start_new_session=True) for i in range(VMS)]


def powercap(root: Path) -> Path:
    zone = root / "sys" / "class" / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("1000000\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    return root / "sys"


def measure(samples: int, directories: dict[str, Path], sysfs: Path) -> dict[str, Any]:
    from agent.device.hostfs import HostFS
    from agent.exporter.vm_energy import VmEnergyWriter
    from agent.monitor.sampler import Sampler

    sampler = Sampler(HostFS(Path("/proc"), sysfs), "bench", process_top=0)
    writers = {where: VmEnergyWriter(path) for where, path in directories.items()}
    energy = sysfs / "class" / "powercap" / "intel-rapl:0" / "energy_uj"
    base_cpu: list[float] = []
    base_wall: list[float] = []
    extra_cpu: dict[str, list[float]] = {where: [] for where in writers}
    extra_wall: dict[str, list[float]] = {where: [] for where in writers}
    vms_seen = 0
    try:
        before = sampler.read()
        for index in range(samples):
            energy.write_text(f"{1_000_000 + (index + 1) * 250_000_000}\n")  # 50 W over the interval
            cpu, wall = time.thread_time(), time.perf_counter()
            after = sampler.read()
            snapshot = sampler.compute(before, after, INTERVAL_S)
            base_cpu.append(time.thread_time() - cpu)
            base_wall.append(time.perf_counter() - wall)
            before = after
            vms_seen = len(snapshot.vms)
            for where, writer in writers.items():
                cpu, wall = time.thread_time(), time.perf_counter()
                writer.update(snapshot)
                extra_cpu[where].append(time.thread_time() - cpu)
                extra_wall[where].append(time.perf_counter() - wall)
        published = {where: len(os.listdir(path)) for where, path in directories.items()}
    finally:
        sampler.close()
        for writer in writers.values():
            writer.close()

    def ms(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {"median": statistics.median(ordered) * 1e3, "mean": statistics.fmean(ordered) * 1e3,
                "p95": ordered[int(0.95 * (len(ordered) - 1))] * 1e3}

    return {
        "vms": vms_seen, "samples": samples, "published": published,
        "without_cpu_ms": ms(base_cpu), "without_wall_ms": ms(base_wall),
        "extra_cpu_ms": {where: ms(values) for where, values in extra_cpu.items()},
        "extra_wall_ms": {where: ms(values) for where, values in extra_wall.items()},
    }


def run(samples: int = SAMPLES) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="kubejoule-bench-vm-energy-"))
    shm = Path("/dev/shm")
    tmpfs = Path(tempfile.mkdtemp(prefix="kubejoule-vms-", dir=shm)) if shm.is_dir() else None
    children = spawn(workdir)
    try:
        time.sleep(0.5)  # let the shells start
        directories = {"disk": workdir / "vms"}
        if tmpfs is not None:
            directories = {"tmpfs": tmpfs / "vms", **directories}
        return measure(samples, directories, powercap(workdir))
    finally:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, 9)
            child.wait()
        for path in (workdir, tmpfs):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


def table(result: dict[str, Any]) -> str:
    without = result["without_cpu_ms"]
    lines = [
        f"{result['vms']} VMs (fake qemu processes in /proc), {result['samples']} samples, the sampler as `run` "
        f"builds it: a sample without the flag takes {without['median']:.3f} ms CPU (median; "
        f"{result['without_wall_ms']['median']:.3f} ms wall).",
        "",
        "| --vm-energy-dir on | VMs published | extra CPU per sample, median | mean | p95 | extra wall, median | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for where, extra in result["extra_cpu_ms"].items():
        wall = result["extra_wall_ms"][where]
        verdict = "met" if extra["median"] <= TARGET_MS else "NOT met"
        lines.append(f"| {where} | {result['published'][where]} | {extra['median']:.3f} ms | {extra['mean']:.3f} ms | "
                     f"{extra['p95']:.3f} ms | {wall['median']:.3f} ms | ≤ {TARGET_MS:g} ms: {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv if argv is not None else [])
    result = run(args.samples)
    return json.dumps(result, indent=2) if args.json else table(result)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
