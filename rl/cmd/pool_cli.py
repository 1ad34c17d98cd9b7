"""`python -m rl.cmd.pool_cli`: a validation set of case folders from training seeds (the draws: rl/simulation/traces/pool.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rl.simulation.traces.pool import RESERVED_SEEDS, TRAINING_SIZES, VALIDATION_HOURS, write_cases


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m rl.cmd.pool_cli --out DIR --seed-base N --sizes 6,12,24`: a validation set of case
    folders drawn from training seeds, for `kubejoule-rl gate --heldout DIR` while choosing
    training settings (never the promotion gate's own cases)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m rl.cmd.pool_cli", description=main.__doc__)
    parser.add_argument("--out", required=True, help="directory for the case folders")
    parser.add_argument("--seed-base", type=int, required=True, help="case k uses seed N + k")
    parser.add_argument("--sizes", default="8,16,32,48", help="cluster sizes per family")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        sizes = []
    count = len(sizes) * 3
    seeds = range(args.seed_base, args.seed_base + count)
    low, high = TRAINING_SIZES
    if not sizes or not all(low <= s <= high for s in sizes) or args.seed_base < 0:
        print(f"--sizes: integers in {low}..{high}; --seed-base >= 0", file=sys.stderr)
        return 2
    if seeds.start < RESERVED_SEEDS.stop and RESERVED_SEEDS.start < seeds.stop:
        print(
            f"seeds {seeds.start}..{seeds.stop - 1} overlap the reserved "
            f"{RESERVED_SEEDS.start}..{RESERVED_SEEDS.stop - 1}",
            file=sys.stderr,
        )
        return 2
    write_cases(args.out, args.seed_base, sizes, VALIDATION_HOURS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
