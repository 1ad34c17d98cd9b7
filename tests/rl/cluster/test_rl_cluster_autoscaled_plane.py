"""`cluster up --autoscaler` (rl/cluster/autoscaled_plane.py) without a control plane: its input
checks, cluster-autoscaler's command line at speedup 1, and cluster-autoscaler as one of the
cluster's recorded processes — started (a stand-in binary that answers /health-check), in the
state file, stopped by `down` — and, when it cannot start, the plane stopped again with its log's
last lines in the error. On the real components: tests/e2e/test_e2e_cluster_autoscaler.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from rl.cluster import autoscaled_plane, controlplane
from rl.cluster import autoscaler as ca
from rl.cluster.autoscaled_plane import (
    AutoscalerInputError,
    autoscaler_argv,
    check_inputs,
    up_autoscaled,
)
from rl.cluster.controlplane import Cluster, ClusterOptions
from rl.cluster.processes import ComponentError, start
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.traces.scenario import NodeSpec

NODES = (
    "- {name: scaled, count: 2, min_count: 0, cpu_cores: 8, memory_gib: 16, power: {idle_watts: 50, max_watts: 150}}\n"
    "- {name: base, count: 1, min_count: 1, cpu_cores: 2, memory_gib: 4, power: {idle_watts: 20, max_watts: 60}}\n"
)
# A stand-in for cluster-autoscaler: answers /health-check on its --address until stopped.
HEALTHY = """
import http.server, sys
port = int(next(a for a in sys.argv if a.startswith("--address=")).rsplit(":", 1)[1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health-check" else 404)
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""
FAILING = "import sys\nprint('F1206 kwok provider: no ConfigMap kwok-provider-config', flush=True)\nsys.exit(3)\n"


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return path


def _nodes_file(tmp_path: Path) -> Path:
    path = tmp_path / "nodes.yaml"
    path.write_text(NODES)
    return path


def test_no_binary_says_how_to_get_one_and_why_ci_has_none(tmp_path: Path) -> None:
    with pytest.raises(AutoscalerInputError) as refused:
        check_inputs(None, _nodes_file(tmp_path))
    message = str(refused.value)
    assert "--ca-bin" in message and f"${ca.CA_BIN_ENV}" in message
    assert "403" in message and "tools/k8s/build-ca-from-source.sh" in message


def test_a_ca_bin_naming_no_file_or_no_executable_and_no_node_groups_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AutoscalerInputError, match=r"--ca-bin .*/absent: no such file"):
        check_inputs(tmp_path / "absent", _nodes_file(tmp_path))
    binary = _script(tmp_path / "cluster-autoscaler", HEALTHY)
    binary.chmod(0o644)
    with pytest.raises(AutoscalerInputError, match=r"--ca-bin .*/cluster-autoscaler: not executable"):
        check_inputs(binary, _nodes_file(tmp_path))
    binary.chmod(0o755)
    with pytest.raises(AutoscalerInputError, match="--autoscaler needs --nodes"):
        check_inputs(binary, None)
    found, nodes = check_inputs(binary, _nodes_file(tmp_path))
    assert found == binary and [n.name for n in nodes] == ["scaled-0", "scaled-1", "base-0"]


def test_bad_input_is_refused_before_any_component_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[ClusterOptions] = []
    monkeypatch.setattr(controlplane, "up", lambda options, progress: started.append(options))
    options = ClusterOptions(tmp_path / "plane", tmp_path / "bin", _nodes_file(tmp_path))
    for ca_bin, opts in ((None, options), (tmp_path / "absent", options),
                         (_script(tmp_path / "ca", HEALTHY), ClusterOptions(tmp_path / "plane", tmp_path / "bin"))):
        with pytest.raises(AutoscalerInputError):
            up_autoscaled(opts, ca_bin)
    assert started == []


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv[1:])


def test_cluster_autoscaler_runs_in_real_time_with_the_shipped_timers_and_least_waste(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, api_port=6443)
    argv = autoscaler_argv(cluster, Path("/opt/ca/cluster-autoscaler"), 8085)
    assert argv[0] == "/opt/ca/cluster-autoscaler"
    flags = _flags(argv)
    assert flags["cloud-provider"] == "kwok" and flags["kubeconfig"] == str(tmp_path / "kubeconfig")
    assert flags["address"] == "127.0.0.1:8085"
    assert flags["expander"] == "least-waste" and "grpc-expander-url" not in flags
    # speedup 1: cluster-autoscaler's own values, not divided
    assert flags["scan-interval"] == "10000ms"
    assert flags["scale-down-unneeded-time"] == "600000ms"
    assert flags["scale-down-delay-after-add"] == "600000ms"
    assert flags["max-node-provision-time"] == "900000ms"
    assert flags["max-graceful-termination-sec"] == "600"
    shipped = AutoscalerModel()
    for timer in ca.SCALED_TIMERS:
        assert flags[timer.flag] == ca.seconds_flag(timer.trace_seconds(shipped)), timer.flag


def test_the_autoscaler_process_is_in_the_state_file_and_down_stops_it(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, api_port=6443, kwok_port=10250)
    process = start(autoscaled_plane.PROCESS_NAME, [sys.executable, "-c", "import time; time.sleep(600)"],
                    tmp_path / "logs")
    controlplane.add_process(cluster, process)
    loaded = controlplane.load(tmp_path)
    assert loaded.api_port == 6443 and loaded.kwok_port == 10250
    kept = loaded.processes[autoscaled_plane.PROCESS_NAME]
    assert (kept.pid, kept.argv, kept.log) == (process.pid, process.argv, process.log)
    assert controlplane.down(loaded) == [autoscaled_plane.PROCESS_NAME]
    assert not process.alive()
    assert not (tmp_path / controlplane.STATE_FILE).exists()


def _fake_plane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Cluster]]:
    """`controlplane.up` as a stand-in process (the plane) saved in its state file, and
    `place_groups` recording what it was given."""
    placed: list[Any] = []
    planes: list[Cluster] = []

    def up(options: ClusterOptions, progress: Any) -> Cluster:
        assert options.nodes_file is None  # the groups are the autoscaler's, not `count` plain nodes
        cluster = Cluster(options.directory.resolve(), api_port=6443)
        controlplane.add_process(cluster, start("kube-apiserver", [sys.executable, "-c", "import time; time.sleep(600)"],
                                                cluster.directory / "logs"))
        planes.append(cluster)
        return cluster

    def place_groups(api: Any, nodes: list[NodeSpec], boot_wall_s: float, suffix: str = "", timeout: float = 0) -> list[str]:
        placed.append((nodes, boot_wall_s))
        return [n.name for n in nodes if n.initially_on]

    monkeypatch.setattr(controlplane, "up", up)
    monkeypatch.setattr(ca, "place_groups", place_groups)
    return placed, planes


def test_up_starts_cluster_autoscaler_on_the_groups_and_records_it_for_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    placed, planes = _fake_plane(tmp_path, monkeypatch)
    binary = _script(tmp_path / "cluster-autoscaler", HEALTHY)
    cluster = up_autoscaled(ClusterOptions(tmp_path / "plane", tmp_path / "bin", _nodes_file(tmp_path)), binary)
    nodes, boot = placed[0]
    assert [n.name for n in nodes] == ["scaled-0", "scaled-1", "base-0"]
    assert boot == 120.0  # the simulator's default boot, in real time
    running = cluster.processes[autoscaled_plane.PROCESS_NAME]
    assert running.alive() and _flags(list(running.argv))["scan-interval"] == "10000ms"
    loaded = controlplane.load(tmp_path / "plane")
    assert set(loaded.processes) == {"kube-apiserver", autoscaled_plane.PROCESS_NAME}
    assert sorted(controlplane.down(loaded)) == ["cluster-autoscaler", "kube-apiserver"]
    assert not running.alive() and not planes[0].processes["kube-apiserver"].alive()


def test_when_cluster_autoscaler_cannot_start_the_plane_is_stopped_and_its_log_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _placed, planes = _fake_plane(tmp_path, monkeypatch)
    binary = _script(tmp_path / "cluster-autoscaler", FAILING)
    with pytest.raises(ComponentError, match=r"(?s)cluster-autoscaler: exited \(code 3\).*no ConfigMap kwok-provider-config"):
        up_autoscaled(ClusterOptions(tmp_path / "plane", tmp_path / "bin", _nodes_file(tmp_path)), binary)
    assert not planes[0].processes["kube-apiserver"].alive()
    assert not (tmp_path / "plane" / controlplane.STATE_FILE).exists()
