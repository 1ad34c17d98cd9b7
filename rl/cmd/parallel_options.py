"""`--jobs N` and `--shard K/N`, the options of the commands that run many simulations (running them: rl/evaluation/parallel.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from rl.evaluation.parallel import default_jobs, parse_jobs, parse_shard

T = TypeVar("T")


def add_options(parser: argparse.ArgumentParser) -> None:
    """`--jobs N` and `--shard K/N` on an argparse parser (bad values exit 2 with the reason)."""

    def argument(parse: Callable[[str], T]) -> Callable[[str], T]:
        def checked(text: str) -> T:
            try:
                return parse(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from exc

        checked.__name__ = parse.__name__
        return checked

    parser.add_argument(
        "--jobs",
        type=argument(parse_jobs),
        metavar="N",
        help="simulations run at once, each in its own process; the output is the same for any "
        f"N (default: this machine's CPUs, {default_jobs()}; 1 with --decision-log)",
    )
    parser.add_argument(
        "--shard",
        type=argument(parse_shard),
        metavar="K/N",
        help="run only shard K (0 … N-1, a Kubernetes Indexed Job's JOB_COMPLETION_INDEX) of N "
        "and write its runs to --out; `kubejoule-rl merge` joins the N files into the results",
    )
