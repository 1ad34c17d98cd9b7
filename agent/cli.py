"""`kubejoule-agent`: the node agent's command line.

Subcommands: once, snapshot, replay (part 1); run, top (part 2). Command-line misuse exits 2
with usage; measurement problems never change the exit code — they are gaps in the record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from agent.hostfs import HostFS, copy_preserving_links
from agent.report import format_snapshot
from agent.sampler import Sampler, default_node_name
from agent.snapshot import Snapshot


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text!r}")
    return value


def host_options() -> argparse.ArgumentParser:
    """Options every subcommand shares: where the host's /proc and /sys are, the node name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--procfs", type=Path, default=Path("/proc"), help="host procfs root (default /proc)")
    common.add_argument("--sysfs", type=Path, default=Path("/sys"), help="host sysfs root (default /sys)")
    common.add_argument("--node", default=None, help="node name (default $NODE_NAME, else the hostname)")
    return common


def emit(snapshot: Snapshot, as_json: bool) -> None:
    if as_json:
        print(json.dumps(snapshot.to_record(), indent=2))
        if snapshot.node_watts is None:
            # stdout stays valid JSON; the reason in words goes to stderr.
            for gap in snapshot.gaps:
                if gap.what == "node":
                    print(f"node power unknown: {gap.reason}", file=sys.stderr)
                    break
    else:
        print(format_snapshot(snapshot))


def cmd_once(args: argparse.Namespace) -> int:
    sampler = Sampler(HostFS(args.procfs, args.sysfs), args.node)
    before = sampler.read()
    time.sleep(args.interval)
    after = sampler.read()
    emit(sampler.compute(before, after), args.json)
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    fs = HostFS(args.procfs, args.sysfs, record=True)
    Sampler(fs, args.node).read()
    target: Path = args.dir
    copied = skipped = 0
    for path in sorted(fs.recorded):
        for root, name in ((fs.procfs, "proc"), (fs.sysfs, "sys")):
            try:
                rel = path.relative_to(root)
            except ValueError:
                continue
            if copy_preserving_links(root, rel, target / name):
                copied += 1
            else:
                skipped += 1
                print(f"warning: could not copy {path} (unreadable)", file=sys.stderr)
            break
    print(f"snapshot of {copied} files written to {target} (replay with --procfs {target / 'proc'} "
          f"--sysfs {target / 'sys'})" + (f"; {skipped} unreadable files left out" if skipped else ""))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    before_fs = HostFS(args.before / "proc", args.before / "sys")
    after_fs = HostFS(args.after / "proc", args.after / "sys")
    node = args.node or default_node_name()
    before = Sampler(before_fs, node).read()
    after_sampler = Sampler(after_fs, node)
    after = after_sampler.read()
    emit(after_sampler.compute(before, after, args.interval), args.json)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubejoule-agent",
        description="Measure node, pod, VM and process energy from RAPL counters.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = host_options()

    once = sub.add_parser("once", parents=[common], help="take two samples and print the record")
    once.add_argument("--interval", type=positive_float, default=5.0, help="seconds between samples (default 5)")
    once.add_argument("--json", action="store_true", help="print the JSON sample record")
    once.set_defaults(func=cmd_once)

    snap = sub.add_parser("snapshot", parents=[common], help="copy every file the agent reads into DIR")
    snap.add_argument("dir", type=Path, metavar="DIR")
    snap.set_defaults(func=cmd_snapshot)

    replay = sub.add_parser("replay", parents=[common], help="the record computed from two snapshot trees")
    replay.add_argument("before", type=Path, metavar="BEFORE")
    replay.add_argument("after", type=Path, metavar="AFTER")
    replay.add_argument("--interval", type=positive_float, required=True, help="seconds between the two trees")
    replay.add_argument("--json", action="store_true", help="print the JSON sample record")
    replay.set_defaults(func=cmd_replay, validate=_validate_replay)

    for register in EXTRA_COMMANDS:
        register(sub, common)
    return parser


def _validate_replay(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name in ("before", "after"):
        tree: Path = getattr(args, name)
        if not tree.is_dir():
            parser.error(f"{name.upper()} {tree} is not a directory (expected a tree from `snapshot`)")


# Later parts register subcommands here: (subparsers, common options parser) -> None.
EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser], argparse.ArgumentParser], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    validate = getattr(args, "validate", None)
    if validate is not None:
        validate(parser, args)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
