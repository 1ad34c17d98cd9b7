"""The README's and the docs site's examples run, or parse, so the docs cannot drift from the code.

Which fenced blocks are taken and what happens to each (every block of README.md and of every
page under docs/, docs/reference/ and the other folders included, indented or not, is one of
these; `test_every_block_is_classified` fails on one that is not):

* A block right after `<!-- example: skip (REASON) -->` is skipped for that reason.
* `yaml`: must parse, once elisions are dropped (`…` lines, `, …` and `{...}` in flow
  collections: see `unelided`). A power profile (`schema: kubejoule.calibration/v1`) goes through
  `common.power_profile.parse_power_profile`; a scheduler configuration (only scheduler/config/parse.py's top-level
  keys) through `scheduler.config.parse.config_from_dict`; a Pod through `scheduler.domain.model.PodInfo`; a
  KubeSchedulerConfiguration's extenders
  are checked against kube-scheduler's Extender fields and the routes the extender serves; a
  node-group list through `rl.simulation.traces.scenario.parse_node_groups`; a PodDisruptionBudget list through
  `rl.simulation.traces.scenario.parse_pdbs`. Any other YAML (Kubernetes manifest
  fragments) is listed in OTHER_YAML with what it is.
* Command lines of ours (`kubejoule-agent`, `kubejoule-calibrate`, `kubejoule-scheduler`,
  `kubejoule-rl`, with or without `sudo`, by name or by their path in the venv) in `sh`, `console`
  (`$ ` lines) and plain blocks are parsed by the program's own argument parser; a synopsis line (`[--option ...]`) must name only
  options the parser has. The ones that can run on one machine also RUN (the `test_run_*`
  tests): the agent's `once`/`replay` on fixture trees, the local extender with a local agent,
  `kubejoule-rl` on small inputs, `kubejoule-calibrate show` on the documented profile.
* Lines of other programs (kubectl, docker, make, openssl, host scripts, …) are not run: each
  program is listed in OTHER_PROGRAMS with the reason.
* `json`: must parse, unless it is an excerpt (`…` or `...` in it).
* `csv`: a workload trace, through `rl.simulation.traces.scenario.parse_trace`.
* `python`: runs.
* A plain block without a command line is text (a diagram, a formula, sample output).

This module parses the command lines and checks the classification; the other blocks are
tests/test_docs_examples_blocks.py, the examples that run tests/test_docs_examples_run.py; the
blocks are read by tests/helpers/docs_blocks.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex

import pytest

from tests.helpers.docs_blocks import (
    BLOCKS,
    by_lang,
    commands,
    is_synopsis,
    logical_lines,
    program,
)

OURS = ("kubejoule-agent", "kubejoule-calibrate", "kubejoule-scheduler", "kubejoule-rl")
OTHER_PROGRAMS = {
    "kubectl": "needs a cluster",
    "helm": "tests/deploy/test_chart.py runs each documented helm command (install as a dry run); "
            "tests/e2e/test_e2e_helm.py runs install, upgrade and uninstall on the real control plane",
    "docker": "builds images (needs docker and the network)",
    "git": "fetches the repository (needs the network)",
    "make": "the project's own targets (make test / demo / bench run for minutes; CI runs them)",
    "openssl": "makes key material; tests/scheduler/autoscaler/test_autoscaler_grpc.py runs the documented command",
    "host_scripts/rapl_check.sh": "needs root and RAPL (shellcheck and tests/deploy cover the script)",
    "host_scripts/kvm_power_monitor.sh": "needs root and RAPL (shellcheck and tests/deploy cover the script)",
    "curl": "run as part of the local extender example",
    "sleep": "shell glue",
    "while": "a wall-meter polling loop (needs ipmitool and a BMC)",
    "ipmitool": "needs a BMC",
}
OTHER_PROGRAMS.update(dict.fromkeys(
    ("cp", "grep", "echo", "cat", "cd", "mkdir", "rm", "export", "printf", "jq", "head", "tail", "wc", "ls", "sed"),
    "shell glue",
))
def parser_for(name: str) -> argparse.ArgumentParser:
    if name == "kubejoule-agent":
        from agent.cmd.cli import build_parser as agent_parser

        return agent_parser()
    if name == "kubejoule-calibrate":
        from agent.cmd.calibrate_cli import build_parser as calibrate_parser

        return calibrate_parser()
    if name == "kubejoule-scheduler":
        from scheduler.cmd.cli import build_parser as scheduler_parser

        return scheduler_parser()
    from rl.cmd.cli import _build_parser

    return _build_parser()


def our_commands() -> list[tuple[str, str, list[str], bool]]:
    """(where, program, argv, synopsis) of every command line of ours in a shell, console or
    plain block; plain blocks hold synopses (options and their descriptions)."""
    found = []
    for block in by_lang("sh", "console", "", "bash"):
        for line in logical_lines(block):
            if block.lang == "" and not re.match(r"^\s*(\$ |sudo )?(kubejoule-|host_scripts/)", line):
                continue
            try:
                parsed = [shlex.split(line, comments=True)] if "[--" in line else commands(line)
            except ValueError:
                continue
            for argv in parsed:
                name, args = program(argv)
                if name in OURS:
                    found.append((block.where, name, args, block.lang == "" or is_synopsis(args)))
    return found


def _subparser(parser: argparse.ArgumentParser, args: list[str]) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args and args[0] in action.choices:
            return _subparser(action.choices[args[0]], args[1:])
    return parser


COMMANDS = our_commands()


@pytest.mark.parametrize(
    ("where", "name", "args", "synopsis"), COMMANDS, ids=[f"{c[0]} {c[1]} {' '.join(c[2])[:40]}" for c in COMMANDS]
)
def test_documented_command_lines_parse(where: str, name: str, args: list[str], synopsis: bool) -> None:
    parser = parser_for(name)
    if synopsis:
        # A synopsis: every --option it names exists for its subcommand.
        sub = _subparser(parser, args[:1])
        known = {opt for action in sub._actions for opt in action.option_strings}
        for option in re.findall(r"--\[no-\]([\w-]+)|(--[\w-]+)", " ".join(args)):
            names = [f"--{option[0]}", f"--no-{option[0]}"] if option[0] else [option[1]]
            for opt in names:
                assert opt in known, f"{where}: {name} {args[0]} has no option {opt}"
        return
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            parser.parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{where}: `{name} {' '.join(args)}` is refused (exit {exc.code}): {stderr.getvalue()}")


def test_other_programs_are_listed_with_a_reason() -> None:
    unknown = []
    for block in by_lang("sh", "console", "bash"):
        for line in logical_lines(block):
            for argv in [shlex.split(line, comments=True)] if "[--" in line else commands(line):
                name, _ = program(argv)
                if name and name not in OURS and name not in OTHER_PROGRAMS:
                    unknown.append(f"{block.where}: {name}")
    assert not unknown, f"commands in the docs that are neither ours nor listed in OTHER_PROGRAMS: {unknown}"


def test_every_block_is_classified() -> None:
    """Each block is run/parsed by a test above, or deliberately skipped with a reason."""
    unclassified = []
    for block in BLOCKS:
        if block.skip is not None or block.lang in ("yaml", "python", "sh", "bash", "console", "csv"):
            continue
        if block.lang == "json":
            continue  # parsed, or an excerpt (… in it)
        if block.lang == "":
            continue  # plain: its command lines are parsed, the rest is text
        unclassified.append(f"{block.where} ({block.lang})")
    assert not unclassified, f"blocks no rule covers (mark them or add a rule): {unclassified}"
