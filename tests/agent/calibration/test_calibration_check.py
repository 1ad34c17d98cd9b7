"""`kubejoule-calibrate check` on this machine, on every failure fixture, and as another user."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.calibration.check import run_check
from agent.cmd.calibrate_cli import main
from agent.device.hostfs import HostFS
from common.curves import PowerCurve
from tests.helpers.agent_cli import machine_rapl_zones, root_only_copy
from tests.helpers.calibrate_meter import POWERCAP, VirtualMeter, copy_tree
from tests.helpers.calibrate_run import calibrate_as_user, calibrate_cli

CURVE = PowerCurve.fan(40.0, 120.0, 1.6)


def check_json(sys_root: Path, *extra: str, procfs: Path | None = None) -> tuple[int, dict[str, Any], str]:
    """`kubejoule-calibrate check --json` in this process: (exit code, result, stderr)."""
    args = ["check", "--sysfs", str(sys_root), "--seconds", "0.3", "--json", *extra]
    if procfs is not None:
        args += ["--procfs", str(procfs)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, json.loads(out.getvalue()), err.getvalue()


def zones_by_id(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {z["zone_id"]: z for z in result["zones"]}


def test_this_machine_without_powercap_fails_with_reason_and_fix() -> None:
    if machine_rapl_zones():
        pytest.skip(f"this machine has RAPL zones: {', '.join(machine_rapl_zones())}")
    proc = calibrate_cli("check", "--seconds", "0.1")
    assert proc.returncode == 1
    assert "verdict: RAPL is NOT usable" in proc.stdout
    assert "read as user" in proc.stdout
    assert "RAPL unusable:" in proc.stderr and "fix:" in proc.stderr
    assert "/sys/class/powercap" in proc.stderr


def fake_host(tmp_path: Path, *, hypervisor: bool, driver: bool) -> tuple[Path, Path]:
    procfs, sysfs = tmp_path / "proc", tmp_path / "sys"
    procfs.mkdir()
    flags = "flags\t\t: fpu vme de pse tsc msr" + (" hypervisor" if hypervisor else "")
    (procfs / "cpuinfo").write_text(f"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\n{flags}\n")
    (sysfs / "class").mkdir(parents=True)
    if driver:
        (sysfs / "module/intel_rapl_common").mkdir(parents=True)
    return procfs, sysfs


@pytest.mark.parametrize(
    ("hypervisor", "driver", "reason", "fix"),
    [
        (True, False, "virtual machine", "calibrate a bare-metal node"),
        (False, False, "driver is not loaded", "modprobe intel_rapl_msr"),
        (False, True, "exposes no RAPL", "BIOS"),
    ],
)
def test_no_powercap_reasons(tmp_path: Path, hypervisor: bool, driver: bool, reason: str, fix: str) -> None:
    procfs, sysfs = fake_host(tmp_path, hypervisor=hypervisor, driver=driver)
    code, result, stderr = check_json(sysfs, procfs=procfs)
    assert code == 1 and not result["usable"]
    problem = result["problems"][0]
    assert problem["severity"] == "fail"
    assert reason in problem["reason"] and fix in problem["fix"]
    assert reason in stderr


@pytest.fixture
def host_copy(tmp_path: Path) -> Iterator[Any]:
    def make(case: str, phase: str = "before") -> Path:
        return copy_tree(POWERCAP / case / phase, tmp_path / f"{case}-{phase}")

    yield make


def test_a_stock_kernel_with_an_empty_powercap_folder_has_no_rapl(tmp_path: Path) -> None:
    """POWERCAP is built into stock kernels: /sys/class/powercap exists with no zone in it. The
    check and the tests' own "no RAPL here" decision (the agent's discovery) both call that no RAPL."""
    procfs, sysfs = fake_host(tmp_path, hypervisor=False, driver=False)
    (sysfs / "class/powercap").mkdir()
    assert machine_rapl_zones(sysfs) == []
    code, result, stderr = check_json(sysfs, procfs=procfs)
    assert code == 1 and not result["usable"] and result["powercap_present"]
    assert "no RAPL zones under" in result["problems"][0]["reason"] and "modprobe intel_rapl_msr" in stderr


def test_moving_counters_are_usable_and_report_update_rate_and_power(host_copy: Any) -> None:
    sys_root = host_copy("intel-1s")
    with VirtualMeter(sys_root, lambda u: 50.0, noise_watts=0.0):
        code, result, _ = check_json(sys_root)
    assert code == 0 and result["usable"], result["problems"]
    assert result["user"] == "root" and result["uid"] == 0
    assert result["node_power"] == "packages"
    assert result["node_zones"] == ["intel-rapl:0", "intel-rapl:0:2"]
    zones = zones_by_id(result)
    package = zones["intel-rapl:0"]
    assert package["readable"] and package["moves"] and package["verdict"] == "ok"
    assert 0.001 <= package["update_seconds"] <= 0.05
    assert package["watts"] == pytest.approx(50.0 * 0.85, rel=0.1)
    assert package["wrap_seconds"] == pytest.approx(262143328850 / 150_000_000)
    assert zones["intel-rapl:0:2"]["watts"] == pytest.approx(50.0 * 0.15, rel=0.1)


def test_static_counters_are_not_usable(host_copy: Any) -> None:
    code, result, stderr = check_json(host_copy("amd"))
    assert code == 1 and not result["usable"]
    assert {z["zone_id"] for z in result["zones"] if z["verdict"] == "fail"} == {"intel-rapl:0", "intel-rapl:1"}
    assert "did not change" in stderr


@pytest.mark.parametrize(
    ("phase", "zone", "reason"),
    [("before", "intel-rapl:1", "is not a number: '12abc'"), ("after", "intel-rapl:0", "is empty")],
)
def test_garbage_counter_is_a_failure_with_the_content(host_copy: Any, phase: str, zone: str, reason: str) -> None:
    sys_root = host_copy("garbage", phase)
    code, result, _ = check_json(sys_root)
    assert code == 1
    broken = zones_by_id(result)[zone]
    assert not broken["readable"] and broken["verdict"] == "fail"
    assert reason in broken["read_error"]
    assert any(reason in p["reason"] and "dmesg" in p["fix"] for p in result["problems"])


def test_unusable_range_is_a_warning_not_a_failure(host_copy: Any) -> None:
    sys_root = host_copy("falling-no-range")
    shares = {"intel-rapl:0": 0.9, "intel-rapl:0:0": 0.1}
    with VirtualMeter(sys_root, CURVE.watts, shares):
        code, result, _ = check_json(sys_root)
    assert code == 0 and result["usable"]
    package = zones_by_id(result)["intel-rapl:0"]
    assert package["verdict"] == "warn" and package["max_energy_range_uj"] in (None, 0)
    assert any("max_energy_range_uj is unreadable or zero" in p["reason"] and p["severity"] == "warn"
               for p in result["problems"])


def test_short_wrap_period_asks_for_a_shorter_interval(host_copy: Any) -> None:
    sys_root = host_copy("intel-1s")
    # 900 J at the package's 150 W maximum wraps every 6 s
    with VirtualMeter(sys_root, CURVE.watts, max_energy_range_uj={"intel-rapl:0": 900_000_000}):
        code, result, _ = check_json(sys_root)
    assert code == 0
    assert zones_by_id(result)["intel-rapl:0"]["wrap_seconds"] == pytest.approx(6.0)
    assert any("--interval` below 3.0 s" in p["fix"] for p in result["problems"])


def test_mmio_duplicate_is_listed_as_ignored(host_copy: Any) -> None:
    sys_root = host_copy("mmio-duplicate")
    with VirtualMeter(sys_root, CURVE.watts, {"intel-rapl:0": 1.0}):
        code, result, _ = check_json(sys_root)
    assert code == 0
    assert result["ignored"] == ["intel-rapl-mmio:0"]
    assert [z["zone_id"] for z in result["zones"]] == ["intel-rapl:0"]


@dataclass
class UnpluggingFS(HostFS):
    """Removes a zone just after the check first reads its counter, as a CPU hot-unplug or a
    driver reload mid-check would."""

    unplug: Path | None = None  # the zone's link under class/powercap

    def read_bytes(self, path: Path | str) -> bytes:
        data = super().read_bytes(path)
        if self.unplug is not None and Path(path) == self.unplug / "energy_uj":
            target, self.unplug = self.unplug.resolve(), None
            (self.sysfs / "class/powercap" / target.name).unlink()
            # Out of the tree in one rename, then removed: the meter thread may be writing its
            # next counter into the directory at this moment (rmtree in place then races it).
            gone = target.with_name(f".unplugged-{target.name}")
            target.rename(gone)
            shutil.rmtree(gone, ignore_errors=True)
        return data


def test_zone_that_disappears_during_the_check_fails(host_copy: Any) -> None:
    sys_root = host_copy("disappearing")
    fs = UnpluggingFS(Path("/proc"), sys_root, unplug=sys_root / "class/powercap/intel-rapl:0:0")
    with VirtualMeter(sys_root, CURVE.watts, {"intel-rapl:0": 0.85, "intel-rapl:0:0": 0.15}):
        result = run_check(fs, poll_seconds=0.3)
    assert fs.unplug is None  # it was read once, then removed
    assert not result.usable
    dram = next(z for z in result.zones if z.zone_id == "intel-rapl:0:0")
    assert dram.verdict == "fail" and dram.read_error is not None and "disappeared" in dram.read_error


@pytest.fixture
def root_only_tree() -> Iterator[Path]:
    """The permission fixture with root-only energy_uj files (see root_only_copy): its sys/."""
    with root_only_copy(POWERCAP / "permission/before") as host:
        yield host / "sys"


@pytest.mark.root
def test_check_says_which_user_cannot_read_and_why(root_only_tree: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file unreadable for another user")
    code, out, err = calibrate_as_user("nobody", ["check", "--sysfs", str(root_only_tree), "--seconds", "0.1", "--json"])
    assert code == 1, err
    result = json.loads(out)
    assert result["user"] == "nobody" and not result["usable"]
    package = zones_by_id(result)["intel-rapl:0"]
    assert not package["readable"] and "permission denied" in package["read_error"]
    assert package["access"] == "0400 root only"
    problem = next(p for p in result["problems"] if p["what"].startswith("zone intel-rapl:0 "))
    assert "nobody (uid" in problem["reason"]
    assert "CVE-2020-8694" in problem["fix"] and "root" in problem["fix"]
    assert "RAPL unusable: nobody" in err
    # root reads the same files; the table says they are root-only
    root_code, root_result, _ = check_json(root_only_tree)
    assert zones_by_id(root_result)["intel-rapl:0"]["readable"]
    assert zones_by_id(root_result)["intel-rapl:0"]["access"] == "0400 root only"
    assert root_code == 1  # the fixture's counters do not move
