"""docs/reference/metrics.md from the metric declarations: every `common.metrics.MetricSpec` at
module level in agent/ and scheduler/ (found by reading the sources, then importing those
modules), grouped by the process that serves it (SECTIONS) and, inside a module, by the comment
line above a group of declarations."""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from common.metrics import MetricSpec
from tools.docs.markdown import anchor, code, header, table

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("common", "agent", "scheduler", "rl")
# Module declaring metrics → (section title, who serves them). A module declaring metrics that is
# not here stops the generator: a new one needs its section.
SECTIONS: dict[str, tuple[str, str]] = {
    "agent.exporter.metrics": (
        "The node agent", "{kubejoule-agent run} on its `--listen` address, path `/metrics`",
    ),
    "scheduler.extender.metrics": (
        "The extender", "{kubejoule-scheduler extender} on its `--listen` address, path `/metrics`",
    ),
    "scheduler.service.metrics": (
        "The standalone scheduler", "{kubejoule-scheduler run} on its `--listen` address, path `/metrics`",
    ),
    "scheduler.lifetimes.metrics": (
        "The lifetime predictor",
        "{kubejoule-scheduler run} and {kubejoule-scheduler rebalancer} beside their own metrics, when "
        "they predict pod lifetimes",
    ),
    "scheduler.autoscaler.server": (
        "The cluster-autoscaler expander",
        "{kubejoule-scheduler autoscaler-expander} on its `--metrics-listen` address, path `/metrics`",
    ),
    "scheduler.autoscaler.provider.metrics": (
        "The bare-metal cloud provider",
        "{kubejoule-scheduler cloud-provider} on its `--metrics-listen` address, path `/metrics`",
    ),
    "scheduler.rebalancer.metrics": (
        "The rebalancer", "{kubejoule-scheduler rebalancer} on its `--listen` address, path `/metrics`",
    ),
}


@dataclass(frozen=True)
class Declared:
    module: str
    variable: str
    group: str  # the comment line above it, "" when none
    spec: MetricSpec


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def spec_calls(tree: ast.Module) -> tuple[list[tuple[str, int]], list[int]]:
    """(variable, line) of each module-level `NAME = MetricSpec(...)`, and the lines of any other
    MetricSpec(...) call (inside a function, a class, an expression): those the page cannot list."""
    top: list[tuple[str, int]] = []
    top_calls: set[int] = set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and _is_spec(node.value)):
            top.append((node.targets[0].id, node.lineno))
            top_calls.add(id(node.value))
    others = [node.lineno for node in ast.walk(tree)
              if isinstance(node, ast.Call) and _is_spec(node) and id(node) not in top_calls]
    return top, others


def _is_spec(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id == "MetricSpec") or (
        isinstance(func, ast.Attribute) and func.attr == "MetricSpec")


def _group(lines: list[str], lineno: int) -> str:
    """The nearest comment line at column 0 above line `lineno` (1-based), skipping declarations."""
    for index in range(lineno - 2, -1, -1):
        line = lines[index]
        if line.startswith("# "):
            return line[2:].strip()
        if line.startswith(('"""', "def ", "class ", "from ", "import ")):
            return ""
    return ""


def declarations(root: Path = REPO) -> list[Declared]:
    found: list[Declared] = []
    problems: list[str] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if "MetricSpec(" not in text or path.relative_to(root) == Path("common/metrics.py"):
                continue
            top, others = spec_calls(ast.parse(text))
            problems += [f"{path.relative_to(root)}:{line}: a MetricSpec not assigned at module level" for line in others]
            if not top:
                continue
            module = importlib.import_module(_module_name(path))
            lines = text.splitlines()
            for variable, lineno in top:
                spec = getattr(module, variable)
                found.append(Declared(module.__name__, variable, _group(lines, lineno), spec))
    if problems:
        raise ValueError("; ".join(problems))
    return found


def _labels(spec: MetricSpec) -> str:
    parts = [code(label) for label in spec.labels]
    parts += [f"{code(label)} (only {when})" for label, when in spec.optional_labels]
    return ", ".join(parts) or "—"


def _served(text: str) -> str:
    """`{kubejoule-scheduler run}` → a link to that command's section of commands.md."""
    return re.sub(r"\{([^}]+)\}", lambda m: f"[`{m.group(1)}`](commands.md#{anchor(m.group(1))})", text)


def render() -> tuple[str, dict[str, int]]:
    found = declarations()
    unknown = sorted({d.module for d in found} - SECTIONS.keys())
    if unknown:
        raise ValueError(f"metrics declared in {unknown}: add each module to tools/docs/metrics.py SECTIONS")
    names = [d.spec.exposed for d in found]
    doubles = sorted({name for name in names if names.count(name) > 1})
    if doubles:
        raise ValueError(f"metrics declared twice: {doubles}")
    lines = header("Metrics", "the metric declarations (`common.metrics.MetricSpec`)")
    lines += [
        "Every Prometheus metric the agent and the scheduler's processes serve, with its type, labels "
        "and help, read from where the code declares it. A counter's series end in `_total` (the "
        "name shown); prometheus_client's own instruments add a `_created` series beside it. A "
        "histogram has `_bucket`, `_sum` and `_count` series. A value that is unknown has no series: "
        "never a 0 in its place.",
        "",
    ]
    for module, (title, served) in SECTIONS.items():
        specs = [d for d in found if d.module == module]
        if not specs:
            raise ValueError(f"{module} declares no metrics any more: remove it from SECTIONS")
        lines += [f"## {title}", "", f"Served by {_served(served)} (declared in `{module}`).", ""]
        groups: dict[str, list[Declared]] = {}
        for declared in specs:
            groups.setdefault(declared.group, []).append(declared)
        for group, members in groups.items():
            if group and len(groups) > 1:
                lines += [f"**{group[0].upper() + group[1:]}**", ""]
            lines += table(
                ("metric", "type", "labels", "help"),
                ((code(d.spec.exposed), d.spec.kind, _labels(d.spec), d.spec.help) for d in members),
            )
    return "\n".join(lines).rstrip() + "\n", {"metrics": len(found), "sections": len(SECTIONS)}
