"""`kubejoule-rl train`: the DQN placement policy or the MLP energy model.

    kubejoule-rl train --algo dqn --minutes M --seed S [--steps N] --out models/dqn.pt
    kubejoule-rl train --algo mlp --decisions FILE... --seed S --out models/mlp.pt

Both write the torch checkpoint (`.pt`: weights, configuration, metadata), the numpy export the
scheduler serves (`.npz` beside it) and a learning-curve PNG (`.png` beside it, or `--curve`).
Metadata: model kind, feature schema, score map, training families/sizes/seeds, steps and
time, `git describe` of the code, torch version. torch is imported only when training runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ALGOS = ("dqn", "mlp")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    train = sub.add_parser(
        "train", help="train a learned scorer (dqn placement policy, mlp energy model)"
    )
    train.add_argument("--algo", choices=ALGOS, required=True,
                       help="dqn: a Q-network trained in the simulator; mlp: a scorer fitted to decision logs")
    train.add_argument(
        "--out", required=True, help="checkpoint path (.pt); .npz and .png go beside it"
    )
    train.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    train.add_argument(
        "--minutes", type=float, default=5.0, help="dqn: wall-clock budget (default 5)"
    )
    train.add_argument(
        "--steps",
        type=int,
        help="dqn: self-play decisions instead (exact, reproducible; --minutes is then ignored)",
    )
    train.add_argument(
        "--demo-episodes", type=int, default=6, help="dqn: heuristic demonstration episodes (6)"
    )
    train.add_argument(
        "--max-nodes",
        type=int,
        default=64,
        help="dqn: largest training cluster (4..64, default 64)",
    )
    train.add_argument(
        "--reward",
        choices=("credit", "episode"),
        default="credit",
        help="dqn: credit on the action from forked simulations (rl/learning/dqn/credit_train.py, the "
        "default) or the whole cluster's energy between decisions (rl/learning/dqn/train.py)",
    )
    train.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="dqn --reward credit: rollouts run at once, each in its own process (the same "
        "weights for every N; default 1)",
    )
    train.add_argument("--decisions", nargs="+", help="mlp: decision-log JSONL files")
    train.add_argument("--epochs", type=int, default=60, help="mlp: passes over the data (60)")
    train.add_argument("--curve", help="learning-curve PNG (default: OUT with .png)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def code_version() -> str:
    """$KUBEJOULE_CODE_VERSION if set (a source tree without .git, e.g. a `git archive` of a
    commit), else `git describe --always --dirty` of the checkout this code runs from, else
    "unknown"."""
    pinned = os.environ.get("KUBEJOULE_CODE_VERSION", "").strip()
    if pinned:
        return pinned
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def command(args: argparse.Namespace) -> int:
    if not args.out.endswith(".pt"):
        print("kubejoule-rl train: --out must end in .pt", file=sys.stderr)
        return 2
    curve = args.curve or str(Path(args.out).with_suffix(".png"))
    if args.algo == "dqn":
        if (
            args.minutes <= 0
            or (args.steps is not None and args.steps < 1)
            or args.demo_episodes < 0
            or not 4 <= args.max_nodes <= 64
            or args.jobs < 1
        ):
            print(
                "kubejoule-rl train: --minutes and --steps must be positive, --demo-episodes "
                ">= 0, --max-nodes in 4..64, --jobs >= 1",
                file=sys.stderr,
            )
            return 2
        from rl.learning.dqn.cli import train_dqn, train_dqn_credit

        if args.reward == "credit":
            return train_dqn_credit(args, curve, code_version())
        return train_dqn(args, curve, code_version())
    if not args.decisions:
        print("kubejoule-rl train: --algo mlp needs --decisions FILE...", file=sys.stderr)
        return 2
    from rl.learning.mlp import train_mlp_command

    return train_mlp_command(args, curve, code_version())
