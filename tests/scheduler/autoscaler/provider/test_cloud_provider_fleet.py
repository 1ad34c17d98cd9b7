"""The cloud provider's machines and safety rules, with a fake BMC and a fake API: the most
efficient machines powered on first, nothing switched off unless cordoned and empty of all but
DaemonSet and mirror pods, never below the minimum, only allow-listed machines, shadow mode
touching nothing, and each fault (BMC silent, Reset refused, Reset accepted but not performed,
a Node that never registers, a machine that will not go off) ending in a clear state."""

from __future__ import annotations

import pytest

from scheduler.autoscaler.provider.backend import OFF, RESET_FORCE, RESET_GRACEFUL, RESET_ON
from scheduler.autoscaler.provider.machines import (
    BOOTING,
    FAILED,
    OFF_STATE,
    RUNNING,
    STOPPING,
    Fleet,
    ProviderError,
)
from tests.helpers.cloud_provider import Clock, FakeBackend, FakeKube, node, pod, settings


def fleet(on: tuple[str, ...] = ("m0",), **overrides: object) -> tuple[Fleet, FakeBackend, FakeKube, Clock]:
    backend, kube, clock = FakeBackend(on), FakeKube(), Clock()
    for name in on:
        kube.nodes[name] = node(name)
    f = Fleet(settings(**overrides), backend, kube, clock=clock)
    f.refresh()
    return f, backend, kube, clock


def states(f: Fleet) -> dict[str, str]:
    return {name: t.state for name, t in f.tracked.items()}


def register(kube: FakeKube, f: Fleet, *names: str) -> None:
    for name in names:
        kube.nodes[name] = node(name)
    f.refresh()


def test_first_reading_takes_the_machines_as_they_are() -> None:
    f, _, _, _ = fleet()
    assert states(f) == {"m0": RUNNING, "m1": OFF_STATE, "m2": OFF_STATE, "m3": OFF_STATE}
    assert f.target_size("rack") == 1


def test_increase_powers_on_the_most_efficient_allowed_machines_first() -> None:
    f, backend, kube, _ = fleet()
    # m3 has the best curve but is not on the allow-list; m1 beats m2
    assert f.increase("rack", 1) == ["m1"]
    assert backend.resets == [("m1", RESET_ON)]
    assert states(f)["m1"] == BOOTING and f.target_size("rack") == 2
    register(kube, f, "m1")
    assert states(f)["m1"] == RUNNING
    assert kube.reasons("m1") == ["PoweringOn", "PoweredOn"]
    assert f.metrics.value("kubejoule_cloudprovider_power_actions_total",
                           {"node_group": "rack", "action": "power_on", "result": "done"}) == 1


def test_increase_is_all_or_nothing_and_names_what_was_left_alone() -> None:
    f, backend, _, _ = fleet()
    with pytest.raises(ProviderError) as raised:
        f.increase("rack", 3)  # m1, m2 allowed; m3 not
    assert raised.value.code == "FAILED_PRECONDITION"
    assert "m3 (not on the allow-list)" in str(raised.value)
    assert backend.resets == []
    with pytest.raises(ProviderError, match="over the maximum"):
        f.increase("rack", 4)
    with pytest.raises(ProviderError) as unknown:
        f.increase("nope", 1)
    assert unknown.value.code == "NOT_FOUND"


def test_delete_switches_off_a_cordoned_node_with_only_daemonset_and_mirror_pods() -> None:
    f, backend, kube, clock = fleet(on=("m0", "m1"))
    kube.nodes["m1"] = node("m1", taint="ToBeDeletedByClusterAutoscaler")  # how CA marks it
    kube.pods += [pod("ds", "m1", owner="DaemonSet"), pod("static", "m1", owner="Node", mirror=True),
                  pod("done", "m1", phase="Succeeded")]
    assert f.delete_nodes("rack", [("m1", "kubejoule://m1")]) == ["m1"]
    assert backend.resets == [("m1", RESET_GRACEFUL)]
    assert states(f)["m1"] == STOPPING
    clock.now += 5
    f.refresh()
    assert states(f)["m1"] == OFF_STATE
    assert kube.deleted == ["m1"]  # keep_node_object: false
    assert kube.reasons("m1")[-2:] == ["PoweringOff", "PoweredOff"]


@pytest.mark.parametrize(("prepare", "why"), [
    (lambda k: k.nodes.update(m1=node("m1")), "m1 is not cordoned"),
    (lambda k: k.pods.append(pod("web", "m1")), "still runs 1 pod(s) other than DaemonSet and mirror pods: default/web"),
])
def test_delete_is_refused_when_the_node_is_not_ready_to_go(prepare: object, why: str) -> None:
    f, backend, kube, _ = fleet(on=("m0", "m1"))
    kube.nodes["m1"] = node("m1", cordoned=True)
    prepare(kube)  # type: ignore[operator]
    with pytest.raises(ProviderError) as raised:
        f.delete_nodes("rack", [("m1", "kubejoule://m1")])
    assert raised.value.code == "FAILED_PRECONDITION" and why in str(raised.value)
    assert backend.resets == [] and states(f)["m1"] == RUNNING
    assert kube.reasons("m1") == ["PowerOffRefused"]


def test_never_below_the_minimum_nor_off_the_allow_list() -> None:
    f, backend, kube, _ = fleet(on=("m0", "m3"))
    for name in ("m0", "m3"):
        kube.nodes[name] = node(name, cordoned=True)
    with pytest.raises(ProviderError, match="not on the allow-list"):
        f.delete_nodes("rack", [("m3", "")])
    with pytest.raises(ProviderError, match="below its minimum 1"):
        f.delete_nodes("rack", [("m0", ""), ("m3", "")])
    assert backend.resets == []


def test_shadow_mode_checks_annotates_and_touches_nothing() -> None:
    f, backend, kube, _ = fleet(on=("m0", "m1"), shadow=True)
    kube.nodes["m1"] = node("m1", cordoned=True)
    with pytest.raises(ProviderError, match="shadow mode: would switch off m1"):
        f.delete_nodes("rack", [("m1", "")])
    with pytest.raises(ProviderError, match="shadow mode: would power on m2"):
        f.increase("rack", 1)
    assert backend.resets == []
    assert states(f) == {"m0": RUNNING, "m1": RUNNING, "m2": OFF_STATE, "m3": OFF_STATE}
    assert "would switch off" in kube.annotations["m1"]["kubejoule.io/power-shadow"]
    assert "ShadowPowerAction" in kube.reasons("m1") and "ShadowPowerAction" in kube.reasons("m2")
    # shadow mode refuses what the real one would refuse, too
    kube.pods.append(pod("web", "m1"))
    with pytest.raises(ProviderError, match="default/web"):
        f.delete_nodes("rack", [("m1", "")])


def test_graceful_then_forced_and_never_forced_with_pods_back_on() -> None:
    f, backend, kube, clock = fleet(on=("m0", "m1", "m2"))
    backend.ignore = {"m1", "m2"}  # GracefulShutdown ignored (an OS that hangs)
    for name in ("m1", "m2"):
        kube.nodes[name] = node(name, cordoned=True)
    f.delete_nodes("rack", [("m1", ""), ("m2", "")])
    kube.pods.append(pod("sneaked-in", "m2"))  # someone uncordoned it and a pod landed
    clock.now += 121
    f.refresh()
    assert ("m1", RESET_FORCE) in backend.resets and ("m2", RESET_FORCE) not in backend.resets
    assert states(f)["m2"] == FAILED and "sneaked-in" in f.tracked["m2"].error
    backend.ignore.discard("m1")
    backend.power["m1"] = OFF
    f.refresh()
    assert states(f)["m1"] == OFF_STATE
    assert "ForceOff" in kube.reasons("m1")


def test_a_reset_accepted_but_not_performed_fails_and_ca_sees_the_error() -> None:
    f, backend, kube, clock = fleet()
    backend.ignore = {"m1"}
    f.increase("rack", 1)
    clock.now += 61
    f.refresh()
    assert states(f)["m1"] == FAILED
    assert "accepted Reset On but the machine is still off" in f.tracked["m1"].error
    assert kube.events[-1][1:] == ("PowerActionFailed", f.tracked["m1"].error, True)
    assert f.target_size("rack") == 2  # CA counts it until it deletes it
    # CA deletes the failed instance: it never came on, so it is simply off again (no Reset)
    resets = len(backend.resets)
    f.delete_nodes("rack", [("m1", "kubejoule://m1")])
    assert len(backend.resets) == resets and states(f)["m1"] == OFF_STATE
    with pytest.raises(ProviderError, match="m1 is already off"):
        f.delete_nodes("rack", [("m1", "")])


def test_a_failed_machine_that_is_on_is_forced_off_when_ca_deletes_it() -> None:
    f, backend, _, clock = fleet()
    f.increase("rack", 1)  # on, but its Node never registers
    clock.now += 601
    f.refresh()
    assert states(f)["m1"] == FAILED
    f.delete_nodes("rack", [("m1", "kubejoule://m1")])
    assert backend.resets[-1] == ("m1", RESET_FORCE)
    f.refresh()
    assert states(f)["m1"] == OFF_STATE


def test_a_machine_found_off_at_start_is_off_even_with_a_stale_ready_node() -> None:
    backend, kube = FakeBackend(), FakeKube()
    kube.nodes["m1"] = node("m1")  # Ready, but the machine is off (the status lags)
    f = Fleet(settings(), backend, kube)
    f.refresh()
    assert states(f)["m1"] == OFF_STATE


def test_a_node_that_never_registers_fails_after_the_boot_deadline() -> None:
    f, _, _, clock = fleet()
    f.increase("rack", 1)
    clock.now += 300
    f.refresh()
    assert states(f)["m1"] == BOOTING
    clock.now += 301
    f.refresh()
    assert states(f)["m1"] == FAILED and "did not register Ready within 600 s" in f.tracked["m1"].error


def test_a_silent_bmc_is_left_alone_and_reported_and_a_refused_reset_is_clear() -> None:
    f, backend, kube, _ = fleet(on=("m0", "m1"))
    kube.nodes["m1"] = node("m1", cordoned=True)
    backend.silent = {"m1", "m2"}
    f.refresh()
    assert states(f)["m1"] == RUNNING and f.tracked["m1"].unreachable
    assert kube.reasons("m1") == ["BMCUnreachable"]
    assert f.metrics.value("kubejoule_cloudprovider_bmc_errors_total", {"node_group": "rack"}) == 2
    with pytest.raises(ProviderError, match="BMC not answering"):
        f.delete_nodes("rack", [("m1", "")])
    with pytest.raises(ProviderError, match="m2 \\(BMC: "):
        f.increase("rack", 2)
    backend.silent.clear()
    backend.refuse = {"m2"}
    f.refresh()
    with pytest.raises(ProviderError) as raised:
        f.increase("rack", 1)
    assert raised.value.code == "UNAVAILABLE" and states(f)["m2"] == OFF_STATE
    assert f.metrics.value("kubejoule_cloudprovider_power_actions_total",
                           {"node_group": "rack", "action": "power_on", "result": "refused"}) == 1


def test_node_group_for_node_by_provider_id_label_or_name() -> None:
    f, _, _, _ = fleet()
    assert f.group_of_node("renamed", "kubejoule://m2", {}).id == "rack"  # type: ignore[union-attr]
    assert f.group_of_node("m1", "", {"kubejoule.io/node-group": "rack"}).id == "rack"  # type: ignore[union-attr]
    assert f.group_of_node("control-plane-0", "", {}) is None


def test_decrease_target_gives_up_machines_still_booting() -> None:
    f, backend, _, _ = fleet()
    f.increase("rack", 2)
    f.decrease_target("rack", -1)
    assert backend.resets[-1][1] == RESET_FORCE
    assert f.target_size("rack") == 2


def test_the_bmcs_are_read_in_parallel() -> None:
    import time

    class Slow(FakeBackend):
        def power_state(self, machine):
            time.sleep(0.4)
            return super().power_state(machine)

    f = Fleet(settings(), Slow(), FakeKube())
    started = time.monotonic()
    f.refresh()
    assert time.monotonic() - started < 1.2  # four machines, 0.4 s each
