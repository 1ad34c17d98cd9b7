"""Node power from its parts (agent/monitor/composition.py) and the BMC poller's freshness (agent/device/platform.py):
the platform reading is node power with RAPL and the GPUs inside it, the rest is idle's — never a
pod's; a reading below its parts, stale or missing is a gap and RAPL + GPUs stand."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from agent.device.gaps import Gap, Subject
from agent.device.platform import PlatformPoller, PlatformState
from agent.device.redfish import Credentials, PowerSource, Reading, RedfishClient, RedfishError
from agent.monitor.composition import compose
from agent.monitor.gpu_power import GpuPower, GpuResult
from agent.monitor.snapshot import PodPower, Snapshot

POD_A, POD_B = "aaaa-0001", "bbbb-0002"


def cpu_side(node: float | None = 100.0) -> Snapshot:
    """The CPU side as the sampler computes it: 100 W = idle 40 + host 20 + pods 30 + 10."""
    known = node is not None
    return Snapshot(
        node="n1", interval_seconds=5.0, timestamp=1.7e9, source="rapl" if known else "none", node_watts=node,
        idle_watts=40.0 if known else None, active_watts=60.0 if known else None, idle_source="utilization",
        cpu_utilization=0.6, busy_cpu_seconds=3.0, host_watts=20.0 if known else None,
        pods=(PodPower(POD_A, "Burstable", 1.5, 30.0 if known else None),
              PodPower(POD_B, "BestEffort", 0.5, 10.0 if known else None)),
        gaps=() if known else (Gap(Subject.NODE, "permission denied reading energy_uj", "unreadable"),),
    )


def gpus(watts: float | None = 300.0) -> GpuResult:
    """One 300 W GPU: 200 W to pod A, 30 W host, 50 W idle, 20 W unattributed."""
    device = GpuPower(0, "GPU-0", "H100", watts, "energy", "shared", ((POD_A, 200.0),), 30.0, 50.0, 20.0)
    if watts is None:
        return GpuResult((replace(device, watts=None),), None, 0.0, 0.0, 0.0, {}, frozenset({POD_A}),
                         (Gap(Subject.GPU, "fallen off the bus", "unreadable", name="0 (GPU-0)"),))
    return GpuResult((device,), watts, 50.0, 30.0, 20.0, {POD_A: 200.0}, frozenset(), ())


def platform(watts: float | None, reason: str | None = None) -> PlatformState:
    return PlatformState(watts, 2.0, "EnvironmentMetrics", "/redfish/v1/Chassis/1U", reason)


def parts(snap: Snapshot) -> float:
    pods = sum((p.watts or 0.0) + (p.gpu_watts or 0.0) for p in snap.pods)
    return pods + (snap.host_watts or 0.0) + (snap.idle_watts or 0.0) + (snap.gpu_unattributed_watts or 0.0)


def test_without_a_bmc_node_power_is_the_cpu_side_plus_the_gpus() -> None:
    snap = compose(cpu_side(), gpus(), None)
    assert (snap.source, snap.node_watts) == ("rapl", 400.0)
    assert (snap.idle_watts, snap.host_watts, snap.active_watts) == (90.0, 50.0, 310.0)
    assert [(p.uid, p.watts, p.gpu_watts, p.gpu) for p in snap.pods] == [(POD_A, 30.0, 200.0, True),
                                                                           (POD_B, 10.0, None, False)]
    assert snap.gpu_unattributed_watts == 20.0 and parts(snap) == pytest.approx(400.0)
    assert snap.to_record()["pods"][1].get("gpu_watts", "absent") == "absent"  # no GPU: no key


def test_the_platform_reading_is_node_power_and_the_rest_is_idle_never_a_pods() -> None:
    snap = compose(cpu_side(), gpus(), platform(520.0))
    assert (snap.source, snap.node_watts) == ("platform", 520.0)
    assert snap.platform is not None and snap.platform.other_watts == pytest.approx(120.0)
    assert snap.idle_watts == pytest.approx(40.0 + 50.0 + 120.0)
    assert [p.watts for p in snap.pods] == [30.0, 10.0] and snap.host_watts == 50.0  # unchanged by the platform
    assert parts(snap) == pytest.approx(520.0)
    record = snap.to_record()["platform"]
    assert record["cpu_watts"] == 100.0 and record["gpu_watts"] == 300.0 and record["reading"] == "EnvironmentMetrics"


def test_a_platform_reading_below_its_parts_is_refused_and_the_parts_stand() -> None:
    within = compose(cpu_side(), gpus(), platform(385.0))  # 3.75 % below: a BMC's averaging window
    assert within.source == "platform" and within.platform is not None and within.platform.other_watts == 0.0
    below = compose(cpu_side(), gpus(), platform(300.0))
    assert (below.source, below.node_watts) == ("rapl", 400.0)
    gap = next(g for g in below.gaps if g.what == "platform")
    assert gap.kind == "implausible" and "below its parts" in gap.reason


def test_a_stale_or_failing_bmc_is_a_gap_and_rapl_goes_on() -> None:
    snap = compose(cpu_side(), None, platform(None, "GET /redfish/v1/: HTTP 500 (a BMC error)"))
    assert (snap.source, snap.node_watts) == ("rapl", 100.0)
    assert [g.reason for g in snap.gaps if g.what == "platform"] == ["GET /redfish/v1/: HTTP 500 (a BMC error)"]


def test_with_rapl_failing_the_platform_still_gives_node_power_and_nothing_is_split() -> None:
    snap = compose(cpu_side(None), gpus(), platform(520.0))
    assert (snap.source, snap.node_watts) == ("platform", 520.0)
    assert snap.idle_watts is None and snap.host_watts is None and snap.pods[0].watts is None
    assert snap.pods[0].gpu_watts == 200.0  # the GPU's share is measured on its own
    assert [g.what for g in snap.gaps] == ["rapl"]  # the CPU side's gap, no longer the node's


def test_an_unknown_gpu_makes_node_power_and_every_share_unknown() -> None:
    snap = compose(cpu_side(), gpus(None), None)
    assert (snap.source, snap.node_watts, snap.idle_watts, snap.host_watts) == ("none", None, None, None)
    assert all(p.watts is None and p.gpu_watts is None for p in snap.pods) and snap.pods[0].gpu
    assert {g.what for g in snap.gaps} == {"gpu 0 (GPU-0)", "node"}


class FakeClient(RedfishClient):
    def __init__(self) -> None:
        super().__init__("https://bmc.example", Credentials("u", "p"), timeout_seconds=1.0)
        self.answers: list[float | RedfishError] = []
        self.walks = 0


def test_the_poller_keeps_a_fresh_reading_through_a_failed_poll_then_says_why(monkeypatch: pytest.MonkeyPatch,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kubejoule.agent.platform")
    client, clock = FakeClient(), [100.0]
    source = PowerSource("/redfish/v1/Chassis/1/Power", "PowerControl", "/redfish/v1/Chassis/1")

    def find(_client: RedfishClient, _chassis: str | None) -> list[PowerSource]:
        client.walks += 1
        return [source]

    def read(_client: RedfishClient, _sources: list[PowerSource]) -> Reading:
        answer = client.answers.pop(0)
        if isinstance(answer, RedfishError):
            raise answer
        return Reading(answer, None, source)

    monkeypatch.setattr("agent.device.platform.find_sources", find)
    monkeypatch.setattr("agent.device.platform.read_platform", read)
    poller = PlatformPoller(client, interval_seconds=10.0, clock=lambda: clock[0])
    assert poller.state().reason == "no reading from the BMC at https://bmc.example yet"
    client.answers = [412.0, RedfishError("GET …: HTTP 500 (a BMC error)"),
                      RedfishError("GET …: HTTP 404 Not Found", rediscover=True), 405.0]
    poller.poll()
    clock[0] += 10.0
    poller.poll()  # failed: the 10 s old reading is still used (max age 30 s)
    assert (poller.state().watts, poller.state().age_seconds) == (412.0, 10.0)
    clock[0] += 25.0
    stale = poller.state()
    assert stale.watts is None and "HTTP 500" in (stale.reason or "") and "35 s old" in (stale.reason or "")
    poller.poll()  # 404: walk again next time
    poller.poll()
    assert client.walks == 2 and poller.state().watts == 405.0
    messages = [r.getMessage() for r in caplog.records if r.name == "kubejoule.agent.platform"]
    assert messages.count("cannot read platform power from the BMC; node power comes from RAPL and the GPUs "
                          "until it answers") == 1 and messages.count("the BMC answers again") == 1
