"""`--instance-type`: node power from a cloud instance's published coefficients where RAPL is
absent — labelled estimated with its provenance in the record, the text, the metrics; from the
agent's own Node when auto; an unknown type is a gap naming it; `kubejoule-calibrate` prints the
estimate beside a measured curve."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from agent.device.hostfs import HostFS
from agent.exporter.prometheus import SnapshotCollector
from agent.monitor.accounts import EnergyAccounts
from agent.monitor.energy_ledger import ExportLevels
from agent.monitor.sampler import Sampler
from benchmarks.harness.agent_kube_emulator import EmulatedCluster
from common.cloud_estimates import lookup
from common.power_profile import SCHEMA
from tests.helpers.agent_cli import POWERCAP, REPO, replay_record, run_agent
from tests.helpers.agent_proc import AgentProcess
from tests.helpers.host_counters import TICKS_PER_SECOND

NODE = "cloud-node"


def without_rapl(tmp_path: Path) -> tuple[Path, Path]:
    """The intel-1s fixture's trees with /proc only (its /proc/stat: u = 0.25): a cloud VM."""
    trees = []
    for phase in ("before", "after"):
        tree = tmp_path / phase
        shutil.copytree(POWERCAP / "intel-1s" / phase / "proc", tree / "proc")
        (tree / "sys").mkdir()
        trees.append(tree)
    return trees[0], trees[1]


def test_without_rapl_node_power_is_the_instance_curve_labelled_with_its_provenance(tmp_path: Path) -> None:
    before, after = without_rapl(tmp_path)
    record = replay_record(before, after, 2.0, "--instance-type", "aws:m5.xlarge")
    entry = lookup("aws", "m5.xlarge")
    assert record["source"] == "estimated" and record["estimate"] == "ccf:aws:m5.xlarge"
    assert record["cpu_utilization"] == pytest.approx(0.25)
    assert record["node_watts"] == pytest.approx(entry.idle_watts + 0.25 * (entry.max_watts - entry.idle_watts))
    assert record["idle_watts"] == pytest.approx(entry.idle_watts)
    assert not any(g["what"] in ("node", "estimate") for g in record["gaps"])
    text = run_agent("replay", str(before), str(after), "--interval", "2", "--instance-type", "aws:m5.xlarge")
    assert text.returncode == 0, text.stderr
    assert "source estimated (ccf:aws:m5.xlarge)" in text.stdout


def test_with_rapl_the_measurement_wins_and_no_estimate_is_labelled() -> None:
    record = replay_record(POWERCAP / "intel-1s/before", POWERCAP / "intel-1s/after", 2.0,
                           "--instance-type", "gcp:n2-standard-4")
    assert record["source"] == "rapl" and record["node_watts"] == pytest.approx(27.5)
    assert "estimate" not in record
    assert record["idle_source"] == "utilization"  # the estimate's idle never splits a measurement
    # `once` and `run` on such a host drop the estimate, and say so
    proc = run_agent("once", "--json", "--interval", "0.2", "--no-kube", "--no-network",
                     "--procfs", str(POWERCAP / "intel-1s/after/proc"), "--sysfs", str(POWERCAP / "intel-1s/after/sys"),
                     "--instance-type", "gcp:n2-standard-4")
    assert proc.returncode == 0, proc.stderr
    assert "node power is measured here" in proc.stderr and "ccf:gcp:n2-standard-4" in proc.stderr


def test_an_unknown_type_is_a_gap_that_names_it_never_a_guess(tmp_path: Path) -> None:
    before, after = without_rapl(tmp_path)
    record = replay_record(before, after, 2.0, "--instance-type", "aws:m99.huge")
    assert record["source"] == "none" and record["node_watts"] is None and "estimate" not in record
    gaps = [g for g in record["gaps"] if g["what"] == "estimate"]
    assert len(gaps) == 1 and "aws:m99.huge" in gaps[0]["reason"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--instance-type", "m5.xlarge"], "PROVIDER:TYPE"),
    (["--instance-type", "oracle:VM.Standard3"], "provider must be one of aws, gcp, azure"),
])
def test_a_malformed_instance_type_is_a_usage_error(tmp_path: Path, extra: list[str], message: str) -> None:
    before, after = without_rapl(tmp_path)
    proc = run_agent("replay", str(before), str(after), "--interval", "2", *extra)
    assert proc.returncode == 2 and message in proc.stderr


def test_an_instance_type_and_a_power_profile_contradict(tmp_path: Path) -> None:
    before, after = without_rapl(tmp_path)
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump({"schema": SCHEMA, "idle_watts": 40.0, "max_watts": 90.0}))
    proc = run_agent("replay", str(before), str(after), "--interval", "2", "--power-profile", str(profile),
                     "--instance-type", "aws:m5.xlarge")
    assert proc.returncode == 2 and "give one curve" in proc.stderr


def test_the_metrics_carry_the_estimate_label_and_the_curve(tmp_path: Path) -> None:
    before, after = without_rapl(tmp_path)
    profile = lookup("azure", "D8as v4").profile()
    sampler = Sampler(HostFS(before / "proc", before / "sys"), "vm-1", profile=profile, process_top=0)
    first = sampler.read()
    sampler.fs = HostFS(after / "proc", after / "sys")
    snapshot = sampler.compute(first, sampler.read(), 2.0)
    collector = SnapshotCollector(EnergyAccounts(ExportLevels()), model_points=profile.model_points(),
                                  model_reading=profile.reading)
    collector.accounts.add(snapshot)
    registry = CollectorRegistry()
    registry.register(collector)
    power = [s for m in registry.collect() if m.name == "kubejoule_node_power_watts" for s in m.samples]
    assert [s.labels for s in power] == [{"node": "vm-1", "source": "estimated", "estimate": "ccf:azure:D8as v4"}]
    model = {s.labels["utilization"]: s.value for m in registry.collect()
             if m.name == "kubejoule_node_power_model_watts" for s in m.samples}
    assert model["0.0"] == pytest.approx(8 * 0.4742621527777778)  # coefficients-azure-use.csv, EPYC 2nd Gen
    assert model["1.0"] == pytest.approx(8 * 1.6929615162037037)


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    with EmulatedCluster() as emulated:
        yield emulated


def test_once_reads_the_type_from_its_own_node(cluster: EmulatedCluster, tmp_path: Path) -> None:
    cluster.add_node(NODE, {"node.kubernetes.io/instance-type": "n2d-standard-8"}, "gce://proj/europe-west1-b/n1")
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    (tmp_path / "sys").mkdir()  # no powercap: a cloud VM
    proc = run_agent("once", "--json", "--interval", "0.3", "--node", NODE, "--kubeconfig", str(kubeconfig),
                     "--sysfs", str(tmp_path / "sys"), "--no-metrics-server", "--no-network")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    entry = lookup("gcp", "n2d-standard-8")
    assert record["source"] == "estimated" and record["estimate"] == "ccf:gcp:n2d-standard-8"
    assert record["node_watts"] == pytest.approx(entry.curve().watts(record["cpu_utilization"]))
    reads = [str(r.url.path) for r in cluster.requests_for("nodes") if str(r.url.path).startswith("/api/v1/")]
    assert reads.count(f"/api/v1/nodes/{NODE}") == 1  # its own Node, once (the other: the test's POST)


def test_once_on_a_node_of_an_unknown_type_says_so_and_gives_a_gap(cluster: EmulatedCluster, tmp_path: Path) -> None:
    cluster.add_node(NODE, {"node.kubernetes.io/instance-type": "z9.colossal"}, "aws:///eu-west-1a/i-0abc")
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    (tmp_path / "sys").mkdir()
    proc = run_agent("once", "--json", "--interval", "0.3", "--node", NODE, "--kubeconfig", str(kubeconfig),
                     "--sysfs", str(tmp_path / "sys"), "--no-metrics-server", "--no-network")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["source"] == "none" and record["node_watts"] is None
    assert any(g["what"] == "estimate" and "aws:z9.colossal" in g["reason"] for g in record["gaps"])
    assert "aws:z9.colossal" in proc.stderr


def test_calibrate_show_prints_the_estimate_beside_the_measured_curve(tmp_path: Path) -> None:
    points = [20.0 + 8.0 * i for i in range(11)]
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump({"schema": SCHEMA, "idle_watts": 20.0, "points": points, "model": "points"}))
    proc = subprocess.run([sys.executable, "-m", "agent.cmd.calibrate_cli", "show", str(profile),
                           "--instance-type", "aws:m5.xlarge"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    entry = lookup("aws", "m5.xlarge")
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip().endswith("%)")}
    idle_line = lines["0"].split()
    assert float(idle_line[2]) == pytest.approx(20.0) and float(idle_line[4]) == pytest.approx(entry.idle_watts, abs=0.01)
    assert "ccf:aws:m5.xlarge" in proc.stdout and "RMS difference over the 11 levels" in proc.stdout
    unknown = subprocess.run([sys.executable, "-m", "agent.cmd.calibrate_cli", "show", str(profile),
                              "--instance-type", "aws:m99.huge"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert unknown.returncode == 2 and "aws:m99.huge" in unknown.stderr


def test_run_exports_the_estimate_with_its_provenance_and_curve(tmp_path: Path) -> None:
    tree = tmp_path / "host"
    shutil.copytree(POWERCAP / "intel-1s" / "before" / "proc", tree / "proc")
    (tree / "sys").mkdir()
    entry = lookup("gcp", "n2-standard-4")
    with AgentProcess(tree, interval=0.5, hermetic=True, args=["--instance-type", "gcp:n2-standard-4"]) as agent:
        agent.wait_samples(1)
        ticks = round(4 * agent.interval * TICKS_PER_SECOND)  # the fixture's 4 CPUs, one interval
        for _ in range(20):  # u = 0.5 over an interval, scraped before the next sample
            agent.advance(cpu_ticks={"user": ticks // 2, "idle": ticks - ticks // 2})
            text = agent.scrape()
            if agent.samples("kubejoule_node_power_watts", text):
                break
        power = agent.samples("kubejoule_node_power_watts", text)
        energy = agent.samples("kubejoule_node_energy_joules_total", text)
        curve = dict((labels["utilization"], value) for labels, value in agent.samples(
            "kubejoule_node_power_model_watts", text))
    assert [labels for labels, _ in power] == [
        {"node": "test-node", "source": "estimated", "estimate": "ccf:gcp:n2-standard-4"}]
    assert power[0][1] == pytest.approx(entry.curve().watts(0.5))
    assert curve["0.0"] == pytest.approx(entry.idle_watts) and curve["1.0"] == pytest.approx(entry.max_watts)
    # the energy counter keeps its provenance, whatever the latest interval could measure
    assert [labels for labels, _ in energy] == [
        {"node": "test-node", "source": "estimated", "estimate": "ccf:gcp:n2-standard-4"}]


def test_calibrate_run_prints_the_estimate_beside_what_it_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    from agent.cmd import calibrate_cli
    from common.curves import PowerCurve
    from tests.helpers.calibrate_run import finished_calibration

    curve = PowerCurve.linear(30.0, 90.0)
    start = time.time() - 200
    measured = finished_calibration(curve, [("idle", start), *((f"step-{i:02d}", start + 20 * i) for i in range(1, 6))])
    monkeypatch.setattr(calibrate_cli, "measure_and_fit", lambda *args: measured)
    (tmp_path / "proc").mkdir()
    out = tmp_path / "n.yaml"
    assert calibrate_cli.main(["run", "--out", str(out), "--procfs", str(tmp_path / "proc"), "--no-progress",
                               "--instance-type", "azure:Standard_F4s_v2"]) == 0
    printed = capsys.readouterr().out
    entry = lookup("azure", "F4s v2")
    rows = [line.split() for line in printed.splitlines() if line.strip().endswith("%)")]
    assert [float(r[0]) for r in rows] == [10.0 * i for i in range(11)]
    for row in rows:  # util, measured, estimated, their difference: each level of both curves
        u = float(row[0]) / 100
        assert float(row[2]) == pytest.approx(curve.watts(u), abs=0.01)
        assert float(row[4]) == pytest.approx(entry.curve().watts(u), abs=0.01)
        assert float(row[6]) == pytest.approx(entry.curve().watts(u) - curve.watts(u), abs=0.02)
    assert "ccf:azure:F4s v2" in printed
    # the calibration's 2 CPUs against the type's 4 vCPUs: the per-vCPU figures at the machine's size
    assert f"at this machine's 2 CPUs they give {2 * entry.min_watts_per_vcpu:.2f}–" in printed
