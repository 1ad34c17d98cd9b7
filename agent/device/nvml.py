"""GPUs through NVML, the NVIDIA driver's management library, read with nvidia-ml-py (`pynvml`).

Per GPU, every read takes the total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`:
millijoules since the driver was loaded, an unsigned 64-bit integer), the power reading
(`nvmlDeviceGetPowerUsage`, milliwatts: the fallback where the counter is not supported, before
Volta), the enforced power limit (a plausibility hint), the MIG and virtualization modes, and the
per-process utilization samples since the last read (`nvmlDeviceGetProcessUtilization`: SM %
per pid, newer than the last read's time). The device's index, UUID and name are read once.

Nothing here is turned into watts: agent/monitor/gpu_power.py does that from two reads, with the same
counter arithmetic as RAPL (agent/device/energy.py). A call that fails is recorded with its reason —
NVML_ERROR_NOT_SUPPORTED, a GPU that fell off the bus (NVML_ERROR_GPU_IS_LOST), a library too
old for a function — never a 0.

The library is the system's `libnvidia-ml.so.1` (the driver installs it; NVIDIA's container
runtime mounts it into containers that ask for `utility`), or an explicit file: it is loaded
first (`ctypes.CDLL`), so pynvml's own `dlopen("libnvidia-ml.so.1")` finds it by its soname.
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

# NVML's return codes (nvml.h, nvmlReturn_t) the agent tells apart.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
# nvmlGpuVirtualizationMode_t: NONE and PASSTHROUGH are a whole GPU; VGPU (a guest's vGPU),
# HOST_VGPU and HOST_VSGA (a hypervisor sharing it) are split in ways NVML's process samples miss.
VIRTUALIZATION_WHOLE = (0, 1)
# nvmlDeviceGetTotalEnergyConsumption is an unsigned long long: it wraps at 2^64 mJ.
ENERGY_COUNTER_RANGE_MJ = 2**64

_INIT_HINTS = {
    NVML_ERROR_LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 was not found: no NVIDIA driver on this node, or its "
    "library is not mounted into the agent's container (NVIDIA's container runtime with "
    "NVIDIA_DRIVER_CAPABILITIES=utility, or --nvml-library)",
    NVML_ERROR_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded (no GPU, or `modprobe nvidia`)",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "libnvidia-ml.so.1 and the loaded kernel driver are different versions "
    "(a driver upgrade without a reboot)",
    NVML_ERROR_FUNCTION_NOT_FOUND: "libnvidia-ml.so.1 is too old: it lacks nvmlInitWithFlags (NVML 7 or newer needed)",
    NVML_ERROR_NO_PERMISSION: "no permission to open the NVIDIA device files (/dev/nvidiactl)",
}


class NvmlUnavailable(RuntimeError):
    """No GPU can be read on this node; the message says why, in words."""


@dataclass(frozen=True)
class GpuDevice:
    index: int
    uuid: str
    name: str


@dataclass(frozen=True)
class GpuProcessSample:
    pid: int
    sm_percent: float  # the process's share of the GPU's SM time, percent (mean of its samples)


@dataclass(frozen=True)
class GpuRead:
    """One device at one read. None: that value could not be read (`errors` says why)."""

    device: GpuDevice
    energy_mj: int | None = None
    power_mw: int | None = None
    limit_mw: int | None = None
    mig: bool | None = None
    virtualization: int | None = None
    processes: tuple[GpuProcessSample, ...] | None = None
    errors: dict[str, str] = field(default_factory=dict)  # "energy", "power", "processes", "device" → reason
    unsupported: frozenset[str] = frozenset()  # "energy", "power": NVML_ERROR_NOT_SUPPORTED for this GPU
    lost: bool = False  # the GPU fell off the bus (or is otherwise inaccessible)


@dataclass(frozen=True)
class GpuReading:
    monotonic: float
    devices: tuple[GpuRead, ...]



@runtime_checkable
class NvmlErrorValue(Protocol):
    """pynvml's NVMLError: its NVML return code (an error raised elsewhere has none)."""

    value: int


def describe(exc: Exception, what: str) -> str:
    """An NVML error in words, with what was being read."""
    value = exc.value if isinstance(exc, NvmlErrorValue) else None
    if value == NVML_ERROR_NOT_SUPPORTED:
        return f"{what}: not supported by this GPU (NVML_ERROR_NOT_SUPPORTED)"
    if value == NVML_ERROR_GPU_IS_LOST:
        return f"{what}: the GPU has fallen off the bus or is otherwise inaccessible (NVML_ERROR_GPU_IS_LOST)"
    if value == NVML_ERROR_FUNCTION_NOT_FOUND:
        return f"{what}: this libnvidia-ml.so.1 lacks the function (an older driver)"
    return f"{what}: NVML error {value}: {exc}"


class NvmlReader:
    """NVML opened once; `read()` takes every device's values; `close()` shuts NVML down."""

    def __init__(self, nvml: Any, driver: str, devices: list[tuple[GpuDevice, Any]]) -> None:
        self._nvml = nvml
        self.driver = driver
        self._devices = devices
        self._last_seen_us: dict[int, int] = {}

    @property
    def devices(self) -> list[GpuDevice]:
        return [device for device, _ in self._devices]

    @classmethod
    def open(cls, library: Path | None = None) -> NvmlReader:
        """NVML initialized and its devices listed, or NvmlUnavailable saying why not."""
        try:
            import pynvml
        except ImportError as exc:
            raise NvmlUnavailable(f"nvidia-ml-py (the pynvml module) is not installed: {exc}") from None
        if library is not None:
            try:  # loaded first: pynvml's dlopen("libnvidia-ml.so.1") then finds it by its soname
                ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                raise NvmlUnavailable(f"cannot load the NVML library {library}: {exc}") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            hint = _INIT_HINTS.get(exc.value, f"NVML error {exc.value}: {exc}")
            raise NvmlUnavailable(f"NVML cannot be initialized: {hint}") from None
        try:
            driver = str(pynvml.nvmlSystemGetDriverVersion())
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            pynvml.nvmlShutdown()
            raise NvmlUnavailable(describe(exc, "listing the GPUs")) from None
        if count == 0:
            pynvml.nvmlShutdown()
            raise NvmlUnavailable(f"the NVIDIA driver ({driver}) sees no GPU on this node")
        devices = []
        for index in range(count):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                device = GpuDevice(index, str(pynvml.nvmlDeviceGetUUID(handle)), str(pynvml.nvmlDeviceGetName(handle)))
            except pynvml.NVMLError:
                handle, device = None, GpuDevice(index, "", "")  # read again, and reported, at every read
            devices.append((device, handle))
        return cls(pynvml, driver, devices)

    def close(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()

    def read(self) -> GpuReading:
        reads = tuple(self._read_device(device, handle) for device, handle in self._devices)
        return GpuReading(time.monotonic(), reads)

    def _read_device(self, device: GpuDevice, handle: Any) -> GpuRead:
        nvml = self._nvml
        if handle is None:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(device.index)
            except nvml.NVMLError as exc:
                return GpuRead(device, errors={"device": describe(exc, f"GPU {device.index}")},
                               lost=exc.value == NVML_ERROR_GPU_IS_LOST)
        errors: dict[str, str] = {}
        unsupported: set[str] = set()
        values: dict[str, Any] = {}
        calls = (
            ("energy", nvml.nvmlDeviceGetTotalEnergyConsumption),
            ("power", nvml.nvmlDeviceGetPowerUsage),
            ("limit", nvml.nvmlDeviceGetEnforcedPowerLimit),
            ("mig", nvml.nvmlDeviceGetMigMode),
            ("virtualization", nvml.nvmlDeviceGetVirtualizationMode),
        )
        for what, call in calls:
            try:
                values[what] = call(handle)
            except nvml.NVMLError as exc:
                if exc.value == NVML_ERROR_GPU_IS_LOST:
                    return GpuRead(device, errors={"device": describe(exc, f"GPU {device.index}")}, lost=True)
                if what in ("energy", "power"):
                    errors[what] = describe(exc, "total energy counter" if what == "energy" else "power reading")
                    if exc.value == NVML_ERROR_NOT_SUPPORTED:
                        unsupported.add(what)
        processes = self._processes(device, handle, errors)
        mig = values.get("mig")
        return GpuRead(
            device,
            energy_mj=_unsigned(values.get("energy")),
            power_mw=_unsigned(values.get("power")),
            limit_mw=_unsigned(values.get("limit")),
            mig=bool(mig[0]) if isinstance(mig, (list, tuple)) and mig else None,
            virtualization=values.get("virtualization"),
            processes=processes,
            errors=errors,
            unsupported=frozenset(unsupported),
        )

    def _processes(self, device: GpuDevice, handle: Any,
                   errors: dict[str, str]) -> tuple[GpuProcessSample, ...] | None:
        """The processes that used the GPU since the last read, with their mean SM share."""
        nvml = self._nvml
        since = self._last_seen_us.get(device.index, 0)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, since)
        except nvml.NVMLError as exc:
            if exc.value == NVML_ERROR_NOT_FOUND:
                return ()  # no process used it since the last read
            errors["processes"] = describe(exc, "per-process utilization")
            return None
        by_pid: dict[int, list[int]] = {}
        for sample in samples:
            by_pid.setdefault(int(sample.pid), []).append(int(sample.smUtil))
            # the next read asks for samples newer than these (nvml.h: "a timeStamp retrieved
            # from a previous query"), never for ones the driver will still add at older times
            since = max(since, int(sample.timeStamp))
        self._last_seen_us[device.index] = since
        return tuple(GpuProcessSample(pid, sum(values) / len(values)) for pid, values in sorted(by_pid.items()))


def _unsigned(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and value >= 0 else None
