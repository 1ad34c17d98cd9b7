"""The control-plane harness's parts that need no Kubernetes binary (rl/cluster): KWOK's
configuration, the nodes made from a nodes.yaml, the scheduler configuration it runs, and how it
starts, waits for and stops processes. The harness on the real components: tests/e2e."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from rl.cluster import aggregation, controlplane, kwok, pki
from rl.cluster.controlplane import ClusterError, ClusterOptions, node_schedulable, scheduler_config
from rl.cluster.processes import ComponentError, free_port, pid_alive, start, stop, wait_ready
from rl.cmd import cli
from rl.evaluation import on_cluster
from rl.evaluation.benchmark import plan_benchmark
from rl.simulation.cluster import ClusterModel
from rl.simulation.traces.scenario import load_node_groups, scenario_path
from tests.helpers.e2e_cluster import leftover_processes


def test_kwok_configuration_is_its_options_our_eight_stages_and_the_resource_metrics() -> None:
    docs = list(yaml.safe_load_all(kwok.configuration()))
    assert docs[0]["kind"] == "KwokConfiguration"
    assert docs[0]["options"]["manageNodesWithAnnotationSelector"] == "kwok.x-k8s.io/node=fake"
    assert docs[0]["options"]["nodeIP"] == "127.0.0.1"  # where KWOK's server, the nodes' kubelet, listens
    assert [d["kind"] for d in docs[1:]] == ["Stage"] * 8 + ["Metric", "ClusterResourceUsage"]
    stages = {d["metadata"]["name"]: d["spec"] for d in docs[1:9]}
    metric = docs[9]["spec"]
    assert metric["path"] == "/metrics/nodes/{nodeName}/metrics/resource"
    # The series metrics-server decodes, and nothing it would not read.
    assert {m["name"] for m in metric["metrics"]} == {
        "node_cpu_usage_seconds_total", "node_memory_working_set_bytes", "container_start_time_seconds",
        "container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
    }
    usage = docs[10]["spec"]["usages"][0]["usage"]
    assert '"kwok.x-k8s.io/usage-cpu" in pod.metadata.annotations' in usage["cpu"]["expression"]
    assert 'pod.metadata.annotations["kwok.x-k8s.io/usage-memory"]' in usage["memory"]["expression"]
    done = stages["kubejoule-pod-done"]
    # The pod's own duration is the delay, with no jitter (KWOK makes a jitter <= delay the delay).
    assert done["delay"]["durationFrom"]["expressionFrom"] == '.metadata.annotations["kubejoule.io/duration"]'
    assert "jitterDurationMilliseconds" not in done["delay"] and "jitterDurationFrom" not in done["delay"]
    assert "phase: Succeeded" in done["next"]["statusTemplate"]
    # A node is Ready at once unless it boots: then after the delay its annotation gives.
    ready, booted = stages["kubejoule-node-ready"], stages["kubejoule-node-booted"]
    boot_key = '.metadata.annotations["kubejoule.io/boot-delay"]'
    assert {"key": boot_key, "operator": "DoesNotExist"} in ready["selector"]["matchExpressions"]
    assert "delay" not in ready
    assert {"key": boot_key, "operator": "Exists"} in booted["selector"]["matchExpressions"]
    assert booted["delay"]["durationFrom"]["expressionFrom"] == boot_key
    assert booted["next"] == ready["next"]
    assert stages["kubejoule-pod-gone"]["next"]["delete"] is True
    # A replacement (the startup annotation) runs at once, not Ready; Ready after its startup;
    # only a Ready pod's duration runs, so its life is startup + lifetime. One stage per state.
    startup_key = '.metadata.annotations["kubejoule.io/startup"]'
    ready_key = '.status.conditions.[] | select( .type == "Ready" ) | .status'
    running, starting, started = (stages[f"kubejoule-pod-{s}"] for s in ("running", "starting", "started"))
    assert {"key": startup_key, "operator": "DoesNotExist"} in running["selector"]["matchExpressions"]
    assert {"key": startup_key, "operator": "Exists"} in starting["selector"]["matchExpressions"]
    assert 'status: "True", type: Ready' in running["next"]["statusTemplate"]
    assert 'status: "False", type: Ready' in starting["next"]["statusTemplate"]
    assert started["delay"]["durationFrom"]["expressionFrom"] == startup_key
    assert {"key": ready_key, "operator": "NotIn", "values": ["True"]} in started["selector"]["matchExpressions"]
    assert 'status: "True", type: Ready' in started["next"]["statusTemplate"]
    assert {"key": ready_key, "operator": "In", "values": ["True"]} in done["selector"]["matchExpressions"]


def test_nodes_from_the_headline_groups_carry_capacity_group_and_curve() -> None:
    specs = load_node_groups(scenario_path("heterogeneous-autoscaler.yaml"))
    node = kwok.node_object(specs[0])
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"]["kubejoule.io/node-group"] == specs[0].group
    assert json.loads(node["metadata"]["annotations"]["kubejoule.io/power-curve"]) == list(specs[0].curve.as_points())
    assert node["status"]["capacity"]["cpu"] == f"{round(specs[0].cpu_cores * 1000)}m"
    assert node["status"]["capacity"]["memory"] == f"{round(specs[0].memory_gib * 1024)}Mi"
    path = node["metadata"]["annotations"]["metrics.k8s.io/resource-metrics-path"]
    assert path == f"/metrics/nodes/{specs[0].name}/metrics/resource"  # metrics-server scrapes KWOK there


def test_the_aggregation_layer_routes_metrics_k8s_io_to_metrics_server_on_loopback(tmp_path: Path) -> None:
    proxy = aggregation.front_proxy(tmp_path / "front-proxy")
    flags = aggregation.apiserver_flags(proxy)
    assert f"--requestheader-client-ca-file={proxy.ca}" in flags
    assert "--requestheader-allowed-names=front-proxy-client" in flags
    assert f"--proxy-client-cert-file={proxy.client.cert}" in flags
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"PEM")
    [(_, service), (_, api_service)] = aggregation.metrics_server_route(4443, ca)
    assert service["spec"] == {"type": "ExternalName", "externalName": "127.0.0.1",
                               "ports": [{"name": "https", "port": 4443}]}
    assert api_service["metadata"]["name"] == "v1beta1.metrics.k8s.io"
    assert api_service["spec"]["service"] == {"name": "metrics-server", "namespace": "kube-system", "port": 4443}
    assert api_service["spec"]["caBundle"] == "UEVN"  # base64 of the CA, never insecureSkipTLSVerify
    assert aggregation.available({"status": {"conditions": [
        {"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck", "message": "503"}]}}) == (
        False, "FailedDiscoveryCheck: 503")
    assert aggregation.available({"status": {"conditions": [{"type": "Available", "status": "True"}]}})[0]


def test_a_cluster_authority_is_taken_up_again_from_its_directory(tmp_path: Path) -> None:
    first = pki.Authority(tmp_path)
    again = pki.Authority.load(tmp_path)
    pair = again.issue("late", "late-user")
    issued = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    assert issued.issuer == x509.load_pem_x509_certificate(first.cert.read_bytes()).subject


def test_scheduler_config_keeps_the_users_profiles_and_sets_our_kubeconfig(tmp_path: Path) -> None:
    source = tmp_path / "sched.yaml"
    source.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "energy"}], "leaderElection": {"leaderElect": True},
    }))
    config = scheduler_config(tmp_path / "kc", source)
    assert config["profiles"] == [{"schedulerName": "energy"}]
    assert config["clientConnection"]["kubeconfig"] == str(tmp_path / "kc")
    assert config["leaderElection"]["leaderElect"] is True  # the user's choice stands
    assert scheduler_config(tmp_path / "kc", None)["leaderElection"]["leaderElect"] is False


def test_a_file_that_is_not_a_scheduler_configuration_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "bad.yaml"
    source.write_text("kind: Deployment\n")
    with pytest.raises(ClusterError, match="not a KubeSchedulerConfiguration"):
        scheduler_config(tmp_path / "kc", source)


def test_up_names_the_missing_binaries_and_starts_nothing(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="no etcd, kube-apiserver.*make k8s-tools"):
        controlplane.up(ClusterOptions(tmp_path / "c", tmp_path / "bin"))
    assert not (tmp_path / "c").exists()


def test_only_the_benchmarks_plane_leaves_the_workload_controllers_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `kubejoule-rl cluster` and the e2e tests: every controller (no --controllers flag at all).
    assert ClusterOptions(tmp_path, tmp_path).disabled_controllers == ()
    assert controlplane.controllers_flag(()) == []
    assert controlplane.controllers_flag(("job-controller", "replicaset-controller")) == [
        "--controllers=*,-job-controller,-replicaset-controller"]
    # The benchmark's plane: the replay stands in for the controllers that create workloads' pods.
    seen: list[ClusterOptions] = []

    def up(options: ClusterOptions, progress: object) -> None:
        seen.append(options)
        raise ClusterError("stop here")

    monkeypatch.setattr(on_cluster, "up", up)
    plan = plan_benchmark(load_node_groups(scenario_path("fidelity-small-nodes.yaml")), [], ["default"], 1,
                          ClusterModel(), (), False)
    with pytest.raises(ClusterError, match="stop here"):
        on_cluster.run_on_cluster(plan, (), tmp_path, tmp_path / "run", 30.0, lambda _m: None)
    assert seen[0].disabled_controllers == controlplane.REPLAYED_CONTROLLERS
    assert {"replicaset-controller", "statefulset-controller", "job-controller"} <= set(seen[0].disabled_controllers)
    assert not {"disruption-controller", "garbage-collector-controller", "daemonset-controller"} & set(
        seen[0].disabled_controllers)


def test_the_cli_asks_for_the_binaries_and_refuses_a_directory_with_no_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBEJOULE_K8S_BIN", raising=False)
    assert cli.main(["cluster", "up", "--dir", str(tmp_path)]) == 2
    assert "--bin-dir" in capsys.readouterr().err
    assert cli.main(["cluster", "down", "--dir", str(tmp_path)]) == 1
    assert "no cluster here" in capsys.readouterr().err


def _spawner(tmp_path: Path) -> list[str]:
    """A process that starts a grandchild, then sleeps: stopping it must stop both."""
    script = tmp_path / "spawn.py"
    script.write_text(
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {str(tmp_path)!r}])\n"
        "print('ready', child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    return [sys.executable, str(script)]


def test_stop_ends_the_whole_process_group(tmp_path: Path) -> None:
    process = start("spawner", _spawner(tmp_path), tmp_path / "logs")
    wait_ready(process, lambda: "ready" in process.log.read_text(), 30)
    grandchild = int(process.log.read_text().split("ready", 1)[1].split()[0])
    assert pid_alive(grandchild)
    stop(process, grace=5)
    assert not process.alive()
    deadline = time.monotonic() + 5
    while pid_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(grandchild)
    assert leftover_processes(str(tmp_path)) == []


def test_a_component_that_exits_early_fails_with_its_last_log_lines(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('listen tcp: bind: address already in use'); sys.exit(3)"]
    process = start("broken", argv, tmp_path / "logs")
    with pytest.raises(ComponentError, match=r"(?s)broken: exited \(code 3\).*address already in use"):
        wait_ready(process, lambda: False, 30)


def test_a_component_never_ready_times_out_and_says_so(tmp_path: Path) -> None:
    process = start("slow", [sys.executable, "-c", "import time; print('booting'); time.sleep(60)"], tmp_path / "logs")
    try:
        with pytest.raises(ComponentError, match=r"(?s)slow: not ready after 0.5 s.*booting"):
            wait_ready(process, lambda: False, 0.5)
    finally:
        stop(process)


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    assert 0 < port < 65536


def test_a_node_is_schedulable_once_ready_and_the_not_ready_taints_are_gone() -> None:
    """Ready=True alone is not enough: kube-scheduler still filters a node out while the node
    lifecycle controller's not-ready (or unreachable) taint is on it, and a pod created then lands
    elsewhere (seen: an e2e placement on the wrong node under load)."""
    ready = {"type": "Ready", "status": "True"}
    assert node_schedulable({"status": {"conditions": [ready]}})
    assert not node_schedulable({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert not node_schedulable({"status": {}})
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        tainted = {"spec": {"taints": [{"key": key, "effect": "NoSchedule"}]}, "status": {"conditions": [ready]}}
        assert not node_schedulable(tainted), key
    other = {"spec": {"taints": [{"key": "kubejoule.io/rebalancing", "effect": "NoSchedule"}]},
             "status": {"conditions": [ready]}}
    assert node_schedulable(other)  # a taint of ours (or a user's) is the test's business, not readiness
