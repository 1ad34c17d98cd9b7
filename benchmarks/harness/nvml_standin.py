"""The stand-in NVML library (benchmarks/harness/nvml_standin.c), built here with gcc, and its state file.

`build()` compiles `libnvidia-ml.so.1` once per source version into a cache directory and returns
its path: the agent loads it with `--nvml-library PATH` (or finds it through LD_LIBRARY_PATH, as
`libnvidia-ml.so.1`), through the real nvidia-ml-py. `NvmlState` writes what it answers — one
GPU's counters, power, processes, a function's error code — atomically, so a reader never sees
half a file; the library reads the file named by $KUBEJOULE_NVML_STATE when it changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SOURCE = Path(__file__).with_name("nvml_standin.c")
STATE_ENV = "KUBEJOULE_NVML_STATE"
LIBRARY = "libnvidia-ml.so.1"
# nvmlReturn_t values the tests set (nvml.h)
NOT_SUPPORTED = 3
NO_PERMISSION = 4
DRIVER_NOT_LOADED = 9
GPU_IS_LOST = 15
LIB_RM_VERSION_MISMATCH = 18
UNKNOWN = 999


def build() -> Path:
    """The stand-in library, compiled from its source (cached by the source's hash)."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise RuntimeError("no C compiler (gcc) to build the stand-in NVML library")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"kubejoule-nvml-standin-{digest}"
    library = directory / LIBRARY
    if library.exists():
        return library
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{LIBRARY}.{os.getpid()}"
    subprocess.run([compiler, "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Werror", "-O2", "-shared",
                    "-fPIC", f"-Wl,-soname,{LIBRARY}", "-o", str(partial), str(SOURCE)], check=True)
    partial.replace(library)  # atomic: a concurrent build of the same source gives the same file
    return library


@dataclass
class Gpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = ""
    energy_mj: int = 0
    energy_rate_mw: int = 0  # the counter grows at this rate from the state's write on
    power_mw: int = 0
    limit_mw: int = 700_000
    mig: bool = False
    virtualization: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # energy, power, limit, mig, virt, util, name, uuid, all
    processes: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, SM %, timestamp µs; 0: now)


@dataclass
class NvmlState:
    """What the stand-in answers. `write()` after each change."""

    path: Path
    gpus: list[Gpu] = field(default_factory=list)
    init_rc: int = 0
    driver: str = "550.54.15"

    @classmethod
    def with_gpus(cls, path: Path, count: int) -> NvmlState:
        state = cls(path, [Gpu(uuid=f"GPU-{index:08x}-1111-2222-3333-444455556666") for index in range(count)])
        state.write()
        return state

    def use(self) -> None:
        """Point this process's stand-in at this state file."""
        os.environ[STATE_ENV] = str(self.path)

    def env(self) -> dict[str, str]:
        return {**os.environ, STATE_ENV: str(self.path)}

    def run(self, seconds: float, watts: list[float], used: dict[int, list[tuple[int, int]]] | None = None) -> None:
        """Advance every GPU's counter by WATTS[i] × SECONDS, set its power reading to WATTS[i], and
        give it fresh process samples USED[i] = [(pid, SM %), …]."""
        now_us = int(time.time() * 1e6)
        for index, gpu in enumerate(self.gpus):
            gpu.energy_mj = (gpu.energy_mj + round(watts[index] * seconds * 1000)) % 2**64
            gpu.power_mw = round(watts[index] * 1000)
            gpu.processes = [(pid, sm, now_us) for pid, sm in (used or {}).get(index, [])]
        self.write()

    def write(self) -> None:
        lines = [f"init_rc={self.init_rc}", f"driver={self.driver}", f"count={len(self.gpus)}"]
        for index, gpu in enumerate(self.gpus):
            prefix = f"gpu.{index}."
            lines += [f"{prefix}name={gpu.name}", f"{prefix}uuid={gpu.uuid}", f"{prefix}energy_mj={gpu.energy_mj}",
                      f"{prefix}energy_rate_mw={gpu.energy_rate_mw}",
                      f"{prefix}power_mw={gpu.power_mw}", f"{prefix}limit_mw={gpu.limit_mw}",
                      f"{prefix}mig={int(gpu.mig)}", f"{prefix}virt={gpu.virtualization}"]
            lines += [f"{prefix}rc.{what}={code}" for what, code in gpu.errors.items()]
            lines += [f"{prefix}proc={pid},{sm},0,{stamp}" for pid, sm, stamp in gpu.processes]
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.write_text("\n".join(lines) + "\n")
        partial.replace(self.path)
