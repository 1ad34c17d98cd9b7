"""`python -m rl.cmd.decision_log_cli`: the MLP's training decision log (writing it: rl/learning/sim_decision_log.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rl.learning.sim_decision_log import TRAINING_LOG_POLICIES, write_training_log


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m rl.cmd.decision_log_cli --out FILE --clusters N --seed S`: an MLP training log."""
    import argparse
    import json
    import os
    import sys

    parser = argparse.ArgumentParser(prog="python -m rl.cmd.decision_log_cli", description=main.__doc__)
    parser.add_argument("--out", required=True, help="decision-log JSONL to write")
    parser.add_argument("--clusters", type=int, default=12, help="random training clusters (12)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the draws (default 1)")
    parser.add_argument("--hours", type=float, default=1.0, help="arrival window per trace (1)")
    parser.add_argument(
        "--policies", default=",".join(TRAINING_LOG_POLICIES), help="policies run on each cluster"
    )
    args = parser.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    if args.clusters < 1 or args.hours <= 0 or not policies:
        print("--clusters and --hours must be positive, --policies non-empty", file=sys.stderr)
        return 2
    if os.path.exists(args.out) and os.path.getsize(args.out) > 0:
        # The decision log appends: a second run into the same file would train on both.
        print(f"{args.out} exists: remove it first (the log is appended to)", file=sys.stderr)
        return 2

    def progress(index: int, draw: dict[str, object]) -> None:
        print(f"cluster {index + 1}/{args.clusters}: {json.dumps(draw)}", file=sys.stderr)

    write_training_log(args.out, args.clusters, args.seed, policies, args.hours, progress)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
