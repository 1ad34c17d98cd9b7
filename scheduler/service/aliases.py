"""Old command-line flags that still work: `deprecated_alias(parser, "--old", "--new")` accepts
`--old` as `--new` (same value, same destination) and warns on stderr, naming the new flag.
Renamed flags (docs/DESIGN.md, "Glossary") keep working this way for a release or two."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


class _DeprecatedFlag(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None
    ) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Accept `old` for the already-declared flag `new`, warning when it is used; hidden from --help."""
    target = next(action for action in parser._actions if new in action.option_strings)
    typed: dict[str, Any] = {"type": target.type} if target.type is not None else {}
    parser.add_argument(
        old, dest=target.dest, new=new, action=_DeprecatedFlag, metavar=target.metavar,
        default=argparse.SUPPRESS, help=argparse.SUPPRESS, **typed,
    )
