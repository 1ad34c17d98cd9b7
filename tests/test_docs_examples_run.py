"""The README's and the docs site's examples that can run on one machine run (the rules:
tests/test_docs_examples.py's docstring). Getting started's commands run as a new user types them,
on a fixture tree instead of the host's /proc and /sys."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from benchmarks.harness.processes import free_port, stop, wait_http
from tests.helpers.docs_blocks import (
    BLOCKS,
    FIXTURE,
    REPO,
    Block,
    commands,
    logical_lines,
    program,
    unelided,
)

# -- examples that run ---------------------------------------------------------------------------


def find_block(path: str, contains: str) -> Block:
    matches = [b for b in BLOCKS if b.path == REPO / path and contains in b.text]
    assert matches, f"no block in {path} contains {contains!r} (the example changed: update this test)"
    return matches[0]


def _cli(name: str, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    module = {"kubejoule-agent": "agent.cmd.cli", "kubejoule-calibrate": "agent.cmd.calibrate_cli",
              "kubejoule-scheduler": "scheduler.cmd.cli", "kubejoule-rl": "rl.cmd.cli"}[name]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=env)


def _documented(block: Block, name: str, subcommand: str) -> list[str]:
    for line in logical_lines(block):
        for argv in commands(line):
            prog, args = program(argv)
            if prog == name and args and args[0] == subcommand:
                return args
    raise AssertionError(f"{block.where}: no `{name} {subcommand}` line")


FIXTURE_TREES = ["--procfs", str(FIXTURE / "after" / "proc"), "--sysfs", str(FIXTURE / "after" / "sys")]


def test_getting_started_agent_once_runs_as_written(tmp_path: Path) -> None:
    """Getting started, step 1: `sudo .venv/bin/kubejoule-agent once --interval 1`, as written
    (without sudo), on a fixture node with RAPL: the table names the node's source."""
    block = find_block("docs/getting-started.md", "kubejoule-agent once --interval 1")
    check = _documented(block, "kubejoule-calibrate", "check")
    assert check == ["check"], check
    args = _documented(block, "kubejoule-agent", "once")
    assert args == ["once", "--interval", "1"], f"Getting started changed its command: {args}"
    proc = _cli("kubejoule-agent", *args, *FIXTURE_TREES, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"source rapl", proc.stdout), proc.stdout
    assert "node power" in proc.stdout


def test_run_agent_once_example_on_a_fixture_tree(tmp_path: Path) -> None:
    block = find_block("docs/concepts/measurement.md", "kubejoule-agent once --interval 1 --json")
    args = [a for a in _documented(block, "kubejoule-agent", "once")]
    proc = _cli("kubejoule-agent", *args, *FIXTURE_TREES, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["schema"] == "kubejoule.sample/v1"


def test_run_agent_replay_example_on_fixture_snapshots(tmp_path: Path) -> None:
    block = find_block("docs/agent.md", "kubejoule-agent replay /tmp/t0")
    args = _documented(block, "kubejoule-agent", "replay")
    # The snapshots the example takes with sudo stand in as the fixture's two trees.
    args = [str(FIXTURE / "before") if a == "/tmp/t0" else str(FIXTURE / "after") if a == "/tmp/t1" else a
            for a in args]
    proc = _cli("kubejoule-agent", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["node_watts"] is not None and record["source"] == "rapl"


def test_run_calibration_show_on_the_documented_profile(tmp_path: Path) -> None:
    profile = find_block("docs/calibration.md", "schema: kubejoule.calibration/v1")
    (tmp_path / "node-a.yaml").write_text(unelided(profile.text))
    commands_block = find_block("docs/calibration.md", "kubejoule-calibrate show")
    proc = _cli("kubejoule-calibrate", *_documented(commands_block, "kubejoule-calibrate", "show"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "41.9" in proc.stdout  # the profile's idle watts


def test_run_agent_with_a_documented_calibration_profile(tmp_path: Path) -> None:
    block = find_block("docs/calibration.md", "kubejoule-agent once --json --power-profile")
    args = _documented(block, "kubejoule-agent", "once")
    args = [str(REPO / a) if a.startswith("agent/power_profiles/") else a for a in args]
    proc = _cli("kubejoule-agent", *args, "--interval", "0.2", *FIXTURE_TREES, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == "kubejoule.sample/v1"


def test_run_rl_examples_on_small_inputs(tmp_path: Path) -> None:
    block = find_block("docs/results.md", "kubejoule-rl scenarios")
    assert _cli("kubejoule-rl", *_documented(block, "kubejoule-rl", "scenarios"), cwd=tmp_path).returncode == 0
    trace = _documented(block, "kubejoule-rl", "trace")
    trace = _replace_option(_replace_option(trace, "--hours", "1"), "--arrivals-per-hour", "20")
    proc = _cli("kubejoule-rl", *trace, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # nodes.yaml: the node-group format's example in docs/rl.md.
    nodes = find_block("docs/rl.md", "cpu_cores: 24")
    (tmp_path / "nodes.yaml").write_text(nodes.text)
    bench = next(
        args for line in logical_lines(block) for argv in commands(line)
        for prog, args in [program(argv)] if prog == "kubejoule-rl" and "--nodes" in args
    )
    proc = _cli("kubejoule-rl", *_replace_option(bench, "--seeds", "1"), "--no-progress", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["schema"].startswith("kubejoule.rl-benchmark/")


def _replace_option(args: list[str], option: str, value: str) -> list[str]:
    assert option in args, f"{option} not in {args}"
    i = args.index(option)
    return [*args[: i + 1], value, *args[i + 2 :]]


@contextlib.contextmanager
def _background(args: list[str], cwd: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(args, cwd=cwd, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        yield process
    finally:
        stop(process)


@pytest.mark.parametrize("doc", ["docs/scheduler.md"])
def test_run_the_local_extender_example(tmp_path: Path, doc: str) -> None:
    """"Locally, without a cluster": a local agent, the extender with the my.yaml the comment
    describes, the curl command as written."""
    block = find_block(doc, "kubejoule-scheduler extender --listen 127.0.0.1:8888")
    lines = logical_lines(block)
    my_yaml = re.search(r"#\s*my\.yaml:\s*(.+)$", next(line for line in lines if "my.yaml" in line))
    assert my_yaml, "the example says what my.yaml holds"
    host = socket.gethostname()
    config = yaml.safe_load(my_yaml.group(1).replace("HOST", host))
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    agent_port, extender_port = free_port(), free_port()
    agent = _documented(block, "kubejoule-agent", "run")
    agent = [a.replace("127.0.0.1:9102", f"127.0.0.1:{agent_port}") for a in agent]
    extender = _documented(block, "kubejoule-scheduler", "extender")
    extender = [
        a.replace("$(hostname)", host).replace("127.0.0.1:9102", f"127.0.0.1:{agent_port}")
        .replace("127.0.0.1:8888", f"127.0.0.1:{extender_port}")
        for a in extender
    ]
    curl = next(line for line in lines if line.lstrip().startswith("curl"))
    curl = curl.replace("127.0.0.1:8888", f"127.0.0.1:{extender_port}")
    with (
        _background([sys.executable, "-m", "agent.cmd.cli", *agent, *FIXTURE_TREES, "--no-kube", "--interval", "0.5"],
                    tmp_path) as agent_process,
        _background([sys.executable, "-m", "scheduler.cmd.cli", *extender, "--no-watch-cluster"], tmp_path) as ext,
    ):
        wait_http(f"http://127.0.0.1:{agent_port}/readyz", agent_process)
        wait_http(f"http://127.0.0.1:{extender_port}/readyz", ext)
        answer = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30)
    assert answer.returncode == 0, answer.stderr
    scores = json.loads(answer.stdout)
    assert [entry["Host"] for entry in scores] == [host]
    assert 0 <= scores[0]["Score"] <= 10
