"""The third curve source: curves exported by the agents of running nodes with the same label
value as a group's template node (scheduler/autoscaler/running.py), from the unit to the command
run against kmock's Kubernetes emulator and a fake agent.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from benchmarks.harness.expander_grpc import (
    best_options_request,
    ca_client,
    pending_pod,
    self_signed,
    template_node,
)
from benchmarks.harness.processes import free_port, wait_http
from benchmarks.harness.sched_sources import FixedSource
from common.curves import PowerCurve
from scheduler.autoscaler.running import NodeLabelsFromKubernetes, RunningCurves, curves_by_label
from scheduler.autoscaler.server import Expander
from scheduler.cluster import kube
from scheduler.domain.model import NodeTelemetry
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.sched_http import agent_exposition, text_server
from tests.helpers.sched_kube import kube_emulator
from tests.scheduler.cmd.test_autoscaler_cli import COMMAND, ROOT

TYPE = "node.kubernetes.io/instance-type"
LOW = tuple(float(40 + 5 * i) for i in range(11))  # 40 … 90 W
MID = tuple(float(50 + 6 * i) for i in range(11))  # 50 … 110 W
HIGH = tuple(float(90 + 9 * i) for i in range(11))  # 90 … 180 W


def sample(node: str, points: tuple[float, ...] | None) -> NodeSample:
    return NodeSample(NodeTelemetry(node, time.time(), 100.0, "rapl", 0.3, 8.0, points))


def test_the_group_curve_is_the_pointwise_median_of_its_running_nodes() -> None:
    samples = {
        "a1": sample("a1", LOW), "a2": sample("a2", MID), "a3": sample("a3", HIGH),
        "a4": sample("a4", None),  # exports no curve
        "b1": sample("b1", HIGH),
        "c1": sample("c1", LOW),  # no labels known
    }
    labels = {
        "a1": {TYPE: "small", "pool": "p1"}, "a2": {TYPE: "small"}, "a3": {TYPE: "small"},
        "a4": {TYPE: "small"}, "b1": {TYPE: "large", "pool": "p1"},
    }
    curves = curves_by_label(samples, labels, (TYPE, "pool"))
    assert curves[(TYPE, "small")] == PowerCurve.from_points(MID)  # median of LOW, MID, HIGH
    assert curves[(TYPE, "large")] == PowerCurve.from_points(HIGH)
    # pool p1: a1 (LOW) and b1 (HIGH): the median of two is their mean, point by point.
    assert curves[("pool", "p1")].points == tuple((lo + hi) / 2 for lo, hi in zip(LOW, HIGH, strict=True))
    assert set(curves) == {(TYPE, "small"), (TYPE, "large"), ("pool", "p1")}


def test_an_unreachable_api_keeps_the_last_curves() -> None:
    answers: list[object] = [{"a1": {TYPE: "small"}}, RuntimeError("API down")]

    def labels() -> dict:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    running = RunningCurves(labels, (TYPE,))
    running.update({"a1": sample("a1", LOW)})
    running.update({"a1": sample("a1", HIGH)})
    assert running.current() == {(TYPE, "small"): PowerCurve.from_points(LOW)}


def test_a_group_without_a_configured_curve_is_priced_by_its_running_nodes() -> None:
    # ng-known has a configured curve that idles at 200 W; ng-running has none, but running
    # nodes of its instance type export LOW: it is cheaper and wins, by source "running".
    store = TelemetryStore([FixedSource({"w1": sample("w1", LOW)})])
    running = RunningCurves(lambda: {"w1": {TYPE: "c5.xlarge"}}, (TYPE,))
    store.add_listener(running.update)
    store.refresh_once()
    expander = Expander(
        node_groups={"ng-known": PowerCurve.linear(200, 400)}, running_curves=running.current
    )
    templates = {
        "ng-known": template_node("ng-known", "8", "16Gi"),
        "ng-running": template_node("ng-running", "8", "16Gi", {TYPE: "c5.xlarge"}),
    }
    pods = [pending_pod("p", "1", "1Gi")]
    request = best_options_request([("ng-known", 1, pods), ("ng-running", 1, pods)], templates, "bytes")
    from scheduler.autoscaler.protos import expander_pb2

    answer = expander_pb2.BestOptionsResponse.FromString(expander.answer(request.SerializeToString()))
    assert [o.nodeGroupId for o in answer.options] == ["ng-running"]
    assert expander.metrics.value(
        "kubejoule_expander_choices_total", {"node_group": "ng-running", "curve_source": "running"}
    ) == 1


def node_object(name: str, labels: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": {"cpu": "8", "memory": "16Gi"}},
    }


def test_node_labels_through_the_kubernetes_api() -> None:
    with kube_emulator() as k8s:
        k8s.put("v1/nodes", None, "w1", node_object("w1", {TYPE: "c5.xlarge"}))
        k8s.put("v1/nodes", None, "w2", node_object("w2", {}))
        labels = NodeLabelsFromKubernetes(kube.make_api_client(host=k8s.url), refresh_seconds=3600)
        assert labels() == {"w1": {TYPE: "c5.xlarge"}, "w2": {}}
        k8s.put("v1/nodes", None, "w3", node_object("w3", {TYPE: "m5.large"}))
        assert "w3" not in labels()  # not re-listed before refresh_seconds
        assert NodeLabelsFromKubernetes(kube.make_api_client(host=k8s.url))()["w3"] == {TYPE: "m5.large"}


def test_the_command_with_running_curves(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    page = agent_exposition("worker-1", time.time() + 3600, curve=LOW)  # fresh for the test
    with kube_emulator() as k8s, text_server({"/metrics": page}) as agent:
        k8s.put("v1/nodes", None, "worker-1", node_object("worker-1", {TYPE: "c5.xlarge"}))
        config = tmp_path / "scheduler.yaml"
        config.write_text(
            f"kubernetes: {{host: '{k8s.url}'}}\n"
            f"refresh_seconds: 1\n"
            f"telemetry: {{agents: {{static: {{worker-1: '{agent.url('/metrics')}'}}}}}}\n"
            "node_groups: {ng-known: {model: linear, idle_watts: 200, max_watts: 400}}\n"
        )
        grpc_port, http_port = free_port(), free_port()
        process = subprocess.Popen(
            [*COMMAND, "--listen", f"127.0.0.1:{grpc_port}", "--tls-cert", str(tls.cert_path),
             "--tls-key", str(tls.key_path), "--config", str(config), "--running-curves",
             "--metrics-listen", f"127.0.0.1:{http_port}"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            wait_http(f"http://127.0.0.1:{http_port}/readyz", process)  # after a refresh
            templates = {
                "ng-known": template_node("ng-known", "8", "16Gi"),
                "ng-running": template_node("ng-running", "8", "16Gi", {TYPE: "c5.xlarge"}),
            }
            pods = [pending_pod("p", "1", "1Gi")]
            request = best_options_request(
                [("ng-known", 1, pods), ("ng-running", 1, pods)], templates, "messages"
            )
            with ca_client(tls.cert_pem, f"localhost:{grpc_port}") as best_options:
                answer = best_options(request, timeout=10)
            assert [o.nodeGroupId for o in answer.options] == ["ng-running"]
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as scrape:
                assert 'curve_source="running",node_group="ng-running"} 1.0' in scrape.read().decode()
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=20)
        assert process.returncode == 0, stderr.decode()


def test_running_curves_without_a_telemetry_source_is_a_usage_error(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    port = free_port()
    config = tmp_path / "scheduler.yaml"
    config.write_text("kubernetes: {host: 'http://127.0.0.1:9'}\n")
    result = subprocess.run(
        [*COMMAND, "--listen", f"127.0.0.1:{port}", "--tls-cert", str(tls.cert_path), "--tls-key",
         str(tls.key_path), "--config", str(config), "--running-curves", "--metrics-listen", "off"],
        cwd=ROOT, capture_output=True, timeout=60,
    )
    assert result.returncode == 2
    assert b"no telemetry source" in result.stderr

