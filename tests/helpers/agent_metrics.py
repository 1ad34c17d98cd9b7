"""The agent's metric contract as docs/DESIGN.md writes it, for tests that check an exposition
against it: `documented_metrics()` -> {sample name: label names besides `node`}."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "DESIGN.md"
_TICKED = re.compile(r"`([^`]+)`")
_PARENTHESES = re.compile(r"\(([^)]*)\)")


def documented_metrics(design: Path = DESIGN) -> dict[str, frozenset[str]]:
    """The rows of the "Prometheus metrics" table. A row names one or more metrics and their
    labels; parentheses add notes (`source` (`estimated`): label values) or restrict a label to
    one of the row's metrics (`kind` (errors): only the errors counter has it)."""
    text = design.read_text()
    section = text.split("## Prometheus metrics", 1)[1].split("\n## ", 1)[0]
    metrics: dict[str, frozenset[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`kubejoule_"):
            continue
        names = _TICKED.findall(_PARENTHESES.sub("", cells[0]))
        restricted_to = [
            note for note in _PARENTHESES.findall(cells[1]) if "`" not in note and note.strip()
        ]
        labels = frozenset(_TICKED.findall(_PARENTHESES.sub("", cells[1])))
        for name in names:
            applies = not restricted_to or any(word in name for word in restricted_to)
            metrics[name] = labels if applies else frozenset()
    return metrics


def exposed_labels(text: str) -> dict[str, set[str]]:
    """Sample name -> the union of label names of its samples, for every `kubejoule_` sample."""
    seen: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("kubejoule_"):
                seen.setdefault(sample.name, set()).update(sample.labels)
    return seen
