"""The YAML configuration, and `kubejoule-scheduler extender` as a real process on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.harness.processes import free_port
from common.curves import PowerCurve
from scheduler.cmd.cli import build_parser, main
from scheduler.config.build import build_store
from scheduler.config.parse import Config, ConfigError, config_from_dict, load_config
from scheduler.decisionlog.logfile import read_records
from tests.helpers.sched_http import agent_exposition, http_get, text_server
from tests.helpers.standalone_harness import wait_for

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "scheduler" / "examples"


def test_example_config_loads() -> None:
    config = load_config(EXAMPLES / "extender-config.yaml")
    assert config.mode == "shadow"
    assert config.telemetry.agents.endpoint_slices is not None
    assert config.telemetry.agents.endpoint_slices.service == "kubejoule-agent"
    assert config.needs_kubernetes


def test_example_kube_scheduler_configuration() -> None:
    doc = yaml.safe_load((EXAMPLES / "kube-scheduler-config.yaml").read_text())
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    [extender] = doc["extenders"]
    assert extender["prioritizeVerb"] == "prioritize" and extender["filterVerb"] == "filter"
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is True
    assert isinstance(extender["weight"], int) and extender["weight"] > 0
    assert extender["httpTimeout"].endswith("s")


def test_full_config() -> None:
    config = config_from_dict(
        {
            "mode": "active",
            "listen": "127.0.0.1:9000",
            "max_staleness_seconds": 15,
            "scorer": {"delta_p_ref_watts": 35.5, "consolidation": True},
            "curves": {
                "a": {"model": "linear", "idle_watts": 80, "max_watts": 250},
                "b": {"points": list(range(100, 210, 10))},
            },
            "power_caps_watts": {"a": 300},
            "default_power_cap_watts": 500,
            "telemetry": {
                "agents": {"static": ["a=10.0.0.1:9102"], "timeout_seconds": 1},
                "prometheus": {"url": "http://prom:9090"},
                "node_cores": {"a": 16},
            },
            "extender": {"inflight_body_bytes": 32 * 2**20},
        }
    )
    assert config.scorer.delta_p_ref_watts == 35.5 and config.scorer.consolidation
    assert config.extender.inflight_body_bytes == 32 * 2**20
    assert config.curves["a"] == PowerCurve.linear(80, 250)
    assert config.curves["b"].watts(0.55) == pytest.approx(155.0)
    assert (config.power_cap("a"), config.power_cap("z")) == (300.0, 500.0)
    assert config.telemetry.agents.static == {"a": "http://10.0.0.1:9102/metrics"}
    assert not config.needs_kubernetes
    store = build_store(config)
    assert [s.name for s in store.sources] == ["agents", "prometheus"]
    store.stop()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mode": "yolo"}, "mode"),
        ({"listen": "nowhere"}, "HOST:PORT"),
        ({"colour": "blue"}, "unknown key"),
        ({"scorer": {"delta_p_ref_watts": 0}}, "positive"),
        ({"scorer": {"delta_p_ref_watts": "20W"}}, "number"),
        ({"scorer": {"consolidation": "yes"}}, "true or false"),
        ({"scorer": {"name": "dqn"}}, "heuristic"),
        ({"curves": {"a": {"model": "cubic", "idle_watts": 1, "max_watts": 2}}}, "curves.a"),
        ({"curves": {"a": {"points": [1, 2, 3]}}}, "curves.a"),
        ({"telemetry": {"agents": {"static": ["justaname"]}}}, "node=url"),
        ({"telemetry": {"prometheus": {"timeout_seconds": 1}}}, "prometheus.url"),
        ({"telemetry": {"agents": {"endpoint_slices": {"namespaces": "x"}}}}, "unknown key"),
        ({"power_caps_watts": {"a": -5}}, "positive"),
        ({"extender": {"inflight_body_bytes": 0}}, "extender.inflight_body_bytes"),
        ({"extender": {"inflight_body_bytes": "lots"}}, "extender.inflight_body_bytes"),
    ],
)
def test_config_errors_name_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


def test_load_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("mode: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    assert load_config(None) == Config()


def test_cli_rejects_a_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("mode: sideways\n")
    assert main(["extender", "--config", str(path)]) == 2
    assert "mode" in capsys.readouterr().err


def test_cli_has_subcommands() -> None:
    parser = build_parser()
    args = parser.parse_args(["extender", "--listen", "127.0.0.1:1", "--mode", "active"])
    assert (args.command, args.listen, args.mode) == ("extender", "127.0.0.1:1", "active")
    with pytest.raises(SystemExit):
        parser.parse_args(["extender", "--mode", "sideways"])


def _post(url: str, payload: Any) -> Any:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_extender_process_scores_from_live_agents(tmp_path: Path) -> None:
    """The installed entry point, a real uvicorn server, agents scraped over HTTP."""
    now = time.time()
    frugal = PowerCurve.linear(50, 130).as_points()  # 2 of 8 cores → 20 W
    hungry = PowerCurve.linear(100, 260).as_points()  # → 40 W
    with text_server() as agents:
        agents.pages["/frugal/metrics"] = agent_exposition("frugal", now, utilization=0.3, curve=frugal)
        agents.pages["/hungry/metrics"] = agent_exposition("hungry", now, utilization=0.3, curve=hungry)
        config = {
            "refresh_seconds": 0.2,
            "scorer": {"delta_p_ref_watts": 50},
            "telemetry": {
                "agents": {"static": {n: agents.url(f"/{n}/metrics") for n in ("frugal", "hungry")}},
                "node_cores": {"frugal": 8, "hungry": 8},
            },
        }
        path = tmp_path / "extender.yaml"
        path.write_text(yaml.safe_dump(config))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cmd.cli", "extender", "--config", str(path),
             "--listen", f"127.0.0.1:{port}", "--mode", "active", "--log-level", "warning",
             "--decision-log", str(tmp_path / "decisions.jsonl")],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        try:
            def scraped_both() -> bool:
                # Ready (one refresh done) and holding both agents' samples: on loaded cores a
                # first scrape may time out, and the next refresh is 0.2 s later.
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                status, text = http_get(f"{base}/metrics")
                return status == 200 and all(
                    f'kubejoule_scheduler_telemetry_age_seconds{{node="{n}"}}' in text
                    for n in ("frugal", "hungry")
                ) and http_get(f"{base}/readyz")[0] == 200

            wait_for(scraped_both, 30, "the extender ready with both agents' telemetry")
            pod = {"metadata": {"name": "p", "namespace": "default"},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}
            scores = _post(f"{base}/prioritize", {"Pod": pod, "NodeNames": ["frugal", "hungry", "gone"]})
            # "gone" has no agent and no known curve: the floor, below every measured node.
            assert scores == [
                {"Host": "frugal", "Score": 6}, {"Host": "hungry", "Score": 2}, {"Host": "gone", "Score": 0}
            ]
            status, metrics = http_get(f"{base}/metrics")
            assert status == 200 and 'kubejoule_scheduler_telemetry_age_seconds{node="frugal"}' in metrics
            assert agents.hits["/frugal/metrics"] >= 1
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                # uvicorn shuts down cleanly, then re-raises the signal it caught.
                assert process.wait(20) in (0, -signal.SIGTERM)
            finally:
                if process.poll() is None:
                    process.kill()
    # The recommendation reached the decision log (flushed on shutdown).
    records, broken = read_records(tmp_path / "decisions.jsonl")
    assert broken == 0
    [decision] = [r for r in records if r["type"] == "decision"]
    assert (decision["source"], decision["mode"], decision["recommended"]) == ("extender", "active", "frugal")
    assert {c["node"] for c in decision["candidates"]} == {"frugal", "hungry", "gone"}
    # Feature schema v3 (issue 24), as the standalone scheduler logs it; without a cluster
    # watch the workload, lifetime and autoscaler features are unknown, never guessed.
    from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3

    assert decision["feature_schema"] == FEATURE_SCHEMA_V3.version
    names = list(FEATURE_SCHEMA_V3.node_features + FEATURE_SCHEMA_V3.pod_features)
    for candidate in decision["candidates"]:
        features = candidate["features"]
        assert list(features) == names
        assert (features["workload_known"], features["lifetimes_known"]) == (0.0, 0.0)
        assert features["predicted_seconds_until_pods_end"] is None
        assert features["predicted_lifetime_seconds"] is None


def test_the_extender_command_gives_the_app_the_configured_body_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """extender.inflight_body_bytes reaches the app's global budget; the example file states the
    default the code uses."""
    import uvicorn

    from scheduler.extender.body import DEFAULT_INFLIGHT_BODY_BYTES

    assert load_config(EXAMPLES / "extender-config.yaml").extender.inflight_body_bytes == (
        DEFAULT_INFLIGHT_BODY_BYTES
    )
    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: apps.append(app))
    config = tmp_path / "c.yaml"
    config.write_text("extender: {inflight_body_bytes: 33554432, watch_cluster: false}\n")
    assert main(["extender", "--config", str(config), "--listen", "127.0.0.1:18888"]) == 0
    [app] = apps
    assert app.state.body_budget.limit == 33554432
