"""The cluster's timing defaults have one source, scheduler/domain/cluster_defaults.py: no product
module spells one of them as a number where it names that setting.

The scan is an AST walk of agent/, scheduler/, rl/ and common/ for a number given to a name
that says which setting it is — an assignment or a dataclass field (`boot_seconds = 120.0`), a
parameter's default, a keyword argument (`scale_down_unneeded_s=600`), an argparse option's
`default=` — whose value is that setting's default. Other numbers (a descheduler interval of
120 s, a 600 s cache, an ablation's 0 s cool-down) are left alone: only a default spelt twice
can drift from its source.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from scheduler.domain import cluster_defaults
from tests.helpers.agent_cli import REPO

PACKAGES = ("agent", "scheduler", "rl", "common")
SOURCE = REPO / "scheduler" / "domain" / "cluster_defaults.py"

# A name (an identifier, or an option with its dashes read as underscores) → the default it names.
SETTINGS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(^|_)boot_?s(econds)?$"), "BOOT_SECONDS"),
    (re.compile(r"scan_interval"), "SCAN_INTERVAL_S"),
    (re.compile(r"unneeded|power_off_after"), "SCALE_DOWN_UNNEEDED_S"),
    (re.compile(r"utilization_threshold"), "SCALE_DOWN_UTILIZATION_THRESHOLD"),
    (re.compile(r"delay_after_add"), "SCALE_DOWN_DELAY_AFTER_ADD_S"),
    (re.compile(r"delay_after_failure"), "SCALE_DOWN_DELAY_AFTER_FAILURE_S"),
    (re.compile(r"pod_eviction"), "MAX_POD_EVICTION_S"),
    (re.compile(r"graceful_termination"), "MAX_GRACEFUL_TERMINATION_S"),
    (re.compile(r"node_deletion_delay"), "NODE_DELETION_DELAY_TIMEOUT_S"),
    (re.compile(r"new_pod_wait"), "NEW_POD_WAIT_S"),
    (re.compile(r"unremovable|recheck"), "UNREMOVABLE_NODE_RECHECK_S"),
)


def _number(node: ast.AST | None) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    return None


def _named_numbers(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    """(the name a number is given to, the number's node) for every place the module docstring
    lists; the number may be any expression — `_number` keeps the literal ones."""
    found: list[tuple[str, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            found += [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
            found += [(t.attr, node.value) for t in node.targets if isinstance(t, ast.Attribute)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
            found.append((name, node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            found += list(zip([a.arg for a in positional[len(positional) - len(args.defaults):]],
                              args.defaults, strict=True))
            found += [(a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
        elif isinstance(node, ast.Call):
            found += [(k.arg, k.value) for k in node.keywords if k.arg is not None]
            options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            option = next((o for o in options if o.startswith("--")), None)
            if option is not None:
                found += [(option.lstrip("-").replace("-", "_"), k.value)
                          for k in node.keywords if k.arg == "default"]
    return found


def spelt_defaults(path: Path) -> list[str]:
    """`path:line: name = value (use CONSTANT)`, in line order, for each default of
    cluster_defaults spelt as a number in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
    problems = []
    for name, value in _named_numbers(tree):
        number = _number(value)
        if number is None:
            continue
        for pattern, constant in SETTINGS:
            if pattern.search(name.lower()) and number == getattr(cluster_defaults, constant):
                problems.append((value.lineno, f"{where}:{value.lineno}: {name} = {number:g} "
                                 f"(use scheduler.domain.cluster_defaults.{constant})"))
    return [problem for _, problem in sorted(problems)]


def test_every_setting_the_scan_knows_is_a_default_of_the_module() -> None:
    defined = {n for n in vars(cluster_defaults) if n.isupper()}
    assert {constant for _, constant in SETTINGS} == defined


def test_the_scan_finds_a_default_spelt_as_a_number(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Model:\n"
        "    boot_seconds: float = 120.0\n"
        "    scan_interval_s: float = 10\n"
        "    descheduler_interval_s: float = 120.0\n"  # another setting: not a default
        "def run(scale_down_unneeded_s=600.0, delay_after_add_s=0.0): ...\n"  # 0: an ablation's
        "run(scale_down_unneeded_s=600)\n"
        "parser.add_argument('--scale-down-utilization-threshold', type=float, default=0.5)\n"
        "parser.add_argument('--max-pod-eviction-time', default=120)\n"
        "cache_seconds = 600\n"
    )
    assert spelt_defaults(planted) == [
        "planted.py:4: boot_seconds = 120 (use scheduler.domain.cluster_defaults.BOOT_SECONDS)",
        "planted.py:5: scan_interval_s = 10 (use scheduler.domain.cluster_defaults.SCAN_INTERVAL_S)",
        "planted.py:7: scale_down_unneeded_s = 600 (use scheduler.domain.cluster_defaults.SCALE_DOWN_UNNEEDED_S)",
        "planted.py:8: scale_down_unneeded_s = 600 (use scheduler.domain.cluster_defaults.SCALE_DOWN_UNNEEDED_S)",
        "planted.py:9: scale_down_utilization_threshold = 0.5 "
        "(use scheduler.domain.cluster_defaults.SCALE_DOWN_UTILIZATION_THRESHOLD)",
        "planted.py:10: max_pod_eviction_time = 120 (use scheduler.domain.cluster_defaults.MAX_POD_EVICTION_S)",
    ]


def test_no_product_module_spells_a_cluster_default_as_a_number() -> None:
    sources = [p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py")) if p != SOURCE]
    assert len(sources) > 200  # the walk found the packages
    problems = [problem for path in sources for problem in spelt_defaults(path)]
    assert problems == []
