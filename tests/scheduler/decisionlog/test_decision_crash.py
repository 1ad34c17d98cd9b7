"""`kill -9` loses no acknowledged decision: the standalone scheduler (against kmock's
emulator) writes a pod's decision line before it binds it, and the extender in shadow mode
writes a recommendation's line before it answers (benchmarks/harness/crash_runs.py; the benchmark
runs more kills: benchmarks/bench_decision_log.py).

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.crash_runs import extender_kill_run, standalone_kill_run


def test_killed_standalone_scheduler_loses_no_bound_pods_decision(tmp_path: Path) -> None:
    run = standalone_kill_run(tmp_path, kills=3, pods_per_kill=20)
    assert run.kills == 4 and run.acknowledged == 80  # every pod bound, across four lives
    assert run.lost == []
    # A kill between a line and its binding leaves a decision the next life makes again.
    assert run.decision_lines >= run.acknowledged


def test_killed_extender_loses_no_answered_decision(tmp_path: Path) -> None:
    run = extender_kill_run(tmp_path, kills=3)
    assert run.kills == 3 and run.acknowledged > 0
    assert run.lost == []
