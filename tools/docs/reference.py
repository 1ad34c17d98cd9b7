"""Write the documentation site's Reference pages (docs/reference/*.md) from the code.

    python tools/docs/reference.py           # (re)write the pages
    python tools/docs/reference.py --check   # exit 1 naming each page that differs from a fresh one

Each page is generated from where the code declares it: commands.md from the argparse parsers,
metrics.md from the metric declarations (common.metrics.MetricSpec), config.md from the scheduler
configuration's dataclasses and the Helm chart's values, record.md from the JSON record's schemas,
contracts.md from the extender's routes and the gRPC services' descriptors.
tests/test_reference_docs.py runs the check.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.docs import commands, config, contracts, metrics, record  # noqa: E402

OUT = REPO / "docs" / "reference"
Renderer = Callable[[], tuple[str, dict[str, int]]]
PAGES: dict[str, Renderer] = {
    "commands.md": commands.render,
    "metrics.md": metrics.render,
    "config.md": config.render,
    "record.md": record.render,
    "contracts.md": contracts.render,
}


def generate() -> dict[str, tuple[str, dict[str, int]]]:
    return {name: render() for name, render in PAGES.items()}


def stale(pages: dict[str, tuple[str, dict[str, int]]], out: Path = OUT) -> list[str]:
    """The pages whose committed text differs from `pages` (or that are missing)."""
    return [name for name, (text, _) in pages.items()
            if not (out / name).is_file() or (out / name).read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    pages = generate()
    if args.check:
        old = stale(pages)
        for name in old:
            print(f"docs/reference/{name} is stale: run python tools/docs/reference.py", file=sys.stderr)
        return 1 if old else 0
    for name, (text, counts) in pages.items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"docs/reference/{name}: " + ", ".join(f"{value} {key}" for key, value in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
