"""`kubejoule-agent run` with kmock's Kubernetes emulator: pod names, Metrics Server series, an
API outage mid-run; and without any API. The agent is a real subprocess on a fixture host tree
(tests/helpers/agent_proc.py) and is scraped over HTTP.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks.harness.agent_kube_emulator import EmulatedCluster, unreachable_kubeconfig
from benchmarks.harness.agent_netns import NetnsLab, host_process, need_netns
from tests.helpers.agent_cli import run_agent
from tests.helpers.agent_proc import WORKLOADS, AgentProcess, wait_until

TREE = WORKLOADS / "v2-systemd-containerd" / "before"
NODE = "test-node"
WEB = "6f1c3b0e-2a4d-4e8b-9c71-0d5e8f2a1b01"  # guaranteed pod in the tree
API = "0b6e2d94-5c3f-4a1e-8d27-93f4c6a5e702"  # burstable pod
VIRT = "5e8d1c2b-7a6f-4e3d-9c8b-2a1f0e9d8c04"  # burstable pod (KubeVirt)
SHARES = {WEB: 0.3, API: 0.2, VIRT: 0.1}


def now_rfc3339(offset_seconds: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_labels(agent: AgentProcess, metric: str, uid: str) -> dict[str, str] | None:
    for labels, _value in agent.samples(metric):
        if labels.get("pod_uid") == uid:
            return labels
    return None


def named(agent: AgentProcess, uid: str, namespace: str, name: str) -> bool:
    labels = pod_labels(agent, "kubejoule_pod_power_watts", uid)
    return labels is not None and (labels["namespace"], labels["pod"]) == (namespace, name)


def exporting_energy(agent: AgentProcess, uid: str, namespace: str, name: str) -> bool:
    """Node power near what the test drives, and the pod's power under these names."""
    text = agent.scrape()
    node_watts = agent.value("kubejoule_node_power_watts", text)
    pod_watts = agent.value("kubejoule_pod_power_watts", text, pod_uid=uid, namespace=namespace, pod=name)
    return node_watts is not None and abs(node_watts - 40.0) < 4.0 and pod_watts is not None and pod_watts > 0


def log_lines(agent: AgentProcess, needle: str) -> list[str]:
    return [str(e.get("msg", "")) for e in agent.logs if needle in str(e.get("msg", ""))]


def container_procs(sysfs: Path, uid: str) -> Path:
    """cgroup.procs of the first container of the pod UID in a fixture tree."""
    [pod_dir] = [d for d in (sysfs / "fs" / "cgroup").rglob(f"*pod{uid.replace('-', '_')}.slice") if d.is_dir()]
    return next(c / "cgroup.procs" for c in sorted(pod_dir.iterdir()) if (c / "cgroup.procs").is_file())


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    with EmulatedCluster() as cluster:
        yield cluster


def start_agent(cluster: EmulatedCluster, tmp_path: Path, *extra: str) -> AgentProcess:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    return AgentProcess(TREE, interval=0.25, node=NODE,
                        args=["--kubeconfig", str(kubeconfig), "--metrics-server-interval", "0.2", *extra])


def test_metrics_carry_pod_names_and_metrics_server_series_for_this_node_only(
    cluster: EmulatedCluster, tmp_path: Path
) -> None:
    cluster.add_pod("shop", "web", NODE, uid=WEB)
    cluster.add_pod("shop", "api", "other-node", uid=API)  # its cgroup is here, but the API says elsewhere
    cluster.set_node_metrics(NODE, "1250m", "3Gi", now_rfc3339(-2))
    cluster.set_pod_metrics("shop", "web", {"nginx": ("200m", "100Mi"), "sidecar": ("50m", "28Mi")}, now_rfc3339(-2))
    cluster.set_pod_metrics("shop", "api", {"app": ("1", "1Gi")}, now_rfc3339(-2))

    with start_agent(cluster, tmp_path) as agent:
        agent.drive(node_watts=40.0, cgroup_share=SHARES)
        wait_until(lambda: named(agent, WEB, "shop", "web"), what="web named")
        wait_until(lambda: agent.value("kubejoule_pod_cpu_usage_cores", pod_uid=WEB) is not None, what="pod usage")
        text = agent.scrape()

        # A pod the API places on another node keeps its UID and empty names here.
        api = pod_labels(agent, "kubejoule_pod_power_watts", API)
        assert api is not None and (api["namespace"], api["pod"]) == ("", "")
        assert agent.value("kubejoule_pod_energy_joules_total", text, pod_uid=WEB, namespace="shop", pod="web")

        assert agent.value("kubejoule_node_cpu_usage_cores", text, node=NODE) == pytest.approx(1.25)
        assert agent.value("kubejoule_node_memory_working_set_bytes", text) == 3 * 2**30
        assert agent.value("kubejoule_pod_cpu_usage_cores", text, pod_uid=WEB, namespace="shop", pod="web") == pytest.approx(0.25)
        assert agent.value("kubejoule_pod_memory_working_set_bytes", text, pod_uid=WEB) == 128 * 2**20
        assert agent.value("kubejoule_pod_cpu_usage_cores", text, pod_uid=API) is None
        age = agent.value("kubejoule_metrics_server_age_seconds", text)
        assert age is not None and 1.0 <= age <= 30.0
        assert agent.value("kubejoule_agent_errors_total", text, kind="metrics_server") == 0
        assert agent.value("kubejoule_agent_errors_total", text, kind="kube_api") == 0

    # Every pod request the agent made asked for its own node; metrics only for its node and pod.
    pod_requests = [r for r in cluster.requests_for("pods") if str(r.url.path) == "/api/v1/pods"]
    assert pod_requests and all(r.params.get("fieldSelector") == f"spec.nodeName={NODE}" for r in pod_requests)
    metric_paths = {str(r.url.path) for r in cluster.requests_for("nodes") + cluster.requests_for("pods")
                    if "metrics.k8s.io" in str(r.url.path)}
    assert metric_paths == {f"/apis/metrics.k8s.io/v1beta1/nodes/{NODE}", "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web"}


def test_a_pod_added_and_deleted_during_the_run(cluster: EmulatedCluster, tmp_path: Path) -> None:
    cluster.set_node_metrics(NODE, "1", "1Gi", now_rfc3339())
    with start_agent(cluster, tmp_path) as agent:
        agent.drive(node_watts=40.0, cgroup_share=SHARES)
        wait_until(lambda: pod_labels(agent, "kubejoule_pod_power_watts", VIRT) is not None, what="virt series")
        assert named(agent, VIRT, "", "")

        cluster.add_pod("vms", "virt-launcher-db", NODE, uid=VIRT, owner_kind="VirtualMachineInstance")
        cluster.set_pod_metrics("vms", "virt-launcher-db", {"compute": ("2", "4Gi")}, now_rfc3339())
        wait_until(lambda: named(agent, VIRT, "vms", "virt-launcher-db"), what="named after ADDED")
        wait_until(lambda: agent.value("kubejoule_pod_cpu_usage_cores", pod_uid=VIRT) == 2.0, what="its usage")

        cluster.delete_pod("vms", "virt-launcher-db")
        # Gone from the node: no more Metrics Server reads for it...
        wait_until(lambda: agent.value("kubejoule_pod_cpu_usage_cores", pod_uid=VIRT) is None, what="usage gone")
        # ...while its cgroup's last energy keeps the names (a deleted pod's grace period).
        agent.wait_samples(2)
        wait_until(lambda: named(agent, VIRT, "vms", "virt-launcher-db"), timeout_seconds=5, what="still named")
        assert pod_labels(agent, "kubejoule_pod_energy_joules_total", VIRT) == {
            "node": NODE, "namespace": "vms", "pod": "virt-launcher-db", "pod_uid": VIRT, "component": "cpu"}


def test_an_api_outage_mid_run_keeps_the_agent_exporting_and_it_recovers(
    cluster: EmulatedCluster, tmp_path: Path
) -> None:
    cluster.add_pod("shop", "web", NODE, uid=WEB)
    cluster.set_node_metrics(NODE, "1", "1Gi", now_rfc3339())
    with start_agent(cluster, tmp_path) as agent:
        agent.drive(node_watts=40.0, cgroup_share=SHARES)
        wait_until(lambda: named(agent, WEB, "shop", "web") and agent.value("kubejoule_node_cpu_usage_cores") == 1.0)

        cluster.stop()
        before = agent.sample_count()
        wait_until(lambda: (agent.value("kubejoule_agent_errors_total", kind="kube_api") or 0) >= 1
                   and (agent.value("kubejoule_agent_errors_total", kind="metrics_server") or 0) >= 3,
                   what="outage counted")
        agent.wait_samples(4)
        assert agent.sample_count() >= before + 4
        wait_until(lambda: exporting_energy(agent, WEB, "shop", "web"), what="energy series during the outage")
        # The last Metrics Server reading stays, with its age growing, until it is too old.
        assert agent.value("kubejoule_node_cpu_usage_cores") == 1.0

        cluster.start()
        cluster.add_pod("shop", "api", NODE, uid=API)
        cluster.set_node_metrics(NODE, "3", "1Gi", now_rfc3339())
        wait_until(lambda: named(agent, API, "shop", "api"), timeout_seconds=20, what="watch recovered")
        wait_until(lambda: agent.value("kubejoule_node_cpu_usage_cores") == 3.0, what="metrics recovered")

    # One line for each outage and one for each recovery, not one per interval.
    assert len(log_lines(agent, "pod watch for node test-node failed")) == 1
    assert len(log_lines(agent, "is connected again")) == 1
    assert len(log_lines(agent, "cannot read Metrics Server")) == 1
    assert len(log_lines(agent, "Metrics Server answers again")) == 1
    assert agent.returncode == 0


METRICS_SERVER_SERIES = (
    "kubejoule_node_cpu_usage_cores", "kubejoule_node_memory_working_set_bytes", "kubejoule_pod_cpu_usage_cores",
    "kubejoule_pod_memory_working_set_bytes", "kubejoule_metrics_server_age_seconds",
)


def test_without_metrics_server_its_series_are_absent_counted_and_logged_once(
    cluster: EmulatedCluster, tmp_path: Path
) -> None:
    cluster.add_pod("shop", "web", NODE, uid=WEB)
    cluster.delete_metrics()  # the API answers, metrics.k8s.io is 404
    with start_agent(cluster, tmp_path) as agent:
        agent.drive(node_watts=40.0, cgroup_share=SHARES)
        wait_until(lambda: named(agent, WEB, "shop", "web"), what="web named")
        wait_until(lambda: (agent.value("kubejoule_agent_errors_total", kind="metrics_server") or 0) >= 3,
                   what="failed reads counted")
        text = agent.scrape()
        assert not [name for name in METRICS_SERVER_SERIES if agent.samples(name, text)]
        assert agent.value("kubejoule_agent_errors_total", text, kind="kube_api") == 0
        wait_until(lambda: exporting_energy(agent, WEB, "shop", "web"), what="energy series")
    [line] = log_lines(agent, "cannot read Metrics Server")
    assert "HTTP 404" in line and "is Metrics Server installed?" in line
    assert agent.returncode == 0


@pytest.mark.parametrize("mode", ["no API configured", "--no-kube", "an API that is down"])
def test_without_an_api_pods_keep_their_uid_and_everything_else_is_exported(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    args: list[str] = []
    if mode == "--no-kube":
        args = ["--no-kube"]
    elif mode == "an API that is down":
        args = ["--kubeconfig", str(unreachable_kubeconfig(tmp_path / "kubeconfig")), "--metrics-server-interval", "0.2"]
    with AgentProcess(TREE, interval=0.25, node=NODE, args=args) as agent:
        agent.drive(node_watts=40.0, cgroup_share=SHARES)
        agent.wait_samples(3)
        wait_until(lambda: all(exporting_energy(agent, uid, "", "") for uid in SHARES), what="pod-UID series")
        text = agent.scrape()
        assert not [name for name in METRICS_SERVER_SERIES if agent.samples(name, text)]
        if mode == "an API that is down":
            wait_until(lambda: (agent.value("kubejoule_agent_errors_total", kind="metrics_server") or 0) >= 2)
            assert (agent.value("kubejoule_agent_errors_total", kind="kube_api") or 0) >= 1
        else:
            assert agent.value("kubejoule_agent_errors_total", text, kind="metrics_server") is None
    if mode == "no API configured":
        assert len(log_lines(agent, "no Kubernetes API")) == 1
    assert agent.returncode == 0


def test_pod_network_counters_move_for_the_pod_that_sends(tmp_path: Path) -> None:
    need_netns()
    lab = NetnsLab()
    host = host_process()
    try:
        sender, quiet = lab.add_pod(), lab.add_pod()
        agent = AgentProcess(TREE, interval=0.25, node=NODE, args=["--no-kube"])
        # Put a real process of each fake pod into a pod cgroup of the tree, and let the tree's
        # /proc show it: the agent then finds the pod's namespace as on a real node.
        for uid, pid in ((WEB, sender.pid), (API, quiet.pid), (VIRT, host.pid)):
            if (agent.procfs / str(pid)).exists():
                pytest.skip(f"pid {pid} collides with a fixture pid")
            os.symlink(f"/proc/{pid}", agent.procfs / str(pid))
            procs = container_procs(agent.sysfs, uid)
            procs.write_text(procs.read_text() + f"{pid}\n")
        # The tree's pid 1 is the host's, as with hostPID: its network is the node's.
        (agent.procfs / "1").mkdir(exist_ok=True)
        os.symlink("/proc/1/net", agent.procfs / "1" / "net")
        with agent:
            agent.drive(node_watts=40.0, cgroup_share=SHARES)
            agent.wait_samples(2)
            first = agent.scrape()
            sender.send_udp(100_000)
            agent.wait_samples(2)
            second = agent.scrape()
    finally:
        host.kill()
        host.wait()
        lab.remove()

    def counter(text: str, uid: str, direction: str = "tx") -> float | None:
        return agent.value("kubejoule_pod_network_bytes_total", text, pod_uid=uid, direction=direction)

    sent_before, sent_after = counter(first, WEB), counter(second, WEB)
    assert sent_before is not None and sent_after is not None
    assert 100_000 <= sent_after - sent_before <= 120_000
    for direction in ("rx", "tx"):  # the other pod's counters stay flat
        assert counter(first, API, direction) == counter(second, API, direction) is not None
        # The host-network pod has no series of its own; the node's interfaces have theirs.
        assert counter(second, VIRT, direction) is None
    assert agent.samples("kubejoule_node_network_bytes_total", second)


def test_once_record_has_pod_names_metrics_server_and_network_sections(
    cluster: EmulatedCluster, tmp_path: Path
) -> None:
    cluster.add_pod("shop", "web", NODE, uid=WEB)
    cluster.set_node_metrics(NODE, "500m", "1Gi", now_rfc3339())
    cluster.set_pod_metrics("shop", "web", {"nginx": ("100m", "64Mi")}, now_rfc3339())
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    tree = tmp_path / "tree"
    shutil.copytree(TREE, tree, symlinks=True)
    (tree / "proc" / "1" / "net").mkdir(parents=True, exist_ok=True)  # the node's interfaces
    (tree / "proc" / "1" / "net" / "dev").write_text(
        "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes\n"
        "    lo: 10 1 0 0 0 0 0 0 10 1 0 0 0 0 0 0\n  eth0: 5000 9 0 0 0 0 0 0 7000 9 0 0 0 0 0 0\n")
    proc = run_agent("once", "--json", "--interval", "0.2", "--node", NODE, "--kubeconfig", str(kubeconfig),
                     "--procfs", str(tree / "proc"), "--sysfs", str(tree / "sys"))
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    names = {p["uid"]: (p["namespace"], p["name"]) for p in record["pods"]}
    assert names[WEB] == ("shop", "web") and names[API] == (None, None)
    assert record["metrics_server"]["node"]["cpu_cores"] == 0.5
    assert [(p["uid"], p["cpu_cores"]) for p in record["metrics_server"]["pods"]] == [(WEB, pytest.approx(0.1))]
    assert record["network"]["interfaces"] == [{"interface": "eth0", "rx_bytes": 5000, "tx_bytes": 7000}]

    quiet = run_agent("once", "--json", "--interval", "0.2", "--no-kube", "--no-network",
                      "--procfs", str(TREE / "proc"), "--sysfs", str(TREE / "sys"))
    assert quiet.returncode == 0, quiet.stderr
    assert "network" not in json.loads(quiet.stdout) and "metrics_server" not in json.loads(quiet.stdout)
