"""The README's and docs/*.md's examples run, or parse, so the docs cannot drift from the code.

Which fenced blocks are taken and what happens to each (every block of README.md and docs/*.md,
indented or not, is one of these; `test_every_block_is_classified` fails on one that is not):

* A block right after `<!-- example: skip (REASON) -->` is skipped for that reason.
* `yaml`: must parse, once elisions are dropped (`…` lines, `, …` and `{...}` in flow
  collections: see `unelided`). A power profile (`schema: kubejoule.calibration/v1`) goes through
  `agent.power_profile.parse_power_profile`; a scheduler configuration (only scheduler/config/parse.py's top-level
  keys) through `scheduler.config.parse.config_from_dict`; a Pod through `scheduler.domain.model.PodInfo`; a
  KubeSchedulerConfiguration's extenders
  are checked against kube-scheduler's Extender fields and the routes the extender serves; a
  node-group list through `rl.simulation.scenario.parse_node_groups`; a PodDisruptionBudget list through
  `rl.simulation.scenario.parse_pdbs`. Any other YAML (Kubernetes manifest
  fragments) is listed in OTHER_YAML with what it is.
* Command lines of ours (`kubejoule-agent`, `kubejoule-calibrate`, `kubejoule-scheduler`,
  `kubejoule-rl`, with or without `sudo`) in `sh`, `console` (`$ ` lines) and plain blocks are
  parsed by the program's own argument parser; a synopsis line (`[--option ...]`) must name only
  options the parser has. The ones that can run on one machine also RUN (the `test_run_*`
  tests): the agent's `once`/`replay` on fixture trees, the local extender with a local agent,
  `kubejoule-rl` on small inputs, `kubejoule-calibrate show` on the documented profile.
* Lines of other programs (kubectl, docker, make, openssl, host scripts, …) are not run: each
  program is listed in OTHER_PROGRAMS with the reason.
* `json`: must parse, unless it is an excerpt (`…` or `...` in it).
* `csv`: a workload trace, through `rl.simulation.scenario.parse_trace`.
* `python`: runs.
* A plain block without a command line is text (a diagram, a formula, sample output).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.harness.processes import free_port, stop, wait_http

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FIXTURE = REPO / "tests" / "fixtures" / "powercap" / "intel-1s"
SKIP_MARKER = re.compile(r"<!--\s*example:\s*skip\s*\((.+?)\)\s*-->")

OURS = ("kubejoule-agent", "kubejoule-calibrate", "kubejoule-scheduler", "kubejoule-rl")
OTHER_PROGRAMS = {
    "kubectl": "needs a cluster",
    "docker": "builds images (needs docker and the network)",
    "make": "the project's own targets (make test / demo / bench run for minutes; CI runs them)",
    "openssl": "makes key material; tests/scheduler/test_autoscaler_grpc.py runs the documented command",
    "host_scripts/rapl_check.sh": "needs root and RAPL (shellcheck and tests/deploy cover the script)",
    "host_scripts/kvm_power_monitor.sh": "needs root and RAPL (shellcheck and tests/deploy cover the script)",
    "curl": "run as part of the local extender example",
    "sleep": "shell glue",
    "while": "a wall-meter polling loop (needs ipmitool and a BMC)",
    "ipmitool": "needs a BMC",
}
OTHER_PROGRAMS.update(dict.fromkeys(
    ("cp", "grep", "echo", "cat", "cd", "mkdir", "rm", "export", "printf", "jq", "head", "tail", "wc", "ls"),
    "shell glue",
))
# YAML blocks that are Kubernetes (or Prometheus) fragments, by their first line: parsed only.
OTHER_YAML = {
    "spec:": "a Pod spec fragment (schedulerName)",
    "rules:": "an RBAC rules fragment",
    "# my-cluster/kustomization.yaml": "a kustomization (the kustomize tests build the real ones)",
    "scrape_configs:": "a Prometheus scrape configuration",
    "resources: [<path>/daemonset/overlays/intel]": "a kustomization fragment",
    "# cluster-autoscaler's container": "cluster-autoscaler's container arguments",
}
# Documented paths that do not exist here, and what stands in for them in the examples.
PATH_STAND_INS = {
    "/etc/kubejoule/profiles/x5675.yaml": "agent/power_profiles/ibm-x3550-m3-xeon-x5675.yaml",
    "/etc/kubejoule/profiles/big.yaml": "agent/power_profiles/ibm-x3550-m3-xeon-x5675.yaml",
}


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


def _by_lang(*langs: str) -> list[Block]:
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
    return (argv[0], argv[1:]) if argv else ("", [])


def is_synopsis(argv: list[str]) -> bool:
    return any(token.startswith("[") or token in ("COMMAND", "|") for token in argv)


def parser_for(name: str) -> argparse.ArgumentParser:
    if name == "kubejoule-agent":
        from agent.cli import build_parser as agent_parser

        return agent_parser()
    if name == "kubejoule-calibrate":
        from agent.calibrate_cli import build_parser as calibrate_parser

        return calibrate_parser()
    if name == "kubejoule-scheduler":
        from scheduler.cli import build_parser as scheduler_parser

        return scheduler_parser()
    from rl.cli import _build_parser

    return _build_parser()


def our_commands() -> list[tuple[str, str, list[str], bool]]:
    """(where, program, argv, synopsis) of every command line of ours in a shell, console or
    plain block; plain blocks hold synopses (options and their descriptions)."""
    found = []
    for block in _by_lang("sh", "console", "", "bash"):
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
    for block in _by_lang("sh", "console", "bash"):
        for line in logical_lines(block):
            for argv in [shlex.split(line, comments=True)] if "[--" in line else commands(line):
                name, _ = program(argv)
                if name and name not in OURS and name not in OTHER_PROGRAMS:
                    unknown.append(f"{block.where}: {name}")
    assert not unknown, f"commands in the docs that are neither ours nor listed in OTHER_PROGRAMS: {unknown}"


# -- YAML, JSON and Python blocks ----------------------------------------------------------------


def _stand_in_paths(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _stand_in_paths(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_stand_in_paths(v) for v in data]
    if isinstance(data, str) and data in PATH_STAND_INS:
        return str(REPO / PATH_STAND_INS[data])
    return data


def unelided(text: str) -> str:
    """A YAML example without its elisions: `…`/`...` lines and `, …` in flow collections
    dropped, `{...}` read as `{}` (a profile's fields left out of an example)."""
    text = re.sub(r"(?m)^\s*(…|\.\.\.)\s*$\n?", "", text)
    text = re.sub(r",\s*(…|\.\.\.)\s*([}\]])", r"\2", text)
    text = re.sub(r"\{\s*(…|\.\.\.)\s*\}", "{}", text)
    return re.sub(r"'([^']*)…'", r"'\1'", text)


def yaml_kind(block: Block, data: Any) -> str:
    if isinstance(data, dict) and data.get("schema") == "kubejoule.calibration/v1":
        return "power profile"
    if isinstance(data, dict) and data.get("kind") == "KubeSchedulerConfiguration":
        return "kube-scheduler"
    if isinstance(data, list) and data and all(isinstance(g, dict) and "cpu_cores" in g for g in data):
        return "node-groups"
    if isinstance(data, dict) and data.get("kind") == "Pod":
        return "pod"
    if isinstance(data, list) and data and all(isinstance(p, dict) and "workload" in p for p in data):
        return "pdbs"
    if block.first in OTHER_YAML:
        return "other"
    return "scheduler-config"


YAML_BLOCKS = _by_lang("yaml")
# kube-scheduler's Extender fields (k8s.io/kube-scheduler/config/v1, types.go).
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
    "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable",
}


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[b.where for b in YAML_BLOCKS])
def test_yaml_examples_parse_as_what_they_are(block: Block) -> None:
    data = yaml.safe_load(unelided(block.text))
    kind = yaml_kind(block, data)
    if kind == "power profile":
        from agent.power_profile import parse_power_profile

        profile = parse_power_profile(data, block.where)
        assert profile.idle_watts is not None
    elif kind == "kube-scheduler":
        for extender in data["extenders"]:
            assert set(extender) <= EXTENDER_FIELDS, f"{block.where}: unknown fields {set(extender) - EXTENDER_FIELDS}"
            assert extender["filterVerb"] == "filter" and extender["prioritizeVerb"] == "prioritize"
            assert isinstance(extender["weight"], int) and extender["weight"] > 0
            assert isinstance(extender.get("nodeCacheCapable", False), bool)
            assert re.fullmatch(r"\d+(ms|s|m)", str(extender.get("httpTimeout", "1s")))
    elif kind == "pod":
        from scheduler.cluster.kubeobjects import pod_info_from_k8s

        pod = pod_info_from_k8s(data)  # read as the scheduler reads a pod
        assert data["spec"]["schedulerName"] == "kubejoule-scheduler" and pod.requests.cpu_millicores == 500
    elif kind == "node-groups":
        from rl.simulation.scenario import parse_node_groups

        assert parse_node_groups(data)
    elif kind == "pdbs":
        from rl.simulation.scenario import parse_pdbs

        assert len(parse_pdbs(block.text, block.where, [p["workload"] for p in data])) == len(data)
    elif kind == "scheduler-config":
        from scheduler.config.parse import config_from_dict

        config_from_dict(_stand_in_paths(data))  # refuses unknown keys and bad values
    else:
        assert data is not None


def test_the_extender_serves_the_verbs_the_kube_scheduler_examples_name() -> None:
    from scheduler.extender.app import create_app
    from scheduler.extender.core import Extender
    from scheduler.plugins.energy import EnergyPlugin
    from scheduler.telemetry.store import TelemetryStore

    app = create_app(Extender(EnergyPlugin(), TelemetryStore([])), manage_store=False)
    paths = {getattr(route, "path", None) for route in app.routes}
    assert {"/filter", "/prioritize"} <= paths


def test_json_examples_parse_or_are_excerpts() -> None:
    blocks = _by_lang("json")
    assert blocks
    for block in blocks:
        if "…" not in block.text and "..." not in block.text:
            json.loads(block.text)


PYTHON_BLOCKS = _by_lang("python")


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.where for b in PYTHON_BLOCKS])
def test_python_examples_run(block: Block) -> None:
    code = block.text
    # `env.step(action)`: the reader picks the action; here, the first node the pod fits.
    if "env.step(action)" in code:
        code = code.replace("env.step(action)", "env.step(int(obs['action_mask'].argmax()))")
    exec(compile(code, block.where, "exec"), {"__name__": "docs_example"})  # noqa: S102


CSV_BLOCKS = _by_lang("csv")


@pytest.mark.parametrize("block", CSV_BLOCKS, ids=[b.where for b in CSV_BLOCKS])
def test_csv_examples_parse_as_traces(block: Block) -> None:
    from rl.simulation.scenario import parse_trace

    assert parse_trace(block.text, block.where)


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


# -- examples that run ---------------------------------------------------------------------------


def find_block(path: str, contains: str) -> Block:
    matches = [b for b in BLOCKS if b.path == REPO / path and contains in b.text]
    assert matches, f"no block in {path} contains {contains!r} (the example changed: update this test)"
    return matches[0]


def _cli(name: str, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    module = {"kubejoule-agent": "agent.cli", "kubejoule-calibrate": "agent.calibrate_cli",
              "kubejoule-scheduler": "scheduler.cli", "kubejoule-rl": "rl.cli"}[name]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=env)


def _documented(block: Block, name: str, subcommand: str) -> list[str]:
    for line in logical_lines(block):
        for argv in commands(line):
            prog, args = program(argv)
            if prog == name and args and args[0] == subcommand:
                return args
    raise AssertionError(f"{block.where}: no `{name} {subcommand}` line")


FIXTURE_TREES = ["--procfs", str(FIXTURE / "after" / "proc"), "--sysfs", str(FIXTURE / "after" / "sys")]


def test_run_agent_once_example_on_a_fixture_tree(tmp_path: Path) -> None:
    block = find_block("README.md", "kubejoule-agent once --interval 1 --json")
    args = [a for a in _documented(block, "kubejoule-agent", "once")]
    proc = _cli("kubejoule-agent", *args, *FIXTURE_TREES, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["schema"] == "kubejoule.sample/v1"


def test_run_agent_replay_example_on_fixture_snapshots(tmp_path: Path) -> None:
    block = find_block("README.md", "kubejoule-agent replay /tmp/t0")
    args = _documented(block, "kubejoule-agent", "replay")
    # The snapshots the example takes with sudo stand in as the fixture's two trees.
    args = [str(FIXTURE / "before") if a == "/tmp/t0" else str(FIXTURE / "after") if a == "/tmp/t1" else a
            for a in args]
    proc = _cli("kubejoule-agent", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["node_watts"] is not None and record["source"] == "rapl"


def test_run_calibration_show_on_the_documented_profile(tmp_path: Path) -> None:
    profile = find_block("README.md", "schema: kubejoule.calibration/v1")
    (tmp_path / "node-a.yaml").write_text(unelided(profile.text))
    commands_block = find_block("README.md", "kubejoule-calibrate show")
    proc = _cli("kubejoule-calibrate", *_documented(commands_block, "kubejoule-calibrate", "show"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "41.9" in proc.stdout  # the profile's idle watts


def test_run_agent_with_a_documented_calibration_profile(tmp_path: Path) -> None:
    block = find_block("docs/calibration.md", "kubejoule-agent once --json --power-profile")
    args = _documented(block, "kubejoule-agent", "once")
    args = [str(REPO / a) if a.startswith("agent/power_profiles/") else a for a in args]
    proc = _cli("kubejoule-agent", *args, "--interval", "0.2", *FIXTURE_TREES, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == "kubejoule.sample/v1"


def test_run_rl_examples_on_small_inputs(tmp_path: Path) -> None:
    block = find_block("README.md", "kubejoule-rl scenarios")
    assert _cli("kubejoule-rl", *_documented(block, "kubejoule-rl", "scenarios"), cwd=tmp_path).returncode == 0
    trace = _documented(block, "kubejoule-rl", "trace")
    trace = _replace_option(_replace_option(trace, "--hours", "1"), "--arrivals-per-hour", "20")
    proc = _cli("kubejoule-rl", *trace, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # nodes.yaml: the node-group format's example in docs/rl.md.
    nodes = find_block("docs/rl.md", "cpu_cores: 24")
    (tmp_path / "nodes.yaml").write_text(nodes.text)
    bench = next(
        args for line in logical_lines(block) for argv in commands(line)
        for prog, args in [program(argv)] if prog == "kubejoule-rl" and "--nodes" in args
    )
    proc = _cli("kubejoule-rl", *_replace_option(bench, "--seeds", "1"), "--no-progress", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["schema"].startswith("kubejoule.rl-benchmark/")


def _replace_option(args: list[str], option: str, value: str) -> list[str]:
    assert option in args, f"{option} not in {args}"
    i = args.index(option)
    return [*args[: i + 1], value, *args[i + 2 :]]


@contextlib.contextmanager
def _background(args: list[str], cwd: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(args, cwd=cwd, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        yield process
    finally:
        stop(process)


@pytest.mark.parametrize("doc", ["README.md", "docs/scheduler.md"])
def test_run_the_local_extender_example(tmp_path: Path, doc: str) -> None:
    """"Locally, without a cluster": a local agent, the extender with the my.yaml the comment
    describes, the curl command as written."""
    block = find_block(doc, "kubejoule-scheduler extender --listen 127.0.0.1:8888")
    lines = logical_lines(block)
    my_yaml = re.search(r"#\s*my\.yaml:\s*(.+)$", next(line for line in lines if "my.yaml" in line))
    assert my_yaml, "the example says what my.yaml holds"
    host = socket.gethostname()
    config = yaml.safe_load(my_yaml.group(1).replace("HOST", host))
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    agent_port, extender_port = free_port(), free_port()
    agent = _documented(block, "kubejoule-agent", "run")
    agent = [a.replace("127.0.0.1:9102", f"127.0.0.1:{agent_port}") for a in agent]
    extender = _documented(block, "kubejoule-scheduler", "extender")
    extender = [
        a.replace("$(hostname)", host).replace("127.0.0.1:9102", f"127.0.0.1:{agent_port}")
        .replace("127.0.0.1:8888", f"127.0.0.1:{extender_port}")
        for a in extender
    ]
    curl = next(line for line in lines if line.lstrip().startswith("curl"))
    curl = curl.replace("127.0.0.1:8888", f"127.0.0.1:{extender_port}")
    with (
        _background([sys.executable, "-m", "agent.cli", *agent, *FIXTURE_TREES, "--no-kube", "--interval", "0.5"],
                    tmp_path) as agent_process,
        _background([sys.executable, "-m", "scheduler.cli", *extender, "--no-watch-cluster"], tmp_path) as ext,
    ):
        wait_http(f"http://127.0.0.1:{agent_port}/readyz", agent_process)
        wait_http(f"http://127.0.0.1:{extender_port}/readyz", ext)
        answer = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30)
    assert answer.returncode == 0, answer.stderr
    scores = json.loads(answer.stdout)
    assert [entry["Host"] for entry in scores] == [host]
    assert 0 <= scores[0]["Score"] <= 10

