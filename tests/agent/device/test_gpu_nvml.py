"""The NVML reader through the real nvidia-ml-py, against the stand-in libnvidia-ml.so.1 built from
benchmarks/harness/nvml_standin.c (NVML's ABI as nvml.h declares it): what it reads, and every way
NVML says no — a missing library, a driver that is not loaded or of another version, a function
the GPU does not support, a GPU that falls off the bus."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.device.nvml import ENERGY_COUNTER_RANGE_MJ, NvmlReader, NvmlUnavailable
from benchmarks.harness import nvml_standin
from benchmarks.harness.nvml_standin import NvmlState
from tests.helpers.agent_cli import REPO


@pytest.fixture(scope="module")
def library() -> Path:
    return nvml_standin.build()


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> NvmlState:
    state = NvmlState.with_gpus(tmp_path / "nvml.state", 2)
    monkeypatch.setenv(nvml_standin.STATE_ENV, str(state.path))
    return state


@pytest.fixture
def reader(library: Path, state: NvmlState) -> Iterator[NvmlReader]:
    reader = NvmlReader.open(library)
    yield reader
    reader.close()


def test_devices_counters_power_and_processes_as_nvml_gives_them(reader: NvmlReader, state: NvmlState) -> None:
    assert reader.driver == "550.54.15"
    assert [(d.index, d.uuid, d.name) for d in reader.devices] == [
        (0, state.gpus[0].uuid, "NVIDIA H100 80GB HBM3"), (1, state.gpus[1].uuid, "NVIDIA H100 80GB HBM3")]
    state.gpus[0].mig = True
    state.gpus[1].virtualization = 2  # a vGPU inside a VM
    state.run(5.0, [300.0, 100.0], {1: [(4242, 30), (4243, 50), (4242, 10)]})  # two samples of pid 4242
    first = reader.read()
    gpu0, gpu1 = first.devices
    assert (gpu0.energy_mj, gpu0.power_mw, gpu0.limit_mw, gpu0.mig) == (1_500_000, 300_000, 700_000, True)
    assert (gpu1.energy_mj, gpu1.virtualization, gpu1.mig) == (500_000, 2, False)
    assert gpu0.processes is None and "processes" in gpu0.errors  # MIG: not supported by NVML
    assert [(p.pid, p.sm_percent) for p in gpu1.processes or ()] == [(4242, 20.0), (4243, 50.0)]
    # the next read asks for samples newer than those seen: none yet
    assert reader.read().devices[1].processes == ()


def test_the_counter_is_read_to_the_last_bit(reader: NvmlReader, state: NvmlState) -> None:
    state.gpus[0].energy_mj = ENERGY_COUNTER_RANGE_MJ - 1
    state.write()
    assert reader.read().devices[0].energy_mj == 2**64 - 1


def test_not_supported_and_a_lost_gpu_are_reasons_never_zeros(reader: NvmlReader, state: NvmlState) -> None:
    state.gpus[0].errors = {"energy": nvml_standin.NOT_SUPPORTED}
    state.gpus[1].errors = {"all": nvml_standin.GPU_IS_LOST}
    state.run(1.0, [200.0, 200.0])
    gpu0, gpu1 = reader.read().devices
    assert gpu0.energy_mj is None and gpu0.power_mw == 200_000
    assert "not supported" in gpu0.errors["energy"] and gpu0.unsupported == frozenset({"energy"})
    assert gpu1.lost and gpu1.energy_mj is None and gpu1.power_mw is None
    assert "fallen off the bus" in gpu1.errors["device"]
    # both readings unsupported: a GPU that reports no power
    state.gpus[0].errors = {"energy": nvml_standin.NOT_SUPPORTED, "power": nvml_standin.NOT_SUPPORTED}
    state.gpus[1].errors = {"power": nvml_standin.UNKNOWN}
    state.write()
    gpu0, gpu1 = reader.read().devices
    assert gpu0.unsupported == frozenset({"energy", "power"})
    assert gpu1.unsupported == frozenset() and "NVML error 999" in gpu1.errors["power"]


@pytest.mark.parametrize(
    ("init_rc", "why"),
    [
        (nvml_standin.DRIVER_NOT_LOADED, "kernel driver is not loaded"),
        (nvml_standin.LIB_RM_VERSION_MISMATCH, "different versions"),
        (nvml_standin.NO_PERMISSION, "no permission"),
    ],
)
def test_nvml_that_cannot_start_says_why(library: Path, state: NvmlState, init_rc: int, why: str) -> None:
    state.init_rc = init_rc
    state.write()
    with pytest.raises(NvmlUnavailable, match=why):
        NvmlReader.open(library)


def test_a_driver_without_gpus_and_a_library_that_is_not_there(library: Path, state: NvmlState,
                                                               tmp_path: Path) -> None:
    state.gpus = []
    state.write()
    with pytest.raises(NvmlUnavailable, match="sees no GPU"):
        NvmlReader.open(library)
    with pytest.raises(NvmlUnavailable, match="cannot load the NVML library"):
        NvmlReader.open(tmp_path / "missing.so.1")


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has a real NVIDIA driver")
def test_without_any_nvml_library_the_agent_says_why_in_one_line(state: NvmlState) -> None:
    """A fresh process (pynvml keeps the library it loaded): nothing preloaded, none installed."""
    proc = subprocess.run(
        [sys.executable, "-c", "from agent.device.nvml import NvmlReader, NvmlUnavailable\n"
         "try:\n    NvmlReader.open()\nexcept NvmlUnavailable as exc:\n    print(exc)"],
        capture_output=True, text=True, cwd=REPO, env=state.env(), timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("NVML cannot be initialized: libnvidia-ml.so.1 was not found")


def test_a_library_that_is_too_old_for_a_function(library: Path, state: NvmlState, tmp_path: Path) -> None:
    """An older libnvidia-ml without nvmlDeviceGetTotalEnergyConsumption (before Volta's drivers):
    pynvml's NVML_ERROR_FUNCTION_NOT_FOUND is that reading's reason, the power reading stands."""
    old = tmp_path / "old" / nvml_standin.LIBRARY
    old.parent.mkdir()
    source = nvml_standin.SOURCE.read_text().replace("nvmlDeviceGetTotalEnergyConsumption(", "removedTotalEnergy(")
    (tmp_path / "old.c").write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{nvml_standin.LIBRARY}", "-o", str(old),
                    str(tmp_path / "old.c")], check=True)
    state.run(1.0, [150.0, 150.0])
    code = ("import json\nfrom agent.device.nvml import NvmlReader\nr = NvmlReader.open(__import__('pathlib').Path("
            f"{str(old)!r}))\nd = r.read().devices[0]\nprint(json.dumps([d.energy_mj, d.power_mw, d.errors]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=state.env(),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    energy, power, errors = json.loads(proc.stdout)
    assert energy is None and power == 150_000 and "lacks the function" in errors["energy"]

