"""docs/reference/commands.md from the command lines' own argparse parsers: every command,
subcommand and option, with its value, default and help, walked from the parser's actions (never
from --help text). Renamed flags (common.options.deprecated_alias) are listed as such."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common.options import deprecated_target
from tools.docs.markdown import code, header, table

# The console scripts of pyproject.toml's [project.scripts] and the function building each one's parser
# (tests/test_reference_docs.py checks this list against pyproject.toml).
PROGRAMS: Mapping[str, str] = {
    "kubejoule-agent": "agent.cmd.cli:build_parser",
    "kubejoule-calibrate": "agent.cmd.calibrate_cli:build_parser",
    "kubejoule-scheduler": "scheduler.cmd.cli:build_parser",
    "kubejoule-rl": "rl.cmd.cli:_build_parser",
}
# Environment variables some defaults are read from: the page shows the default without them.
# Everything else stays, so a default read from another variable still shows (and the test comparing
# a fresh page with the committed one says so).
DEFAULT_ENV = ("KUBEJOULE_K8S_BIN", "KUBEJOULE_CA_BIN", "POD_NAMESPACE", "NODE_NAME")
TYPE_NAMES = {
    "int": "integer", "float": "number", "str": "text", "Path": "path", "positive_float": "number > 0",
    "non_negative_float": "number ≥ 0", "fraction": "number from 0 to 1",
}


@contextmanager
def _plain_environment() -> Iterator[None]:
    saved = {name: os.environ.pop(name) for name in DEFAULT_ENV if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def parser_of(program: str) -> argparse.ArgumentParser:
    module, _, function = PROGRAMS[program].partition(":")
    build: Callable[[], argparse.ArgumentParser] = getattr(__import__(module, fromlist=[function]), function)
    with _plain_environment():
        return build()


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]  # ("kubejoule-rl", "cluster", "up")
    parser: argparse.ArgumentParser
    summary: str  # the help its parent's add_parser gave it
    aliases: tuple[str, ...] = ()


def commands(program: str, parser: argparse.ArgumentParser | None = None) -> list[Command]:
    """The program and every subcommand under it, depth first, in the parser's order."""
    root = parser if parser is not None else parser_of(program)
    found = [Command((program,), root, root.description or "")]

    def walk(parent: Command) -> None:
        for action in parent.parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: dict[int, list[str]] = {}
            for name, sub in action.choices.items():
                seen.setdefault(id(sub), []).append(name)
            for name, sub in action.choices.items():
                names = seen[id(sub)]
                if name != names[0]:
                    continue
                child = Command((*parent.path, name), sub, summaries.get(name, ""), tuple(names[1:]))
                found.append(child)
                walk(child)

    walk(found[0])
    return found


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's own options and positionals: not --help, not its subcommands."""
    return [
        action for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction | argparse._VersionAction)
    ]


def undocumented(program: str, parser: argparse.ArgumentParser | None = None) -> list[str]:
    """Every option or positional without help text (renamed flags are documented by their new name)."""
    missing = []
    for command in commands(program, parser):
        for action in options(command.parser):
            if deprecated_target(action) is not None:
                continue
            if action.help is argparse.SUPPRESS or not (action.help or "").strip():
                missing.append(f"{' '.join(command.path)} {_name(action)}")
    return missing


def _name(action: argparse.Action) -> str:
    if action.option_strings:
        return ", ".join(action.option_strings)
    return str(action.metavar or action.dest).upper() if not isinstance(action.metavar, tuple) else action.dest


def _value(action: argparse.Action) -> str:
    if isinstance(action, argparse.BooleanOptionalAction):
        return "on/off"
    if action.nargs == 0:
        return "flag"
    if action.choices is not None:
        text = " \\| ".join(code(choice) for choice in action.choices)
    else:
        kind = action.type
        type_name = getattr(kind, "__name__", "") if kind is not None else "str"
        text = TYPE_NAMES.get(type_name, type_name.replace("_", " ").replace(">=", "≥"))
        if action.option_strings and isinstance(action.metavar, str):
            text = f"{code(action.metavar)} ({text})"
    if action.nargs in ("*", "+") or isinstance(action.nargs, int) and action.nargs > 1:
        text += ", several"
    if isinstance(action, argparse._AppendAction):
        text += ", repeatable"
    return text


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    default = action.default
    if isinstance(action, argparse._StoreTrueAction):
        return "off"
    if isinstance(action, argparse._StoreFalseAction):
        return "on"
    if isinstance(action, argparse.BooleanOptionalAction) and default is not None:
        return "on" if default else "off"
    if default is None or default is argparse.SUPPRESS or default == []:
        return "—"
    if isinstance(default, list | tuple):
        return code(",".join(str(item) for item in default))
    if isinstance(default, Path | str | int | float):
        return code(default)
    return code(getattr(default, "__name__", type(default).__name__))


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%" in text:
        params = dict(vars(action), prog=prog)
        if isinstance(params.get("choices"), list | tuple):
            params["choices"] = ", ".join(str(choice) for choice in params["choices"])
        text = text % params
    return text


def _option_cell(action: argparse.Action) -> str:
    if isinstance(action, argparse.BooleanOptionalAction):
        return " / ".join(code(option) for option in action.option_strings)
    return ", ".join(code(option) for option in action.option_strings) or code(_name(action))


def command_section(command: Command) -> list[str]:
    depth = min(len(command.path) + 1, 4)
    lines = ["#" * depth + " " + " ".join(command.path), ""]
    if command.summary:
        lines += [command.summary[0].upper() + command.summary[1:] + ("" if command.summary.endswith(".") else "."), ""]
    if command.aliases:
        lines += ["Also spelled " + ", ".join(code(alias) for alias in command.aliases) + ".", ""]
    rows = []
    renamed = []
    for action in options(command.parser):
        new = deprecated_target(action)
        if new is not None:
            renamed += [(code(option), code(new)) for option in action.option_strings]
            continue
        rows.append((_option_cell(action), _value(action), _default(action), _help(action, command.parser.prog)))
    if rows:
        lines += table(("option", "value", "default", "what it does"), rows)
    if renamed:
        lines += ["Renamed flags (they still work, with a warning naming the new one):", ""]
        lines += table(("deprecated flag", "use instead"), renamed)
    return lines


def render() -> tuple[str, dict[str, int]]:
    lines = header("Commands and flags", "the command lines' argparse parsers")
    lines += [
        "Every command, subcommand and option of the four programs, read from their argument parsers. "
        "`default` is what applies when the option is not given; `required` options must be. "
        "Each program also takes `--help` (and every subcommand does).",
        "",
    ]
    counts = {"programs": 0, "commands": 0, "options": 0, "renamed": 0}
    for program in PROGRAMS:
        missing = undocumented(program)
        if missing:
            raise ValueError(f"options without help text: {', '.join(missing)}")
        found = commands(program)
        counts["programs"] += 1
        counts["commands"] += len(found) - 1
        for command in found:
            for action in options(command.parser):
                counts["renamed" if deprecated_target(action) is not None else "options"] += 1
            lines += command_section(command)
    return "\n".join(lines).rstrip() + "\n", counts
