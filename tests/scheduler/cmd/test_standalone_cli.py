"""`kubejoule-scheduler run` as a process: schedules, serves metrics, stops cleanly on SIGTERM.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.harness.processes import free_port
from benchmarks.harness.standalone_kmock import EmulatedCluster
from benchmarks.harness.standalone_objects import node, pod
from scheduler.decisionlog.logfile import read_records
from scheduler.learning.features_v3 import NODE_FEATURES_V3, POD_FEATURES_V3
from scheduler.lifetimes import LifetimePredictor, WorkloadKey, load_state, save_state
from scheduler.standalone.settings import EVENT_RECOMMENDATION
from tests.helpers.sched_http import http_get
from tests.helpers.standalone_harness import wait_for

ROOT = Path(__file__).resolve().parents[3]


def test_run_command_schedules_serves_metrics_and_releases_the_lease(tmp_path: Path) -> None:
    port = free_port()
    decisions = tmp_path / "decisions.jsonl"
    with EmulatedCluster() as cluster:
        for i in range(3):
            cluster.create_node(node(f"n{i}"))
        names = [f"web-{i}" for i in range(5)]
        for name in names:
            cluster.create_pod(pod(name, requests={"cpu": "200m"}))
        config = tmp_path / "scheduler.yaml"
        config.write_text(f"kubernetes:\n  host: {cluster.url}\nrefresh_seconds: 1\n")
        # What an earlier run learned: read at start, written back (with anything new) at exit.
        state = tmp_path / "lifetimes.json"
        learned = LifetimePredictor()
        learned.restore(WorkloadKey("batch", "Job", "nightly"), [600.0, 900.0])
        save_state(learned, state)
        saved_before = json.loads(state.read_text())["saved_at"]
        time.sleep(0.01)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scheduler.cmd.cli",
                "run",
                "--config",
                str(config),
                "--listen",
                f"127.0.0.1:{port}",
                "--decision-log",
                str(decisions),
                "--identity",
                "cli-test",
                "--lease-duration",
                "2",
                "--renew-deadline",
                "1.5",
                "--retry-period",
                "0.2",
                "--seed",
                "1",
                "--lifetime-state",
                str(state),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for(
                lambda: all(cluster.get_pod("default", n)["spec"].get("nodeName") for n in names),
                what="pods bound by the CLI",
            )
            metrics = f"http://127.0.0.1:{port}/metrics"
            wait_for(
                lambda: (
                    'kubejoule_scheduler_schedule_attempts_total{result="scheduled"} 5.0'
                    in http_get(metrics)[1]
                ),
                what="attempt metrics",
            )
            body = http_get(metrics)[1]
            assert "kubejoule_scheduler_leader 1.0" in body
            # the lifetime predictor's error histogram and fallbacks, as the rebalancer exports
            assert 'kubejoule_lifetime_prediction_ratio_bucket{le="+Inf",level="controller"}' in body
            assert 'kubejoule_lifetime_fallbacks_total{reason="no_history"}' in body
            assert http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200
            assert http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200
            pods = [cluster.get_pod("default", n) for n in names]
            lease = cluster.call(
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kubejoule-scheduler",
            )
            assert lease["spec"]["holderIdentity"] == "cli-test"
        finally:
            proc.send_signal(signal.SIGTERM)
            output = proc.communicate(timeout=20)[0]
        assert proc.returncode == 0, output
        lease = cluster.call(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kubejoule-scheduler"
        )
        events = cluster.list_events()  # after the exit, which sends what was queued
    assert lease["spec"]["holderIdentity"] == ""  # released on the way out
    assert json.loads(state.read_text())["saved_at"] > saved_before  # written at exit…
    reread = LifetimePredictor()
    assert load_state(reread, state)  # …after being read at start: nothing lost
    assert dict(reread.histories())[WorkloadKey("batch", "Job", "nightly")] == [600.0, 900.0]
    # shadow mode by default: the recommendation is an Event on every pod, never a patch of it
    assert all(not (p["metadata"].get("annotations") or {}) for p in pods)
    assert {e["involvedObject"]["name"] for e in events if e["reason"] == EVENT_RECOMMENDATION} == set(names)
    records = [r for r in read_records(decisions)[0] if r["type"] == "decision"]
    assert sorted(r["pod"]["name"] for r in records) == names
    assert all(r["mode"] == "shadow" and r["chosen"] == r["default_choice"] for r in records)
    assert all(c["features"] is not None for r in records for c in r["candidates"])
    # Feature schema v3, with the node workloads from the scheduler's cluster cache.
    assert {r["feature_schema"] for r in records} == {"kubejoule.features/v3"}
    features = [c["features"] for r in records for c in r["candidates"]]
    assert all(list(f) == list(NODE_FEATURES_V3 + POD_FEATURES_V3) for f in features)
    assert all(f["workload_known"] == 1.0 for f in features)
    # …and its lifetime predictor (priors until pods end) and the nodes' autoscaler marks
    assert all(f["lifetimes_known"] == 1.0 and f["autoscaler_known"] == 1.0 for f in features)
    assert all(f["predicted_lifetime_seconds"] is not None for f in features)


def test_run_refuses_a_bad_profile_or_percentage_before_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.cmd.cli import main

    config = tmp_path / "scheduler.yaml"
    config.write_text("profile:\n  - {name: KubejouleEnergy, weight: -2}\n")
    assert main(["run", "--config", str(config), "--no-leader-elect"]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err
    assert "profile[0] (KubejouleEnergy): a plugin weight must be >= 0, got -2" in err
    config.write_text("kubernetes: {host: 'http://127.0.0.1:1'}\n")
    code = main(["run", "--config", str(config), "--percentage-of-nodes-to-score", "150"])
    assert code == 2
    assert "percentageOfNodesToScore must be within 0..100, got 150" in capsys.readouterr().err
    code = main(["run", "--config", str(config), "--pod-initial-backoff-seconds", "5",
                 "--pod-max-backoff-seconds", "2"])
    assert code == 2
    assert "the initial one at most the maximum, not 5 s and 2 s" in capsys.readouterr().err


def test_run_passes_the_pod_backoff_to_its_queue(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from scheduler.cmd import cli
    from scheduler.standalone import process

    seen: list[object] = []
    monkeypatch.setattr(process, "run_process", lambda _config, options, _stop: seen.append(options) or 0)
    config = tmp_path / "scheduler.yaml"
    config.write_text("kubernetes: {host: 'http://127.0.0.1:1'}\n")
    cli.main(["run", "--config", str(config), "--no-leader-elect", "--pod-initial-backoff-seconds", "0.5",
              "--pod-max-backoff-seconds", "1"])
    scheduler = seen[0].scheduler  # type: ignore[attr-defined]
    assert (scheduler.initial_backoff_seconds, scheduler.max_backoff_seconds) == (0.5, 1.0)
