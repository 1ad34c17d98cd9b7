"""`make bench`: run every benchmarks/bench_*.py and print its table.

Each benchmark module has `main() -> str` returning a Markdown table (and may print progress
to stderr). Pass names to run a subset: `python benchmarks/run_all.py agent scheduler`.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE.parent))
    wanted = set(argv)
    failures = 0
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if wanted and name not in wanted:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        started = time.monotonic()
        print(f"## {name}", flush=True)
        try:
            print(module.main(), flush=True)
        except Exception as exc:  # report and go on with the other benchmarks
            failures += 1
            print(f"benchmark {name} failed: {exc!r}", flush=True)
        print(f"({time.monotonic() - started:.1f} s)\n", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
