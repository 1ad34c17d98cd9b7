"""`kubejoule-rl trace import`: its options and the command (the import itself: rl/simulation/traces/trace_import.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from rl.simulation.traces.trace import ScenarioError, format_trace
from rl.simulation.traces.trace_import import DEFAULT_OWNERS, ImportOptions, import_pods, read_rows


def _owners(entries: Iterable[str]) -> dict[str, str]:
    owners = dict(DEFAULT_OWNERS)
    for entry in entries:
        qos, equals, kind = entry.partition("=")
        if not equals or not qos.strip() or not kind.strip():
            raise ScenarioError(f"--owner {entry!r}: expected QOS=KIND, e.g. LS=StatefulSet")
        owners[qos.strip()] = kind.strip()
    return owners


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`import` under `kubejoule-rl trace` (its options' dests are prefixed: the generator's
    options live on the same namespace)."""
    parser = sub.add_parser(
        "import",
        help="import an Alibaba cluster-trace-gpu-v2023 pod list as a trace",
        description="Import an Alibaba cluster-trace-gpu-v2023 pod list (openb_pod_list_*.csv) "
        "as a simulator trace (see rl/simulation/traces/trace_import.py for every assumption). Exit 2 on bad input.",
    )
    parser.add_argument("pods", metavar="FILE", help="the pod list CSV")
    parser.add_argument("--out", dest="import_out", required=True, help="trace CSV path, or -")
    parser.add_argument("--from-day", type=float, default=0.0, help="window start, days (0)")
    parser.add_argument("--to-day", type=float, help="window end, days (default: the last deletion)")
    parser.add_argument("--request-scale", type=float, default=1.0, help="× CPU and memory requests (1)")
    parser.add_argument("--usage-ratio", type=float, default=0.6, help="CPU used / requested (0.6)")
    parser.add_argument("--memory-scale", type=float, help="× memory requests (default: --request-scale)")
    parser.add_argument("--max-cpu", type=float, help="leave out pods requesting more cores (scaled)")
    parser.add_argument("--max-memory-gib", type=float, help="leave out pods requesting more GiB (scaled)")
    parser.add_argument("--cpu-only-pods", action="store_true", help="leave out pods requesting GPUs")
    parser.add_argument(
        "--no-running-at-start", dest="running_at_start", action="store_false",
        help="leave out pods already running when the window opens",
    )
    parser.add_argument(
        "--owner", action="append", default=[], metavar="QOS=KIND",
        help="owner kind for a qos value (defaults: "
        + ", ".join(f"{q}={k}" for q, k in DEFAULT_OWNERS.items()) + ")",
    )


def command(args: argparse.Namespace) -> int:
    try:
        options = ImportOptions(
            args.from_day, args.to_day, args.request_scale, args.usage_ratio, args.max_cpu,
            args.memory_scale, args.max_memory_gib, args.cpu_only_pods, args.running_at_start,
            _owners(args.owner),
        )
        pods, summary = import_pods(read_rows(args.pods), options, args.pods)
        text = format_trace(pods)
        if args.import_out == "-":
            sys.stdout.write(text)
        else:
            Path(args.import_out).write_text(text)
    except (ScenarioError, OSError) as exc:
        print(f"kubejoule-rl trace import: {exc}", file=sys.stderr)
        return 2
    print(f"imported {summary.describe()}", file=sys.stderr)
    return 0
