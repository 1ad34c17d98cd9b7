"""A real agent with a BMC: platform power over HTTPS from a Redfish mockup (a DMTF 2020.4+
EnvironmentMetrics chassis) and from sushy-tools' real emulator (which serves no power reading);
credentials from a Secret-shaped directory, never in flags, logs or metrics; a BMC that goes
away is a gap and RAPL goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.harness import redfish_mockup
from benchmarks.harness.expander_grpc import self_signed
from benchmarks.harness.redfish_mockup import PASSWORD, USERNAME, serve
from tests.helpers import sushy
from tests.helpers.agent_cli import check_record, run_agent, strict_json
from tests.helpers.agent_proc import WORKLOADS, AgentProcess, wait_until

FIXTURE = WORKLOADS / "v2-systemd-containerd"
PLATFORM_WATTS = 150.0
REL = 1e-6


def secret(directory: Path, username: str = USERNAME, password: str = PASSWORD) -> Path:
    """A kubernetes.io/basic-auth Secret as the kubelet mounts it: one file per key."""
    directory.mkdir()
    (directory / "username").write_text(username)
    (directory / "password").write_text(password)
    return directory


def test_platform_power_from_the_bmc_with_the_rest_in_idle_then_a_gap_when_it_goes(tmp_path: Path) -> None:
    tls = self_signed(tmp_path, ("127.0.0.1",))
    credentials = secret(tmp_path / "bmc")
    profile = tmp_path / "platform.yaml"  # a curve fitted against the BMC (kubejoule-calibrate run --bmc-url)
    profile.write_text("schema: kubejoule.calibration/v1\nidle_watts: 90.0\nmax_watts: 300.0\nmodel: linear\n"
                       "reading: platform\nrapl: {idle_watts: 10.0, max_watts: 40.0, model: linear}\n")
    bmc_service = serve(redfish_mockup.environment(PLATFORM_WATTS), tls=tls)
    bmc = bmc_service.__enter__()
    args = ["--bmc-url", bmc.url, "--bmc-credentials", str(credentials), "--bmc-ca-bundle", str(tls.cert_path),
            "--bmc-interval", "0.3", "--bmc-max-age", "1.5", "--no-gpu", "--power-profile", str(profile)]
    try:
        with AgentProcess(FIXTURE / "before", interval=0.5, hermetic=True, args=args) as agent:
            agent.drive(node_watts=40.0, cgroup_share={"6f1c3b0e-2a4d-4e8b-9c71-0d5e8f2a1b01": 0.5})
            text = agent.scrape_until(lambda t: 'source="platform"' in t and "kubejoule_node_idle_power_watts{" in t
                                      and (agent.value("kubejoule_zone_power_watts", t, zone="package") or 0) > 0)
            assert agent.value("kubejoule_node_power_watts", text, source="platform") == PLATFORM_WATTS
            other = agent.value("kubejoule_node_platform_other_watts", text)
            rapl = sum(v for labels, v in agent.samples("kubejoule_zone_power_watts", text)
                       if labels["zone"] in ("package", "dram"))
            assert other is not None and other + rapl == pytest.approx(PLATFORM_WATTS, rel=REL)
            idle = agent.value("kubejoule_node_idle_power_watts", text, source="platform")
            host = agent.value("kubejoule_host_power_watts", text)
            pods = sum(v for _, v in agent.samples("kubejoule_pod_power_watts", text))
            assert idle is not None and host is not None and idle >= other
            assert pods + host + idle == pytest.approx(PLATFORM_WATTS, rel=REL)
            assert pods < rapl * (1 + REL)  # pods share the CPU side only: none of the platform's rest
            age = agent.value("kubejoule_node_platform_reading_age_seconds", text, reading="EnvironmentMetrics")
            assert age is not None and 0.0 <= age <= 1.5
            assert agent.value("kubejoule_agent_errors_total", text, kind="platform") == 0.0
            # the curve says what it measures: the scheduler prices it as the whole server's
            model = {(labels["utilization"], labels["reading"]): v
                     for labels, v in agent.samples("kubejoule_node_power_model_watts", text)}
            assert model[("0.0", "platform")] == 90.0 and model[("1.0", "platform")] == 300.0 and len(model) == 11
            bmc_requests = len(bmc.requests)
            # the BMC goes away: its last reading ages out, then RAPL is node power again
            bmc_service.__exit__(None, None, None)
            text = agent.scrape_until(lambda t: 'kubejoule_node_power_watts{node="test-node",source="rapl"}' in t,
                                      timeout=20)
            assert agent.value("kubejoule_node_platform_other_watts", text) is None
            assert (agent.value("kubejoule_agent_errors_total", text, kind="platform") or 0) >= 1
            wait_until(lambda: any(line.get("msg", "").startswith("cannot read platform power")
                                   for line in agent.logs), what="the outage's log line")
            logs = "\n".join(json.dumps(line) for line in agent.logs)
            assert PASSWORD not in logs and PASSWORD not in text
    finally:
        bmc_service.__exit__(None, None, None)
    assert bmc_requests >= 3  # walked once (root, collection, chassis), then read on its own schedule
    assert agent.returncode == 0


def test_once_records_the_platform_section(tmp_path: Path) -> None:
    credentials = secret(tmp_path / "bmc")
    with serve(redfish_mockup.dell(312)) as bmc:
        proc = run_agent("once", "--interval", "0.3", "--json", "--no-kube", "--no-network", "--no-gpu",
                         "--procfs", str(FIXTURE / "after/proc"), "--sysfs", str(FIXTURE / "after/sys"),
                         "--node", "n1", "--bmc-url", bmc.url, "--bmc-credentials", str(credentials),
                         "--bmc-insecure-http")
    assert proc.returncode == 0, proc.stderr
    record = strict_json(proc.stdout)
    check_record(record)
    assert record["source"] == "platform" and record["node_watts"] == 312.0
    assert record["platform"]["reading"] == "PowerControl"
    assert record["platform"]["chassis"] == "/redfish/v1/Chassis/System.Embedded.1"
    assert record["platform"]["other_watts"] == pytest.approx(312.0 - record["platform"]["cpu_watts"])


@pytest.mark.parametrize("flags", [["--bmc-url", "https://bmc.example"], ["--bmc-credentials", "/tmp"],
                                   ["--bmc-url", "https://admin:pw@bmc.example", "--bmc-credentials", "/tmp"],
                                   # Basic auth in clear, refused without the lab flag
                                   ["--bmc-url", "http://bmc.example", "--bmc-credentials", "/tmp"],
                                   # the system's CAs would trust any public host the URL is changed to
                                   ["--bmc-url", "https://bmc.example", "--bmc-credentials", "/tmp"],
                                   ["--bmc-insecure-http"]])
def test_bmc_misuse_is_a_usage_error(flags: list[str]) -> None:
    proc = run_agent("once", "--interval", "0.1", *flags)
    assert proc.returncode == 2 and "--bmc" in proc.stderr


def test_against_sushy_tools_emulator_the_walk_finds_no_power_reading(tmp_path: Path) -> None:
    """sushy-emulator serves the service root, its chassis collection and chassis (with Thermal),
    behind Basic authentication over HTTPS — and no Power or EnvironmentMetrics: a gap, said once."""
    tls = self_signed(tmp_path, ("127.0.0.1",))
    with sushy.emulator(tmp_path, tls.cert_path, tls.key_path) as bmc:
        good = secret(tmp_path / "good", sushy.USERNAME, sushy.PASSWORD)
        bad = secret(tmp_path / "bad", sushy.USERNAME, "not-the-password")
        for credentials, reason in ((good, "serves no power reading: 1 chassis under /redfish/v1/Chassis"),
                                    (bad, "refused the credentials (HTTP 401)")):
            args = ["--bmc-url", bmc.url, "--bmc-credentials", str(credentials), "--bmc-ca-bundle", str(tls.cert_path),
                    "--bmc-interval", "0.5", "--no-gpu"]
            with AgentProcess(FIXTURE / "before", interval=0.5, hermetic=True, args=args) as agent:
                agent.advance(energy_uj={"intel-rapl:0": 10_000_000}, cpu_ticks={"user": 100, "idle": 100})
                wait_until(lambda: any(line.get("msg", "").startswith("cannot read platform power")  # noqa: B023
                                       for line in agent.logs), what="the BMC's reason")
                text = agent.scrape()
                assert agent.value("kubejoule_node_power_watts", text, source="rapl") is not None
                assert agent.value("kubejoule_node_platform_other_watts", text) is None
            said = [line for line in agent.logs if line.get("msg", "").startswith("cannot read platform power")]
            assert len(said) == 1 and reason in said[0]["reason"], said
