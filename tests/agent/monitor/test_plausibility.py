"""Plausibility before publication and per-entity baselines (issue 17, items 1 and 2).

Values that cannot be right become gaps with kind `implausible`; a pod, container or process
whose read failed stays known to exist, so it is never charged its lifetime CPU in one interval,
and its energy counter holds.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from agent.device.cgroups import CgroupLayout, CgroupReading, ContainerCgroup, PodCgroup
from agent.device.energy import (
    COUNTER_LIMIT_UJ,
    MAX_POWER_MARGIN,
    ZONE_CEILING_WATTS,
    ImplausibleError,
    check_counter_uj,
    check_power,
    power_ceiling_watts,
    usable_max_power_uw,
    zone_kind,
)
from agent.device.hostfs import HostFS
from agent.device.procstat import CpuTimes, cpu_delta, parse_proc_stat
from agent.device.rapl import RaplReading, Zone
from agent.exporter.prometheus import SnapshotCollector
from agent.monitor.rapl_power import compute_power
from agent.monitor.raw_sample import RawSample
from agent.monitor.sampler import Sampler
from agent.monitor.snapshot import Snapshot

PACKAGE = Zone("intel-rapl:0", "intel-rapl", (0,), "package-0", 0, 262_143_328_850, 150_000_000)
DRAM = Zone("intel-rapl:0:0", "intel-rapl", (0, 0), "dram", 0, 65_712_999_613, None)


# -- RAPL ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("value", "max_range", "plausible"),
    [
        (1_000, 262_143_328_850, True),
        (262_143_328_850, 262_143_328_850, True),  # at the range: still a reading
        (262_143_328_851, 262_143_328_850, False),  # above it: never
        (COUNTER_LIMIT_UJ - 1, None, True),
        (COUNTER_LIMIT_UJ, None, False),  # not a u64
        (COUNTER_LIMIT_UJ * 10, 262_143_328_850, False),
    ],
)
def test_counter_readings_table(value: int, max_range: int | None, plausible: bool) -> None:
    if plausible:
        check_counter_uj(value, max_range)
    else:
        with pytest.raises(ImplausibleError):
            check_counter_uj(value, max_range)


def test_power_ceiling_is_the_constraint_with_margin_else_the_kind_ceiling() -> None:
    assert power_ceiling_watts("package", 150_000_000) == pytest.approx(150.0 * MAX_POWER_MARGIN)
    # a hint only ever tightens: 3 × 600 W is above the package's 1500 W
    assert power_ceiling_watts("package", 600_000_000) == ZONE_CEILING_WATTS["package"]
    # and bounds only a counter that fell: one that rose is held to the kind's ceiling
    assert power_ceiling_watts("package", 150_000_000, counter_fell=False) == ZONE_CEILING_WATTS["package"]
    assert power_ceiling_watts(zone_kind("package-1-die-0"), None) == ZONE_CEILING_WATTS["package"]
    assert power_ceiling_watts("dram", None) == ZONE_CEILING_WATTS["dram"]
    check_power(449.0 * 2, 2.0, 450.0)
    with pytest.raises(ImplausibleError, match="W over 2 s"):
        check_power(451.0 * 2, 2.0, 450.0)
    with pytest.raises(ImplausibleError):
        check_power(float("nan"), 2.0, 450.0)


@pytest.mark.parametrize(
    ("kind", "max_power_uw", "usable"),
    [
        ("package", 150_000_000, 150_000_000),  # a Xeon's 150 W: the hint tightens the ceiling to 450 W
        ("package", 1_000_000, 1_000_000),  # 1 W: the smallest bound accepted
        ("package", 999_999, None),  # below a watt: no zone's bound; it would refuse every reading
        ("package", 1, None),
        ("package", 0, None),
        ("package", None, None),
        ("package", 1_500_000_000, 1_500_000_000),  # the kind's own ceiling
        ("package", 1_500_000_001, None),  # above it: no tighter than the kind's ceiling, ignored
        ("package", 10**18, None),  # would make the wrap period 0 s and every interval a gap
        ("dram", 1_000_000_001, None),  # dram's ceiling is 1000 W
        ("psys", 5_000_000_000, 5_000_000_000),
    ],
)
def test_a_max_power_hint_is_used_only_when_a_zone_could_have_it(
    kind: str, max_power_uw: int | None, usable: int | None
) -> None:
    assert usable_max_power_uw(kind, max_power_uw) == usable


def rapl(package_uj: int, dram_uj: int) -> RaplReading:
    return RaplReading(True, {PACKAGE.zone_id: PACKAGE, DRAM.zone_id: DRAM},
                       {PACKAGE.zone_id: package_uj, DRAM.zone_id: dram_uj})


def test_half_written_counter_taken_for_a_wrap_is_implausible_not_130_kw() -> None:
    """The issue's case: 1_000_000_000 then a half-written "10500" reads as a wrap of almost the
    whole range: 130,574 W on a zone whose maximum is 150 W."""
    power = compute_power(rapl(1_000_000_000, 300_000_000), rapl(10_500, 305_000_000), 2.0)
    assert power.watts is None
    gap = next(g for g in power.gaps if g.what.startswith("zone intel-rapl:0 "))
    assert gap.kind == "implausible" and "450 W" in gap.reason
    node = next(g for g in power.gaps if g.what == "node")
    assert node.kind == "incomplete"
    # the dram zone on its own is still measured
    assert {z.zone_id: z.watts for z in power.zones}["intel-rapl:0:0"] == pytest.approx(2.5)



@pytest.mark.parametrize("hint_uw", [1_000_000, 5_000_000, 150_000_000])
def test_a_counter_that_rose_stands_whatever_the_max_power_hint_says(hint_uw: int) -> None:
    """A hint bounds only a wrap: 25 W read from a counter that rose is a measurement, even under
    a usable 1 W or 5 W hint (3 W, 15 W ceilings) — the case hypothesis found in
    test_fuzz_garbage (any bytes in constraint_0_max_power_uw leave node power as measured)."""
    package = Zone("intel-rapl:0", "intel-rapl", (0,), "package-0", 0, 262_143_328_850, hint_uw)

    def reading(package_uj: int, dram_uj: int) -> RaplReading:
        return RaplReading(True, {package.zone_id: package, DRAM.zone_id: DRAM},
                           {package.zone_id: package_uj, DRAM.zone_id: dram_uj})

    power = compute_power(reading(1_000_000_000, 300_000_000), reading(1_050_000_000, 305_000_000), 2.0)
    assert power.gaps == ()
    assert power.watts == pytest.approx(27.5)
    # the same 25 W inferred across a wrap is held to the hint's 3x bound
    wrapped = compute_power(reading(262_143_328_850 - 20_000_000, 300_000_000),
                            reading(30_000_000, 305_000_000), 2.0)
    if 3 * hint_uw / 1e6 < 25.0:
        assert wrapped.watts is None
        assert any(g.kind == "implausible" for g in wrapped.gaps)
    else:
        assert wrapped.watts == pytest.approx(27.5)


def test_a_counter_that_rose_is_still_held_to_its_kinds_ceiling() -> None:
    """Without the hint's bound a jump up is checked against the package ceiling (1500 W)."""
    power = compute_power(rapl(1_000_000_000, 300_000_000), rapl(1_000_000_000 + 3_100_000_000, 305_000_000), 2.0)
    assert power.watts is None
    gap = next(g for g in power.gaps if g.what.startswith("zone intel-rapl:0 "))
    assert gap.kind == "implausible" and "1500 W" in gap.reason

# -- /proc/stat ----------------------------------------------------------------------------

CPU_LINE = "cpu  {fields}\ncpu0 0 0 0 0 0 0 0 0 0 0\n"


@pytest.mark.parametrize(
    "fields",
    ["100 0 50 inf 0 0 0 0 0 0", "100 0 50 nan 0 0 0 0 0 0", "100 -5 50 400 0 0 0 0 0 0",
     "100 0 50 4e2 0 0 0 0 0 0", "100 0 50", "100 0 50 400 0 0 0"],
    ids=["inf", "nan", "negative", "exponent", "3-fields", "7-fields"],
)
def test_proc_stat_fields_that_are_not_tick_counts_are_errors(fields: str) -> None:
    with pytest.raises(ValueError, match="/proc/stat"):
        parse_proc_stat(CPU_LINE.format(fields=fields), ticks_per_second=100)


def times(user: float, idle: float, iowait: float = 0.0) -> CpuTimes:
    return CpuTimes(user, 0.0, 0.0, idle, iowait, 0.0, 0.0, 0.0, cpus=4)


def test_proc_stat_going_backwards_is_implausible_except_iowait() -> None:
    with pytest.raises(ImplausibleError, match="user"):
        cpu_delta(times(100.0, 400.0), times(99.0, 402.0))
    with pytest.raises(ImplausibleError, match="idle"):
        cpu_delta(times(100.0, 400.0), times(101.0, 399.0))
    # the kernel documents iowait running backwards: clamped, not an error
    assert cpu_delta(times(100.0, 400.0, 5.0), times(101.0, 401.0, 4.0)).busy_seconds == pytest.approx(1.0)


# -- per-entity baselines ------------------------------------------------------------------

POD_A = "aaaaaaaa-0000-0000-0000-000000000001"
POD_B = "bbbbbbbb-0000-0000-0000-000000000002"
CONTAINER = "c" * 64


def sample(t: float, energy_uj: int, busy: float, idle: float, pods: dict[str, float | None],
           incomplete: bool = False) -> RawSample:
    layout = CgroupLayout(2, HostFS().cgroup_root, None)
    cgroups = CgroupReading(layout, {
        uid: PodCgroup(uid, "Burstable", f"kubepods/{uid}", usage,
                       (ContainerCgroup(CONTAINER, "cri-containerd", usage),) if uid == POD_A else ())
        for uid, usage in pods.items()
    }, incomplete=incomplete)
    zones = {PACKAGE.zone_id: PACKAGE}
    return RawSample(t, t, RaplReading(True, zones, {PACKAGE.zone_id: energy_uj}), times(busy, idle), None, cgroups)


def run_sequence(samples: list[RawSample]) -> list[Snapshot]:
    sampler = Sampler(HostFS(), "n1", process_top=0)
    return [sampler.compute(a, b) for a, b in zip(samples, samples[1:], strict=False)]


def test_one_failed_pod_read_is_a_gap_for_that_pod_never_its_lifetime_cpu_in_one_interval() -> None:
    """Issue 17: a pod with 301.6 s of lifetime CPU whose read failed once was charged all of
    it in the next 2 s interval (13.64 W instead of 2.06 W), and its energy counter reset."""
    # 4 CPUs, 2 s intervals, 4 s busy of 8 s; package 40 W; pod A uses 1 s per interval, B 2 s
    samples = []
    for i in range(5):
        pod_a: float | None = 300.0 + i
        if i == 2:
            pod_a = None  # its cpu.stat read failed (EIO, garbage)
        samples.append(sample(2.0 * i, 1_000_000_000 + 80_000_000 * i, 100.0 + 4 * i, 400.0 + 4 * i,
                              {POD_A: pod_a, POD_B: 50.0 + 2 * i}))
    snaps = run_sequence(samples)
    watts = [{p.uid: p.watts for p in s.pods} for s in snaps]
    # active = 40 W × 0.5 = 20 W over B = 4 s: pod A 1 s → 5 W, pod B 2 s → 10 W
    assert watts[0] == pytest.approx({POD_A: 5.0, POD_B: 10.0})
    assert watts[1][POD_A] is None and watts[1][POD_B] == pytest.approx(10.0)  # its read failed
    assert watts[2][POD_A] is None and watts[2][POD_B] == pytest.approx(10.0)  # the delta spans 2 intervals
    assert watts[3] == pytest.approx({POD_A: 5.0, POD_B: 10.0})  # back, never 3 s of lifetime CPU
    for snap in snaps[1:3]:
        assert snap.host_watts is None  # B − Σc needs every pod
        gap = next(g for g in snap.gaps if g.what == f"pod {POD_A}")
        assert gap.kind in ("unreadable", "incomplete")
        container = next(p for p in snap.pods if p.uid == POD_A).containers[0]
        assert container.watts is None and container.cpu_seconds is None
    # the pod's energy counter holds through the failure: it never resets
    collector = SnapshotCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    energy = []
    for snap in snaps:
        collector.accounts.add(snap)
        energy.append(registry.get_sample_value(
            "kubejoule_pod_energy_joules_total", {"node": "n1", "namespace": "", "pod": "", "pod_uid": POD_A,
                                                  "component": "cpu"}))
    assert energy == pytest.approx([10.0, 10.0, 10.0, 20.0])


def test_a_pod_missing_from_an_incomplete_read_is_unknown_not_gone_and_not_new_after() -> None:
    samples = [
        sample(0.0, 1_000_000_000, 100.0, 400.0, {POD_A: 300.0, POD_B: 50.0}),
        sample(2.0, 1_080_000_000, 104.0, 404.0, {POD_B: 52.0}, incomplete=True),  # a listing failed
        sample(4.0, 1_160_000_000, 108.0, 408.0, {POD_A: 302.0, POD_B: 54.0}),
    ]
    snaps = run_sequence(samples)
    first = {p.uid: p for p in snaps[0].pods}
    assert first[POD_A].watts is None and first[POD_A].cpu_seconds is None  # listed, unknown
    second = {p.uid: p for p in snaps[1].pods}
    assert second[POD_A].watts is None  # not charged 302 s as a new pod
    assert second[POD_B].watts == pytest.approx(10.0)
    assert any(g.what == f"pod {POD_A}" and g.kind == "incomplete" for g in snaps[1].gaps)


@pytest.mark.parametrize(("later", "kind"), [(299.0, "implausible"), (1e30, "implausible")],
                         ids=["backwards", "beyond-all-cpus"])
def test_pod_cpu_going_backwards_or_beyond_what_the_cpus_ran_is_implausible(later: float, kind: str) -> None:
    snaps = run_sequence([
        sample(0.0, 1_000_000_000, 100.0, 400.0, {POD_A: 300.0, POD_B: 50.0}),
        sample(2.0, 1_080_000_000, 104.0, 404.0, {POD_A: later, POD_B: 52.0}),
    ])
    pods = {p.uid: p for p in snaps[0].pods}
    assert pods[POD_A].watts is None and pods[POD_B].watts == pytest.approx(10.0)
    assert any(g.what == f"pod {POD_A}" and g.kind == kind for g in snaps[0].gaps)
    assert snaps[0].host_watts is None
