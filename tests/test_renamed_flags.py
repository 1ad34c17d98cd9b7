"""Renamed command-line flags (docs/DESIGN.md, "Glossary"): the new name works silently, the old
one still works — same destination, same value — and warns on stderr naming the new one."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cmd.cli import build_parser as agent_parser
from rl.cmd.cli import _build_parser as rl_parser
from scheduler.cmd.cli import build_parser as scheduler_parser

# (parser, argv before the flag, old flag, new flag, value, destination, parsed value)
RENAMED = [
    (agent_parser, ["once"], "--calibration", "--power-profile", "p.yaml", "power_profile", Path("p.yaml")),
    (agent_parser, ["run"], "--calibration", "--power-profile", "p.yaml", "power_profile", Path("p.yaml")),
    (scheduler_parser, ["extender"], "--collector", "--decision-log", "d.jsonl", "decision_log", "d.jsonl"),
    (scheduler_parser, ["run"], "--collector", "--decision-log", "d.jsonl", "decision_log", "d.jsonl"),
    (scheduler_parser, ["run"], "--collector-max-bytes", "--decision-log-max-bytes", "1024",
     "decision_log_max_bytes", 1024),
    (rl_parser, ["benchmark", "--out", "r.json"], "--collector", "--decision-log", "d.jsonl", "decision_log",
     "d.jsonl"),
]
IDS = [f"{argv[0]} {old}" for _, argv, old, *_ in RENAMED]


@pytest.mark.parametrize(("parser", "argv", "old", "new", "value", "dest", "parsed"), RENAMED, ids=IDS)
def test_new_flag_is_silent(parser, argv, old, new, value, dest, parsed, capsys):
    args = parser().parse_args([*argv, new, value])
    assert getattr(args, dest) == parsed
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("parser", "argv", "old", "new", "value", "dest", "parsed"), RENAMED, ids=IDS)
def test_old_flag_still_works_and_names_the_new_one(parser, argv, old, new, value, dest, parsed, capsys):
    args = parser().parse_args([*argv, old, value])
    assert getattr(args, dest) == parsed
    err = capsys.readouterr().err
    assert f"{old} is deprecated, use {new}" in err


@pytest.mark.parametrize(("parser", "argv", "old", "new", "value", "dest", "parsed"), RENAMED, ids=IDS)
def test_old_flag_is_not_in_the_help(parser, argv, old, new, value, dest, parsed, capsys):
    with pytest.raises(SystemExit):
        parser().parse_args([argv[0], "--help"])
    out = capsys.readouterr().out
    assert new in out and f"{old} " not in out.replace(new, "")
