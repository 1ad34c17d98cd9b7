"""`kubejoule-scheduler autoscaler-expander` as a process: it serves BestOptions over TLS and
/healthz and /metrics over HTTP, stops cleanly on SIGTERM, and refuses bad usage with exit 2."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from benchmarks.harness.expander_grpc import (
    best_options_request,
    ca_client,
    pending_pod,
    self_signed,
    template_node,
)
from benchmarks.harness.processes import free_port, wait_http

ROOT = Path(__file__).resolve().parents[3]
COMMAND = [sys.executable, "-m", "scheduler.cmd.cli", "autoscaler-expander"]
INSTANCE_TYPE = "node.kubernetes.io/instance-type"

CONFIG = """
scorer: {consolidation_utilization: 0.5}
node_groups:
  ng-small: {model: linear, idle_watts: 30, max_watts: 60}
  c5.4xlarge: {points: [58.4, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222]}
"""


def test_the_command_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    config = tmp_path / "scheduler.yaml"
    config.write_text(CONFIG)
    grpc_port, http_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            *COMMAND, "--listen", f"127.0.0.1:{grpc_port}", "--tls-cert", str(tls.cert_path),
            "--tls-key", str(tls.key_path), "--config", str(config),
            "--metrics-listen", f"127.0.0.1:{http_port}",
        ],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        wait_http(f"http://127.0.0.1:{http_port}/healthz", process)
        templates = {
            "ng-small": template_node("ng-small", "2", "4Gi"),
            "ng-large": template_node("ng-large", "24", "64Gi", {INSTANCE_TYPE: "c5.4xlarge"}),
        }
        pods = [pending_pod("web-0", "1", "1Gi")]
        request = best_options_request([("ng-small", 1, pods), ("ng-large", 1, pods)], templates, "bytes")
        with ca_client(tls.cert_pem, f"localhost:{grpc_port}") as best_options:
            answer = best_options(request, timeout=10)
        # ng-small: (30 + 15) / 0.5 / 1.9 cores ≈ 47.4 W per core; ng-large by its instance
        # type: 140 / 0.5 / 23.9 cores ≈ 11.7 W per core.
        assert [o.nodeGroupId for o in answer.options] == ["ng-large"]
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as scrape:
            text = scrape.read().decode()
        assert 'kubejoule_expander_requests_total{code="OK",form="bytes"} 1.0' in text
        assert 'kubejoule_expander_choices_total{curve_source="label",node_group="ng-large"} 1.0' in text
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr.decode()
    assert b"scale-up choice: ng-large" in stderr


@pytest.mark.parametrize("problem", ["missing-key", "mismatched-pair", "bad-listen", "bad-config"])
def test_bad_usage_exits_2_with_a_message(tmp_path: Path, problem: str) -> None:
    tls = self_signed(tmp_path)
    (tmp_path / "other").mkdir()
    other = self_signed(tmp_path / "other")
    args = ["--listen", f"127.0.0.1:{free_port()}", "--tls-cert", str(tls.cert_path),
            "--tls-key", str(tls.key_path), "--metrics-listen", "off"]
    if problem == "missing-key":
        args[5] = str(tmp_path / "absent.key")
        reason = b"cannot read the TLS certificate or key"
    elif problem == "mismatched-pair":
        args[5] = str(other.key_path)
        reason = b"not a usable pair"
    elif problem == "bad-listen":
        args[1] = "nowhere"
        reason = b"expected HOST:PORT"
    else:
        (tmp_path / "bad.yaml").write_text("node_groups: {g: {model: cubic, idle_watts: 1, max_watts: 2}}\n")
        args += ["--config", str(tmp_path / "bad.yaml")]
        reason = b"node_groups.g"
    result = subprocess.run([*COMMAND, *args], cwd=ROOT, capture_output=True, timeout=60)
    assert result.returncode == 2
    assert b"configuration error" in result.stderr and reason in result.stderr, result.stderr
