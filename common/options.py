"""argparse value types shared by the agent's command lines (`kubejoule-agent`,
`kubejoule-calibrate`): a bad value is a usage error (exit 2) with the reason, never a traceback.

And old flags that still work, for every kubejoule command line (`kubejoule-scheduler` and
`kubejoule-rl` too): `deprecated_alias(parser, "--old", "--new")` accepts `--old` as `--new` (same
value, same destination) and warns on stderr, naming the new flag. Renamed flags (docs/DESIGN.md,
"Glossary") keep working this way for a release or two."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from typing import TypeAlias


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text!r}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite: {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite: {text!r}")
    return value


def fraction(text: str) -> float:
    value = non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {text!r}")
    return value


def int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text!r}")
        return value

    parse.__name__ = f"integer >= {minimum}"  # argparse names the type in its messages
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)

# What `parser.add_subparsers()` returns, for the functions that add a subcommand to it (argparse
# names its class privately, so it is named once here).
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class _DeprecatedFlag(argparse.Action):
    # argparse builds it with what `deprecated_alias` gives `add_argument`; `convert` is the new
    # flag's `type` (None: the text as it is).
    def __init__(
        self, option_strings: Sequence[str], dest: str, new: str = "",
        convert: Callable[[str], object] | argparse.FileType | None = None,
        metavar: str | tuple[str, ...] | None = None, default: str | None = None, help: str | None = None,
    ) -> None:
        self.new = new
        super().__init__(option_strings, dest, type=convert, metavar=metavar, default=default, help=help)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
        values: str | Sequence[object] | None, option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Accept `old` for the already-declared flag `new`, warning when it is used; hidden from --help."""
    target = next(action for action in parser._actions if new in action.option_strings)
    parser.add_argument(
        old, dest=target.dest, new=new, convert=target.type, action=_DeprecatedFlag, metavar=target.metavar,
        default=argparse.SUPPRESS, help=argparse.SUPPRESS,
    )


def deprecated_target(action: argparse.Action) -> str | None:
    """The flag a deprecated alias stands for (None for any other action): the reference pages
    list renamed flags by it."""
    return action.new if isinstance(action, _DeprecatedFlag) else None
