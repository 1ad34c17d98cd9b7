"""The fenced blocks of README.md and every page of the docs site (docs/**/*.md), and their command
lines, for tests/test_docs_examples*.py (the rules are in test_docs_examples.py's docstring)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FIXTURE = REPO / "tests" / "fixtures" / "powercap" / "intel-1s"
SKIP_MARKER = re.compile(r"<!--\s*example:\s*skip\s*\((.+?)\)\s*-->")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    skip: str | None  # the reason of a skip marker right before it

    @property
    def first(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
            if not m:
                i += 1
                continue
            indent, lang, start = len(m.group(1)), m.group(2), i
            body = []
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            previous = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            marker = SKIP_MARKER.search(previous)
            found.append(Block(path, start + 1, lang, "\n".join(body) + "\n", marker.group(1) if marker else None))
            i += 1
    return found


BLOCKS = blocks()


def by_lang(*langs: str) -> list[Block]:
    return [b for b in BLOCKS if b.lang in langs and b.skip is None]

# -- command lines -------------------------------------------------------------------------------


def logical_lines(block: Block) -> list[str]:
    """Lines with continuations joined; in console blocks only the `$ ` lines."""
    out: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if block.lang == "console" or (not pending and line.lstrip().startswith("$ ")):
            if not pending and not line.lstrip().startswith("$ "):
                continue
            line = line.lstrip().removeprefix("$ ") if not pending else line
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        if _open_quote(pending + line):
            pending += line + "\n"  # a quoted string goes on over the line break
            continue
        out.append(pending + line)
        pending = ""
    return [line for line in out if line.strip()]


def _open_quote(line: str) -> bool:
    try:
        shlex.split(line, comments=True)
    except ValueError:
        return True
    return False


def commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split at ; & && | ||), comments removed."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    result: list[list[str]] = [[]]
    for token in lexer:
        if token and set(token) <= set(";&|"):
            result.append([])
        else:
            result[-1].append(token)
    return [c for c in result if c]


def program(argv: list[str]) -> tuple[str, list[str]]:
    while argv and (argv[0] == "sudo" or "=" in argv[0] and not argv[0].startswith("-")):
        argv = argv[1:]  # sudo, VAR=value
    if not argv:
        return ("", [])
    name = argv[0]
    if Path(name).name.startswith("kubejoule-"):
        name = Path(name).name  # one of ours by its path in the venv: `.venv/bin/kubejoule-agent`
    return (name, argv[1:])


def is_synopsis(argv: list[str]) -> bool:
    return any(token.startswith("[") or token in ("COMMAND", "|") for token in argv)


def unelided(text: str) -> str:
    """A YAML example without its elisions: `…`/`...` lines and `, …` in flow collections
    dropped, `{...}` read as `{}` (a profile's fields left out of an example)."""
    text = re.sub(r"(?m)^\s*(…|\.\.\.)\s*$\n?", "", text)
    text = re.sub(r",\s*(…|\.\.\.)\s*([}\]])", r"\2", text)
    text = re.sub(r"\{\s*(…|\.\.\.)\s*\}", "{}", text)
    return re.sub(r"'([^']*)…'", r"'\1'", text)
