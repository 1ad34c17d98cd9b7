"""rapl_check.sh run with bash against fake powercap trees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from benchmarks.harness.components import require_binary
from tests.helpers.deploy_hosttree import (
    AS_NOBODY,
    CpuTimes,
    HostState,
    StepSleeper,
    Zone,
    needs_another_user,
    script_env,
    traversable_tree,
    zone_device_dir,
)

SCRIPT = Path(__file__).resolve().parents[2] / "host_scripts" / "rapl_check.sh"


@pytest.fixture(autouse=True)
def _bash() -> None:
    require_binary("bash", "bash is not installed")


def server_zones(package_uj: int = 1_000_000, max_uj: int | str = 262143328850) -> list[Zone]:
    return [
        Zone("intel-rapl:0", "package-0", package_uj, max_uj),
        Zone("intel-rapl:0:0", "core", 10, max_uj),
        Zone("intel-rapl:0:1", "dram", 20, max_uj),
        Zone("intel-rapl:1", "package-1", 30, max_uj),
        Zone("intel-rapl-mmio:0", "package-0", 40, max_uj),
    ]


def run_check(
    root: Path, *args: str, extra_env: dict[str, str] | None = None, as_nobody: bool = False
) -> subprocess.CompletedProcess[str]:
    command = ["bash", str(SCRIPT), *args]
    if as_nobody:
        command = [*AS_NOBODY, *command]
    return subprocess.run(
        command, env=script_env(root, extra_env), capture_output=True, text=True, timeout=60
    )


def zone_lines(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line for line in stdout.splitlines() if line.startswith("intel-rapl")}


def test_kernel_layout_fixture_matches_sysfs(tmp_path: Path) -> None:
    HostState(server_zones(), CpuTimes(), 1.0).write(tmp_path)
    link = tmp_path / "sys" / "class" / "powercap" / "intel-rapl:0:1"
    assert (
        os.readlink(link) == "../../devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:1"
    )
    assert link.resolve() == zone_device_dir(tmp_path / "sys", "intel-rapl:0:1").resolve()


def test_readable_zones_are_listed_with_their_roles(tmp_path: Path) -> None:
    HostState(server_zones(), CpuTimes(), 1.0).write(tmp_path)
    result = run_check(tmp_path, "--sample", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    zones = zone_lines(result.stdout)
    assert set(zones) == {
        "intel-rapl:0",
        "intel-rapl:0:0",
        "intel-rapl:0:1",
        "intel-rapl:1",
        "intel-rapl-mmio:0",
    }
    assert "mmio duplicate" in zones["intel-rapl-mmio:0"]
    assert "inside package" in zones["intel-rapl:0:0"]
    assert zones["intel-rapl:1"].split()[1:5] == ["package-1", "1", "yes", "root:400"]
    assert "sum over packages of package + dram" in result.stdout
    assert "OK: RAPL energy counters are readable." in result.stdout


def test_sampling_prints_watts_across_a_wrap(tmp_path: Path) -> None:
    max_uj = 1_000_000_000
    HostState(server_zones(package_uj=max_uj - 1_000_000, max_uj=max_uj), CpuTimes(), 1.0).write(
        tmp_path
    )
    work = tmp_path / "work"
    work.mkdir()
    # Two seconds later package-0 wrapped: 1 J to the top and 3 J after it = 2 W.
    sleeper = StepSleeper(
        tmp_path,
        work,
        [HostState(server_zones(package_uj=3_000_000, max_uj=max_uj), CpuTimes(), 3.0)],
    )
    result = run_check(tmp_path, "--sample", "2", extra_env={"KJ_SLEEP": str(sleeper.install())})
    assert result.returncode == 0, result.stdout + result.stderr
    watts = {
        line.split()[0]: line.split()[2]
        for line in result.stdout.splitlines()
        if line.startswith("  intel-rapl") and line.rstrip().endswith(" W")
    }
    assert watts["intel-rapl:0"] == "2.000"
    assert watts["intel-rapl:1"] == "0.000"


def test_falling_counter_without_range_is_reported_as_a_gap(tmp_path: Path) -> None:
    HostState([Zone("intel-rapl:0", "package-0", 5_000_000, 0)], CpuTimes(), 1.0).write(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    sleeper = StepSleeper(
        tmp_path, work, [HostState([Zone("intel-rapl:0", "package-0", 1, 0)], CpuTimes(), 2.0)]
    )
    result = run_check(tmp_path, "--sample", "1", extra_env={"KJ_SLEEP": str(sleeper.install())})
    assert result.returncode == 0
    assert "no counter range" in zone_lines(result.stdout)["intel-rapl:0"]
    assert "gap" in result.stdout and " W\n" not in result.stdout


def test_psys_is_named_as_the_node_power_source(tmp_path: Path) -> None:
    HostState([*server_zones(), Zone("intel-rapl:2", "psys", 5)], CpuTimes(), 1.0).write(tmp_path)
    result = run_check(tmp_path, "--sample", "0")
    assert result.returncode == 0
    assert "Node power source: psys" in result.stdout


@pytest.mark.parametrize(
    ("vendor", "advice"),
    [
        ("GenuineIntel", "modprobe intel_rapl_msr"),
        ("AuthenticAMD", "AMD CPUs"),
        ("ARMv8", "Intel (Sandy Bridge and later) and AMD Zen CPUs only"),
    ],
)
def test_no_zones_gives_vendor_specific_advice(tmp_path: Path, vendor: str, advice: str) -> None:
    HostState([], CpuTimes(), 1.0, cpu_vendor=vendor).write(tmp_path)
    result = run_check(tmp_path)
    assert result.returncode == 1
    assert f"cpu vendor:  {vendor}" in result.stdout
    assert advice in result.stdout


def test_loaded_driver_without_zones_points_at_the_cpu_or_hypervisor(tmp_path: Path) -> None:
    HostState([], CpuTimes(), 1.0).write(tmp_path)
    (tmp_path / "sys" / "module" / "intel_rapl_msr").mkdir(parents=True)
    result = run_check(tmp_path)
    assert result.returncode == 1
    assert "modprobe" not in result.stdout  # the driver is there already
    assert "hypervisor hides the RAPL MSRs" in result.stdout


def test_missing_powercap_class_points_at_the_kernel_config(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    (tmp_path / "proc").mkdir()
    result = run_check(tmp_path)
    assert result.returncode == 1
    assert "CONFIG_POWERCAP" in result.stdout


@needs_another_user
def test_root_only_energy_files_explain_cve_2020_8694_to_other_users() -> None:
    with traversable_tree() as root:
        HostState(server_zones(), CpuTimes(), 1.0).write(root)
        result = run_check(root, "--sample", "0", as_nobody=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert zone_lines(result.stdout)["intel-rapl:0"].split()[3] == "no"
    assert "CVE-2020-8694" in result.stdout
    assert "readable by root" in result.stdout


def test_bad_sample_value_exits_64(tmp_path: Path) -> None:
    result = run_check(tmp_path, "--sample", "soon")
    assert result.returncode == 64
    assert "--sample" in result.stderr


def test_script_passes_shellcheck() -> None:
    require_binary("shellcheck", "shellcheck not installed (Debian package shellcheck)")
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout
