"""Parallel and distributed runs (rl/evaluation/parallel.py, rl/evaluation/shards.py, rl/evaluation/merge.py): `--jobs N` writes the bytes
`--jobs 1` writes; the N shards of a benchmark or a gate, merged in any order, write the bytes
of the unsharded run; bad shard strings and shard files exit 2 naming the argument, the file and
the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from rl.cmd.cli import main
from rl.evaluation.parallel import Shard, parse_shard, run_tasks
from rl.simulation.traces.scenario import format_trace
from rl.simulation.traces.tracegen import TraceConfig, generate_family
from tests.helpers.pool_work import exit_on, slow_square, square_after

NODES_YAML = """\
- name: small
  count: 3
  cpu_cores: 4
  memory_gib: 8
  min_count: 1
  power: {idle_watts: 40, max_watts: 120}
- name: big
  count: 2
  cpu_cores: 16
  memory_gib: 32
  power: {idle_watts: 60, max_watts: 200, curve: fan, r: 1.4}
"""


@pytest.fixture
def cluster(tmp_path: Path) -> list[str]:
    nodes, trace = tmp_path / "nodes.yaml", tmp_path / "trace.csv"
    nodes.write_text(NODES_YAML)
    pods = generate_family("bursts", TraceConfig(hours=0.5, arrivals_per_hour=100), 4)
    trace.write_text(format_trace(pods))
    return [
        "benchmark", "--nodes", str(nodes), "--trace", str(trace), "--autoscaler",
        "--policies", "default,kubejoule,mostallocated@kubejoule", "--seeds", "2",
        "--no-progress",
    ]


@pytest.fixture
def heldout(tmp_path: Path) -> Path:
    root = tmp_path / "heldout"
    for i in range(6):  # the gate's fewest
        folder = root / f"case-{i}"
        folder.mkdir(parents=True)
        (folder / "nodes.yaml").write_text(NODES_YAML)
        pods = generate_family("diurnal", TraceConfig(hours=0.25, arrivals_per_hour=100), 20 + i)
        (folder / "trace.csv").write_text(format_trace(pods))
    return root


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_benchmark_jobs_and_shards_write_the_same_bytes(
    cluster: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, two, merged = (tmp_path / f"{name}.json" for name in ("one", "two", "merged"))
    code, table, _ = _run([*cluster, "--jobs", "1", "--out", str(one)], capsys)
    assert code == 0
    assert _run([*cluster, "--jobs", "2", "--out", str(two)], capsys)[:2] == (0, table)
    assert two.read_bytes() == one.read_bytes()
    document = json.loads(one.read_text())
    assert len(document["policies"]) == 3 and document["seeds"] == 2  # 6 runs
    shards = []
    for k in range(4):  # more shards than some policies have runs: round robin
        shards.append(tmp_path / f"shard-{k}.json")
        code, out, _ = _run([*cluster, "--shard", f"{k}/4", "--jobs", "1", "--out", str(shards[-1])], capsys)
        assert code == 0 and f"shard {k}/4" in out
    assert [len(json.loads(s.read_text())["runs"]) for s in shards] == [2, 2, 1, 1]
    plot = tmp_path / "merged.png"
    argv = ["merge", *map(str, reversed(shards)), "--out", str(merged), "--plot", str(plot)]
    assert _run(argv, capsys)[:2] == (0, table)
    assert merged.read_bytes() == one.read_bytes()
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_gate_jobs_and_shards_write_the_same_bytes(
    heldout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = ["gate", "--candidate", "mostallocated", "--heldout", str(heldout), "--no-progress"]
    one, two, merged = (tmp_path / f"{name}.json" for name in ("one", "two", "merged"))
    reports = [tmp_path / f"{name}.md" for name in ("one", "merged")]
    code, verdict, _ = _run([*gate, "--jobs", "1", "--out", str(one), "--report", str(reports[0])], capsys)
    assert code == 0 and verdict.startswith(("promote", "refuse"))
    assert _run([*gate, "--jobs", "2", "--out", str(two)], capsys)[:2] == (0, verdict)
    assert two.read_bytes() == one.read_bytes()
    shards = [tmp_path / f"gate-{k}.json" for k in range(2)]
    for k, shard in enumerate(shards):
        assert _run([*gate, "--shard", f"{k}/2", "--jobs", "1", "--out", str(shard)], capsys)[0] == 0
    argv = ["merge", str(shards[1]), str(shards[0]), "--out", str(merged), "--report", str(reports[1])]
    assert _run(argv, capsys)[:2] == (0, verdict)
    assert merged.read_bytes() == one.read_bytes()
    assert reports[1].read_text() == reports[0].read_text()


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("--shard", "3/2", "K must be below N"),
        ("--shard", "2/2", "K must be below N"),
        ("--shard", "0/0", "N must be at least 1"),
        ("--shard", "1", "expected K/N"),
        ("--shard", "-1/2", "expected K/N"),
        ("--shard", "a/b", "expected K/N"),
        ("--shard", "1/2/3", "expected K/N"),
        ("--jobs", "0", "--jobs '0'"),
        ("--jobs", "two", "--jobs 'two'"),
    ],
)
def test_bad_shard_and_jobs_arguments_exit_2(
    cluster: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, reason: str
) -> None:
    for command in (cluster, ["gate", "--candidate", "default", "--heldout", str(tmp_path)]):
        with pytest.raises(SystemExit) as exited:
            main([*command, f"{option}={value}", "--out", str(tmp_path / "out.json")])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {option}" in err and reason in err and "Traceback" not in err
    assert not (tmp_path / "out.json").exists()


def test_a_decision_log_needs_one_process(cluster: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*cluster, "--jobs", "2", "--decision-log", str(tmp_path / "log.jsonl"), "--out", str(tmp_path / "r.json")]
    code, _, err = _run(argv, capsys)
    assert code == 2 and "--jobs 1" in err


def _shards(cluster: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], seeds: str = "2") -> list[Path]:
    paths = []
    for k in range(3):
        paths.append(tmp_path / f"s{seeds}-{k}.json")
        argv = [*cluster, "--seeds", seeds, "--policies", "default", "--shard", f"{k}/3", "--out", str(paths[-1])]
        assert _run(argv, capsys)[0] == 0
    return paths


def test_shard_files_that_do_not_join_exit_2_naming_file_and_field(
    cluster: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s0, s1, s2 = _shards(cluster, tmp_path, capsys)
    other = _shards(cluster, tmp_path, capsys, seeds="3")[0]
    tampered = tmp_path / "tampered.json"
    document = json.loads(s1.read_text())
    document["runs"] = document["runs"][:0]
    tampered.write_text(json.dumps(document))
    results = tmp_path / "results.json"
    assert _run([*cluster, "--policies", "default", "--jobs", "1", "--out", str(results)], capsys)[0] == 0
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    cases = [
        ([s0, s1], "missing shard(s) 2/3"),
        ([s0, s1, s1, s2], f"{s1}: shard: 1/3 again"),
        ([other, s1, s2], f"{s1}: plan: differs from {other}"),
        ([s0, tampered, s2], f"{tampered}: runs: tasks [], expected [1]"),
        ([s0, results], f"{results}: schema: not a shard file"),
        ([s0, garbage], f"{garbage}: not JSON"),
        ([s0, tmp_path / "absent.json"], "absent.json: cannot read"),
    ]
    out = tmp_path / "merged.json"
    for files, reason in cases:
        code, _, err = _run(["merge", *map(str, files), "--out", str(out)], capsys)
        assert code == 2 and reason in err and "Traceback" not in err, (files, err)
        assert not out.exists()
    code, _, err = _run(["merge", str(s0), str(s1), str(s2), "--out", str(out), "--report", "x.md"], capsys)
    assert code == 2 and "--report" in err


def test_shards_take_every_nth_task_and_parse_as_job_completion_indices() -> None:
    assert parse_shard("0/4") == Shard(0, 4) and str(parse_shard("3/4")) == "3/4"
    assert Shard(1, 3).indices(8) == [1, 4, 7]
    assert sorted(i for k in range(3) for i in Shard(k, 3).indices(8)) == list(range(8))
    assert Shard(5, 6).indices(3) == []


def test_pool_results_come_back_in_task_order_and_errors_propagate(tmp_path: Path) -> None:
    finished: list[tuple[int, int]] = []
    # task 0 waits for task 2, which the other worker runs: they finish out of order (the order
    # their results reach this process is the OS's to choose, so only the files show it)
    squares = run_tasks(square_after, {"dir": str(tmp_path)}, [0, 1, 2, 3], 2,
                        lambda i, r: finished.append((i, r)))
    assert squares == [0, 1, 4, 9]
    assert sorted(finished) == [(0, 0), (1, 1), (2, 4), (3, 9)]  # done() once per task, its own result
    assert (tmp_path / "2").stat().st_mtime_ns <= (tmp_path / "0").stat().st_mtime_ns
    with pytest.raises(ArithmeticError, match="task -1") as raised:
        run_tasks(slow_square, {2: 0.0, -1: 0.0, 3: 0.0}, [2, -1, 3], 2)
    assert "in slow_square" in str(raised.value.__cause__)  # the worker's traceback


def test_a_worker_that_dies_breaks_the_pool() -> None:
    with pytest.raises(BrokenProcessPool, match="exit status 3"):
        run_tasks(exit_on, {1: 3}, [0, 1, 2, 3], 2)


CHILDREN_AFTER_A_POOL = """
import os, sys
from rl.evaluation.parallel import run_tasks
from concurrent.futures.process import BrokenProcessPool

from tests.helpers.pool_work import exit_on, slow_square, square_after

def children():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.append((int(pid), fields[0]))
    return found

assert run_tasks(slow_square, {0: 0.0, 1: 0.0, 2: 0.0}, [0, 1, 2], 2) == [0, 1, 4]
try:  # a failing task: the workers still running are ended and reaped
    run_tasks(slow_square, {-1: 0.0, 1: 30.0, 2: 0.0}, [-1, 1, 2], 2)
except ArithmeticError:
    print(children())
"""


def test_a_pool_leaves_no_process_behind(tmp_path: Path) -> None:
    """After `--jobs N`, whether its tasks succeed or one fails while another runs, the workers
    are joined and nothing else was started: no child is left to become a zombie when the
    process exits (run in a process of its own, to see its children only)."""
    script = tmp_path / "pool.py"
    script.write_text(CHILDREN_AFTER_A_POOL)
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
