"""Property tests: the attribution invariant holds for any CPU times and powers."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent.device.cgroups import CgroupLayout, CgroupReading, PodCgroup
from agent.device.hostfs import HostFS
from agent.device.processes import ProcStat
from agent.device.procstat import CpuTimes
from agent.device.rapl import RaplReading, Zone
from agent.monitor.attribution import share_within, split_idle, split_pods
from agent.monitor.baselines import CPU_SKEW_MARGIN, CPU_SKEW_SLACK_SECONDS
from agent.monitor.composition import invariant_holds
from agent.monitor.raw_sample import RawSample
from agent.monitor.sampler import Sampler

watts = st.floats(min_value=0.0, max_value=5000.0, allow_nan=False)
seconds = st.floats(min_value=0.0, max_value=1000.0, allow_nan=False)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(
    node=watts,
    utilization=unit,
    busy=seconds,
    pod_cpu=st.lists(seconds, max_size=30),
    calibrated=st.one_of(st.none(), watts),
)
@settings(max_examples=200, deadline=None)
@example(node=1.5, utilization=0.0, busy=5e-324, pod_cpu=[], calibrated=0.0)  # was host 2 W of 1.5 W active
def test_pods_host_and_idle_add_up_to_node_power(
    node: float, utilization: float, busy: float, pod_cpu: list[float], calibrated: float | None
) -> None:
    idle = split_idle(node, utilization, calibrated)
    assert idle.idle_watts is not None and idle.active_watts is not None
    assert 0.0 <= idle.idle_watts <= node * (1 + 1e-12)
    assert idle.idle_source == ("calibration" if calibrated is not None else "utilization")
    split = split_pods(idle.active_watts, busy, {str(i): c for i, c in enumerate(pod_cpu)})
    pods = [w for w in split.pod_watts.values()]
    assert all(w is not None and w >= 0.0 for w in pods)
    known = [w for w in pods if w is not None]
    assert split.host_watts is not None and split.host_watts >= 0.0
    assert invariant_holds(node, idle.idle_watts, known, split.host_watts)
    total = sum(pod_cpu)
    assert split.skew_scaled == (total > busy)
    if split.skew_scaled and busy > 0:
        assert split.host_watts == 0.0  # the pods were scaled to take all of B
    # proportional to CPU time within the pods
    if busy > 0 and idle.active_watts > 0:
        for cpu, w in zip(pod_cpu, known, strict=True):
            expected = idle.active_watts * (cpu / (total if total > busy else busy))
            assert math.isclose(w, expected, rel_tol=1e-9, abs_tol=1e-9)


@given(part=watts, part_cpu=seconds, members=st.lists(seconds, max_size=20))
@settings(max_examples=200, deadline=None)
def test_a_view_never_exceeds_the_part_that_contains_it(part: float, part_cpu: float, members: list[float]) -> None:
    shares = share_within(part, part_cpu, dict(enumerate(members)))
    values = [v for v in shares.values() if v is not None]
    assert len(values) == len(members)
    assert sum(values) <= part * (1 + 1e-9) + 1e-9
    assert all(v >= 0 for v in values)


def test_unknown_power_or_busy_time_leaves_watts_unknown_never_zero() -> None:
    assert split_idle(None, 0.5).idle_watts is None
    assert split_idle(100.0, None).active_watts is None
    assert split_idle(100.0, None, 40.0).idle_watts == 40.0  # a calibrated idle needs no utilization
    split = split_pods(None, 4.0, {"a": 1.0})
    assert split.pod_watts == {"a": None} and split.host_watts is None
    split = split_pods(50.0, None, {"a": 1.0})
    assert split.pod_watts == {"a": None} and split.host_cpu_seconds is None
    assert share_within(None, 1.0, {1: 0.5}) == {1: None}


def test_no_busy_time_gives_active_power_to_the_host() -> None:
    split = split_pods(10.0, 0.0, {"a": 0.0, "b": 0.0})
    assert split.pod_watts == {"a": 0.0, "b": 0.0}
    assert split.host_watts == 10.0


# -- the same property through Sampler.compute, with raw reads built in memory ------------

ZONE = Zone("intel-rapl:0", "intel-rapl", (0,), "package-0", 0, 262143328850, None)


def raw(energy_uj: int, busy_ticks: int, idle_ticks: int, pods: dict[str, float], procs: dict[int, int]) -> RawSample:
    cpu = CpuTimes(busy_ticks / 100, 0.0, 0.0, idle_ticks / 100, 0.0, 0.0, 0.0, 0.0, cpus=64)  # 200 s in 2 s: plausible
    layout = CgroupLayout(2, HostFS().cgroup_root, None)
    cgroups = CgroupReading(
        layout,
        {uid: PodCgroup(uid, "Burstable", f"kubepods/{uid}", usage, (), frozenset({int(uid)})) for uid, usage in pods.items()},
    )
    processes = {pid: ProcStat(pid, b"worker", ticks, 1) for pid, ticks in procs.items()}
    rapl = RaplReading(True, {ZONE.zone_id: ZONE}, {ZONE.zone_id: energy_uj})
    return RawSample(0.0, 0.0, rapl, cpu, None, cgroups, processes)


@given(
    joules=st.floats(min_value=0.0, max_value=2_000.0),  # up to 1000 W: within a package's plausible ceiling
    busy=st.integers(min_value=0, max_value=10_000),
    idle=st.integers(min_value=0, max_value=10_000),
    pod_cpu=st.lists(st.floats(min_value=0.0, max_value=150.0), min_size=0, max_size=8),
    proc_ticks=st.lists(st.integers(min_value=0, max_value=20_000), min_size=0, max_size=8),
)
@settings(max_examples=80, deadline=None)
def test_sampler_snapshots_satisfy_the_invariant(
    joules: float, busy: int, idle: int, pod_cpu: list[float], proc_ticks: list[int]
) -> None:
    uids = [str(1000 + i) for i in range(len(pod_cpu))]  # pod i holds process 1000 + i
    before = raw(1_000_000, 0, 0, dict.fromkeys(uids, 10.0), dict.fromkeys(range(1000, 1000 + len(proc_ticks)), 0))
    after = raw(
        1_000_000 + round(joules * 1e6), busy, idle,
        {uid: 10.0 + c for uid, c in zip(uids, pod_cpu, strict=True)},
        {1000 + i: t for i, t in enumerate(proc_ticks)},
    )
    sampler = Sampler(HostFS(), "n", process_top=100)
    sampler.ticks_per_second = 100
    snap = sampler.compute(before, after, 2.0)
    assert snap.node_watts == pytest.approx(round(joules * 1e6) / 1e6 / 2.0, rel=1e-12)
    assert not snap.invariant_breached
    # more CPU than all CPUs ran (twice over, plus a second) cannot be right: a gap, not a share
    bound = CPU_SKEW_MARGIN * (busy + idle) / 100 + CPU_SKEW_SLACK_SECONDS
    implausible = {g.what.split()[1] for g in snap.gaps if g.kind == "implausible" and g.what.startswith("pod ")}
    # a process's ticks beyond the same bound are a corrupt stat line: no view for it
    beyond = {1000 + i for i, t in enumerate(proc_ticks) if t / 100 > bound + 1e-9}
    assert not beyond & {p.pid for p in snap.processes}
    assert bool(beyond) <= any(g.what == "processes" and g.kind == "implausible" for g in snap.gaps)
    assert {uid for uid, c in zip(uids, pod_cpu, strict=True) if c > bound + 1e-9} <= implausible
    assert implausible <= {uid for uid, c in zip(uids, pod_cpu, strict=True) if c > bound - 1e-9}
    if implausible:
        assert all(p.watts is None and p.cpu_seconds is None for p in snap.pods if p.uid in implausible)
        assert snap.host_watts is None
        return
    if busy + idle == 0:
        assert snap.idle_watts is None and all(p.watts is None for p in snap.pods)
        return
    assert snap.idle_watts is not None and snap.host_watts is not None
    total = sum(p.watts or 0.0 for p in snap.pods) + snap.host_watts + snap.idle_watts
    assert total == pytest.approx(snap.node_watts, rel=1e-6, abs=1e-9)
    pods = {p.uid: p for p in snap.pods}
    # each pod's CPU is its counter's growth (counters hold whole µs: below that, floats round)
    assert [pods[uid].cpu_seconds for uid in uids] == pytest.approx(pod_cpu, abs=1e-9)
    assert snap.skew_scaled == (sum(p.cpu_seconds for p in snap.pods) > busy / 100)
    for proc in snap.processes:
        uid = str(proc.pid) if str(proc.pid) in pods else None
        part = pods[uid].watts if uid else snap.host_watts
        assert proc.watts is not None and part is not None and proc.watts <= part * (1 + 1e-9) + 1e-12


def test_a_breached_invariant_is_flagged_and_logged(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import agent.monitor.attribution as attribution_module
    from agent.monitor.attribution import PodSplit

    real = attribution_module.split_pods

    def off_by_one_watt(active: float | None, busy: float | None, pods: dict[str, float]) -> PodSplit:
        split = real(active, busy, pods)
        return PodSplit(split.pod_watts, (split.host_watts or 0.0) + 1.0, split.host_cpu_seconds, split.skew_scaled)

    monkeypatch.setattr(attribution_module, "split_pods", off_by_one_watt)
    before = raw(1_000_000, 0, 0, {"1000": 1.0}, {})
    after = raw(21_000_000, 200, 200, {"1000": 2.0}, {})
    with caplog.at_level("WARNING", logger="kubejoule.agent.sampler"):
        snap = Sampler(HostFS(), "n").compute(before, after, 2.0)
    assert snap.invariant_breached
    assert any("invariant" in r.getMessage() and r.fields["relative_error"] > 1e-6 for r in caplog.records)  # type: ignore[attr-defined]
    monkeypatch.setattr(attribution_module, "split_pods", real)
    assert not Sampler(HostFS(), "n").compute(before, after, 2.0).invariant_breached
