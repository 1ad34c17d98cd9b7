"""GPU watts from two NVML reads and their split (agent/monitor/gpu_power.py): RAPL's counter rules for
NVML's counter, the power reading as a fallback, plausibility, and who is charged — the pod a GPU
is allocated to, the processes that used a shared one, idle, or no one (unattributed, with a gap)."""

from __future__ import annotations

import pytest

from agent.device.energy import interval_ceiling_watts
from agent.device.gpu_source import GpuSample
from agent.device.nvml import (
    ENERGY_COUNTER_RANGE_MJ,
    GpuDevice,
    GpuProcessSample,
    GpuRead,
    GpuReading,
)
from agent.device.podresources import Allocations, Holder
from agent.monitor.gpu_power import (
    GPU_CEILING_WATTS,
    compute_gpus,
    device_watts,
    usable_limit_watts,
)

H100 = GpuDevice(0, "GPU-0000", "NVIDIA H100")
A10 = GpuDevice(1, "GPU-1111", "NVIDIA A10")
POD_A, POD_B = "aaaa-0001", "bbbb-0002"


def read(device: GpuDevice = H100, energy_mj: int | None = 0, power_mw: int | None = None, **fields: object) -> GpuRead:
    return GpuRead(device, energy_mj=energy_mj, power_mw=power_mw, limit_mw=fields.pop("limit_mw", 700_000),
                   **fields)  # type: ignore[arg-type]


def sample(*reads: GpuRead, when: float = 0.0, allocations: Allocations | None = None,
           pods: dict[int, str | None] | None = None, uids: dict[tuple[str, str], str] | None = None) -> GpuSample:
    return GpuSample(GpuReading(when, reads), allocations, pods or {}, uids or {})


@pytest.mark.parametrize(
    ("before_mj", "after_mj", "watts"),
    [
        (1_000_000, 2_500_000, 300.0),  # 1500 J over 5 s
        (ENERGY_COUNTER_RANGE_MJ - 500_000, 1_000_000, 300.0),  # a wrap at 2^64 mJ, undone as RAPL's
        (7, 7, 0.0),  # idle to the millijoule: 0 W is a reading, not a gap
    ],
)
def test_the_counter_delta_is_the_one_rapl_uses(before_mj: int, after_mj: int, watts: float) -> None:
    got, method, gap = device_watts(read(energy_mj=before_mj), read(energy_mj=after_mj), 5.0)
    assert (got, method, gap) == (pytest.approx(watts), "energy", None)


def test_a_counter_that_goes_backwards_is_implausible_not_a_wrap_of_2_to_the_64() -> None:
    got, _, gap = device_watts(read(energy_mj=5_000_000_000, limit_mw=300_000), read(energy_mj=1_000, limit_mw=300_000), 5.0)
    assert got is None and gap is not None and gap.kind == "implausible"
    assert "went backwards" in gap.reason and "900 W" in gap.reason  # 3 × the 300 W limit


@pytest.mark.parametrize(
    ("limit_mw", "wrap_ceiling"),
    [
        (300_000, 900.0),  # a usable limit: 3 × 300 W bounds what a counter that fell implies
        (700_000, GPU_CEILING_WATTS),  # 3 × 700 W is above 2 kW: a hint only ever tightens
        (1_000, 3.0),  # 1 W: the smallest usable limit
        (0, GPU_CEILING_WATTS),  # not a limit a GPU has: ignored
        (1, GPU_CEILING_WATTS),
        (10**9, GPU_CEILING_WATTS),  # a megawatt: ignored
        (None, GPU_CEILING_WATTS),
    ],
)
def test_a_power_limit_bounds_only_what_a_fallen_counter_implies(limit_mw: int | None, wrap_ceiling: float) -> None:
    """A hint never erases a measurement: a counter that rose is held to the GPU ceiling alone,
    whatever the limit says (a 1 W limit does not refuse a GPU drawing 1.98 kW)."""
    assert interval_ceiling_watts(GPU_CEILING_WATTS, usable_limit_watts(limit_mw), True) == pytest.approx(wrap_ceiling)
    just_below = round(GPU_CEILING_WATTS * 0.99 * 5 * 1000)
    ok, _, gap = device_watts(read(energy_mj=0, limit_mw=limit_mw), read(energy_mj=just_below, limit_mw=limit_mw), 5.0)
    assert gap is None and ok == pytest.approx(GPU_CEILING_WATTS * 0.99)
    above = round(GPU_CEILING_WATTS * 1.01 * 5 * 1000)
    refused, _, gap = device_watts(read(energy_mj=0, limit_mw=limit_mw), read(energy_mj=above, limit_mw=limit_mw), 5.0)
    assert refused is None and gap is not None and gap.kind == "implausible"
    # a power reading is a measurement too
    got, method, gap = device_watts(read(energy_mj=None, power_mw=1_900_000, limit_mw=limit_mw),
                                    read(energy_mj=None, power_mw=1_900_000, limit_mw=limit_mw), 5.0)
    assert (got, method, gap) == (pytest.approx(1_900.0), "power", None)


def test_without_the_counter_the_two_power_readings_are_averaged() -> None:
    no_counter = {"errors": {"energy": "total energy counter: not supported"}, "unsupported": frozenset({"energy"})}
    got, method, gap = device_watts(read(energy_mj=None, power_mw=100_000, **no_counter),
                                    read(energy_mj=None, power_mw=140_000, **no_counter), 5.0)
    assert (got, method, gap) == (pytest.approx(120.0), "power", None)
    got, _, gap = device_watts(read(energy_mj=None, power_mw=None, errors={"power": "power reading: NVML error 999"}),
                               read(energy_mj=None, power_mw=140_000), 5.0)
    assert got is None and gap is not None and gap.kind == "unreadable" and "999" in gap.reason


def test_an_exclusive_gpu_is_its_pods_whole_an_idle_one_too() -> None:
    held = Allocations({H100.uuid: (Holder("ml", "train-0", "trainer"),)})
    before = sample(read(energy_mj=0), when=0.0)
    after = sample(read(energy_mj=1_000_000, processes=()), when=5.0, allocations=held,
                   uids={("ml", "train-0"): POD_A})
    result = compute_gpus(before, after, 5.0)
    assert result.watts == pytest.approx(200.0) and result.pod_watts == {POD_A: pytest.approx(200.0)}
    assert (result.idle_watts, result.host_watts, result.unattributed_watts) == (0.0, 0.0, 0.0)
    assert result.devices[0].mode == "exclusive" and result.gaps == ()


def test_an_exclusive_gpus_pod_from_its_processes_when_the_api_has_not_named_it() -> None:
    held = Allocations({"0": (Holder("ml", "train-0", "trainer"),)})  # the index device-id strategy
    processes = (GpuProcessSample(77, 90.0),)
    result = compute_gpus(sample(read(energy_mj=0)),
                          sample(read(energy_mj=1_000_000, processes=processes), allocations=held, pods={77: POD_A}), 5.0)
    assert result.pod_watts == {POD_A: pytest.approx(200.0)}
    idle = compute_gpus(sample(read(energy_mj=0)), sample(read(energy_mj=1_000_000, processes=()), allocations=held), 5.0)
    assert idle.pod_watts == {} and idle.unattributed_watts == pytest.approx(200.0)
    assert "ml/train-0, whose UID is not known" in idle.gaps[0].reason


def test_a_shared_gpu_is_split_by_process_sm_share_the_rest_idle() -> None:
    replicas = Allocations({H100.uuid: (Holder("a", "p", "c"), Holder("b", "q", "c"))}, frozenset({H100.uuid}))
    processes = (GpuProcessSample(10, 50.0), GpuProcessSample(11, 20.0), GpuProcessSample(12, 10.0))
    after = sample(read(energy_mj=2_000_000, processes=processes), allocations=replicas,
                   pods={10: POD_A, 11: POD_B, 12: None})
    result = compute_gpus(sample(read(energy_mj=0)), after, 5.0)  # 400 W
    assert result.devices[0].mode == "shared"
    assert result.pod_watts == {POD_A: pytest.approx(200.0), POD_B: pytest.approx(80.0)}
    assert result.host_watts == pytest.approx(40.0) and result.idle_watts == pytest.approx(80.0)
    # samples adding up to more than the GPU are scaled to fit: never more than its watts
    busy = (GpuProcessSample(10, 100.0), GpuProcessSample(11, 60.0))
    over = compute_gpus(sample(read(energy_mj=0)), sample(read(energy_mj=2_000_000, processes=busy),
                                                           pods={10: POD_A, 11: POD_B}), 5.0)
    assert over.pod_watts == {POD_A: pytest.approx(250.0), POD_B: pytest.approx(150.0)} and over.idle_watts == 0.0


def test_what_cannot_be_split_is_unattributed_with_a_gap() -> None:
    exited = compute_gpus(sample(read(energy_mj=0)), sample(read(energy_mj=1_000_000, processes=(
        GpuProcessSample(10, 50.0),))), 5.0)
    assert exited.unattributed_watts == pytest.approx(100.0) and exited.idle_watts == pytest.approx(100.0)
    assert "exited before its pod could be read" in exited.gaps[0].reason
    for fields, words in (({"mig": True}, "MIG is enabled"), ({"virtualization": 2}, "vGPU"),
                          ({"processes": None, "errors": {"processes": "per-process utilization: NVML error 999"}},
                           "NVML error 999")):
        result = compute_gpus(sample(read(energy_mj=0)), sample(read(energy_mj=1_000_000, **fields)), 5.0)
        assert result.unattributed_watts == pytest.approx(200.0) and result.pod_watts == {}, fields
        assert words in result.gaps[0].reason and result.watts == pytest.approx(200.0)
    # PodResources failed: the part no process used may be an idle pod's, so it is not idle
    failed = Allocations(error="PodResources List failed: UNAVAILABLE")
    unknown = compute_gpus(sample(read(energy_mj=0)), sample(read(energy_mj=1_000_000, processes=(
        GpuProcessSample(10, 25.0),)), allocations=failed, pods={10: POD_A}), 5.0)
    assert unknown.pod_watts == {POD_A: pytest.approx(50.0)} and unknown.unattributed_watts == pytest.approx(150.0)
    assert unknown.idle_watts == 0.0


def test_node_gpu_power_is_unknown_when_a_measurable_gpu_is_and_skips_one_without_any_reading() -> None:
    lost = read(A10, energy_mj=None, errors={"device": "GPU 1: fallen off the bus"}, lost=True)
    result = compute_gpus(sample(read(energy_mj=0), read(A10, energy_mj=0)),
                          sample(read(energy_mj=1_000_000, processes=()), lost), 5.0)
    assert result.watts is None and result.devices[1].watts is None
    assert result.gaps[0].what == "gpu 1 (GPU-1111)" and result.gaps[0].kind == "unreadable"
    silent = {"energy_mj": None, "power_mw": None, "unsupported": frozenset({"energy", "power"}),
              "errors": {"energy": "not supported", "power": "not supported"}}
    result = compute_gpus(sample(read(energy_mj=0), read(A10, **silent)),
                          sample(read(energy_mj=1_000_000, processes=()), read(A10, **silent)), 5.0)
    assert result.watts == pytest.approx(200.0) and not result.devices[1].measurable
    assert "left out of node power" in result.gaps[0].reason
