"""`kubejoule-rl trace import` (rl/simulation/traces/trace_import.py) on a pod list of our own in Alibaba's
cluster-trace-gpu-v2023 format (tests/fixtures/rl/openb_pod_list_sample.csv: the trace's header
and column meanings, our own rows — the trace itself is not redistributable): every row's fate
computed by hand, the options, and bad files exiting 2 with the file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cmd.cli import main
from rl.simulation.traces.trace import load_trace

SAMPLE = Path(__file__).resolve().parents[3] / "fixtures" / "rl" / "openb_pod_list_sample.csv"
HEADER = SAMPLE.read_text().splitlines()[0]
WINDOW = ["--from-day", "1", "--to-day", "2", "--request-scale", "0.25", "--usage-ratio", "0.5"]


def _import(tmp_path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, Path, str]:
    out = tmp_path / "trace.csv"
    code = main(["trace", "import", str(SAMPLE), "--out", str(out), *options])
    return code, out, capsys.readouterr().err


def test_the_window_scale_usage_and_owners_as_computed_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Window [86,400 s, 172,800 s). a: running at the start → arrives at 0, cut at the end;
    # j: created at the start; b, d, e: created inside, run from scheduled to deleted (e cut).
    # c (never scheduled), i (deleted when scheduled): never ran; f (gone before), g (created
    # after), k (scheduled after the end): outside; h: 96 cores × 0.25 = 24 > --max-cpu 16.
    code, out, err = _import(tmp_path, capsys, *WINDOW, "--max-cpu", "16")
    assert code == 0
    assert "5 pods; left out: 2 never ran, 3 outside the window, 0 requesting GPUs, 1 above" in err
    rows = [
        (p.submit_s, p.duration_s, p.cpu_request, p.mem_request_gib, p.cpu_usage, p.owner_kind)
        for p in load_trace(out)
    ]
    assert rows == [
        (0.0, 86400.0, 2.0, 4.0, 1.0, "ReplicaSet"),  # a, LS
        (0.0, 13600.0, 1.5, 3.0, 0.75, "ReplicaSet"),  # j, LS
        (3600.0, 3540.0, 1.0, 2.0, 0.5, "Job"),  # b, BE
        (13600.0, 290.0, 4.0, 8.0, 2.0, "Job"),  # d, Burstable
        (83600.0, 2795.0, 0.25, 0.5, 0.125, "ReplicaSet"),  # e, Guaranteed
    ]
    again = tmp_path / "again.csv"
    assert main(["trace", "import", str(SAMPLE), "--out", str(again), *WINDOW, "--max-cpu", "16"]) == 0
    assert again.read_bytes() == out.read_bytes()


def test_options_drop_gpu_pods_and_pods_running_at_the_start_and_remap_owners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _import(tmp_path, capsys, *WINDOW, "--cpu-only-pods", "--no-running-at-start",
                             "--owner", "LS=StatefulSet", "--owner", "BE=Job")
    assert code == 0 and "3 requesting GPUs" in err
    # a left out (it was running before the window), b and j and d (GPUs) too; h now counts.
    assert [(p.submit_s, p.cpu_request, p.owner_kind) for p in load_trace(out)] == [
        (33600.0, 24.0, "StatefulSet"),  # h
        (83600.0, 0.25, "ReplicaSet"),  # e
    ]
    # Memory on its own scale, and a memory ceiling: d (32 GiB × 0.5 = 16 > 10) and h are left out.
    code, out, err = _import(tmp_path, capsys, *WINDOW, "--memory-scale", "0.5", "--max-memory-gib", "10")
    assert code == 0 and "2 above --max-cpu or --max-memory-gib" in err
    assert [(p.cpu_request, p.mem_request_gib) for p in load_trace(out)] == [
        (2.0, 8.0), (1.5, 6.0), (1.0, 4.0), (0.25, 1.0),  # a, j, b, e (h: 96 GiB)
    ]
    code, out, _ = _import(tmp_path, capsys)  # the whole file, unscaled
    pods = load_trace(out)
    assert len(pods) == 9 and max(p.cpu_request for p in pods) == 96.0  # all but c and i


def _write(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    path = tmp_path / "pods.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


GOOD = "ok,1000,1024,0,0,,LS,Running,0,100,0"


@pytest.mark.parametrize(
    ("header", "rows", "options", "reason"),
    [
        ("name,cpu,memory", [GOOD], [], ":1: header: expected name,cpu_milli"),
        (HEADER, [GOOD, "x,1000,1024,0,0,,LS,Running,0,100"], [], ":3: expected 11 fields, got 10"),
        (HEADER, [GOOD, "x,2.5,1024,0,0,,LS,Running,0,100,0"], [], ":3: cpu_milli: not a whole number: '2.5'"),
        (HEADER, ["x,1000,-1,0,0,,LS,Running,0,100,0"], [], ":2: memory_mib: must be >= 0"),
        (HEADER, ["x,1000,1024,0,0,,LS,Running,50,40,50"], [], ":2: deletion_time: before creation_time"),
        (HEADER, ["x,1000,1024,0,0,,LS,Running,50,90,40"], [], ":2: scheduled_time: before creation_time"),
        (HEADER, [GOOD, "x,1000,1024,0,0,,Premium,Running,0,100,0"], [], ":3: qos: unknown 'Premium'"),
        (HEADER, ["x,1000,1024,0,0,,LS,Pending,0,100,"], [], "no pod ran in the window"),
        (HEADER, [GOOD], ["--from-day", "2", "--to-day", "1"], "--to-day: must be after --from-day"),
        (HEADER, [GOOD], ["--request-scale", "0"], "--request-scale: must be > 0"),
        (HEADER, [GOOD], ["--memory-scale", "-1"], "--memory-scale: must be > 0"),
        (HEADER, [GOOD], ["--owner", "LS"], "--owner 'LS': expected QOS=KIND"),
    ],
)
def test_bad_pod_lists_and_options_exit_2_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], header: str, rows: list[str],
    options: list[str], reason: str
) -> None:
    path = _write(tmp_path, rows, header)
    out = tmp_path / "trace.csv"
    assert main(["trace", "import", str(path), "--out", str(out), *options]) == 2
    err = capsys.readouterr().err
    assert reason in err and "Traceback" not in err, err
    if reason.startswith(":"):
        assert f"{path}{reason}" in err
    assert not out.exists()


def test_an_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "absent.csv"
    assert main(["trace", "import", str(missing), "--out", str(tmp_path / "t.csv")]) == 2
    assert f"{missing}: cannot read" in capsys.readouterr().err
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["trace", "import", str(binary), "--out", str(tmp_path / "t.csv")]) == 2
    assert f"{binary}:" in capsys.readouterr().err
