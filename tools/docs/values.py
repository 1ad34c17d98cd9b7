"""The Helm chart's values (daemonset/chart/kubejoule/values.yaml) for docs/reference/config.md:
each value's default from the file, what it does from the comment lines right above it (else
the description values.schema.json gives it)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tools.docs.markdown import code, table

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "daemonset" / "chart" / "kubejoule"
# Values shown whole (their default as one object), not key by key: Kubernetes objects, and the
# scheduler configuration (its keys are the section above).
WHOLE = {"resources", "tolerations", "labels", "nodeSelector", "annotations", "urls", "extraArgs", "config"}
_KEY = re.compile(r"^(\s*)([A-Za-z_][\w.-]*):(\s|$)")


def comments(text: str) -> dict[tuple[str, ...], str]:
    """Each key's comment block (the `#` lines right above it, no blank line between)."""
    found: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        match = _KEY.match(line)
        if not stripped or stripped.startswith("-") or match is None:
            pending = []
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group(2)))
        path = tuple(key for _, key in stack)
        if pending:
            found[path] = " ".join(pending)
        pending = []
    return found


def _schema_description(schema: dict[str, Any], path: tuple[str, ...]) -> str:
    node: dict[str, Any] | None = schema
    for key in path:
        node = (node or {}).get("properties", {}).get(key)
    return str((node or {}).get("description", ""))


def _rows(data: dict[str, Any], path: tuple[str, ...], docs: dict[tuple[str, ...], str],
          schema: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for key, value in data.items():
        here = (*path, key)
        doc = docs.get(here) or _schema_description(schema, here)
        if isinstance(value, dict) and value and key not in WHOLE:
            if doc:
                rows.append((code(".".join(here)), "(section)", doc))
            rows += _rows(value, here, docs, schema)
        else:
            rows.append((code(".".join(here)), code(json.dumps(value, ensure_ascii=False)), doc))
    return rows


def values_section() -> tuple[list[str], int]:
    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    rows = _rows(yaml.safe_load(text), (), comments(text), schema)
    lines = [
        "## The Helm chart's values",
        "",
        "The values of the chart in `daemonset/chart/kubejoule` (its `values.yaml`; `values.schema.json` "
        "refuses a key not listed here), with their defaults. `scheduler.config` is the scheduler "
        "configuration above, without `mode` and the agents' `endpoint_slices`, which the chart sets. "
        "Installing: [Install with Helm or kustomize](../deploy.md).",
        "",
        *table(("value", "default", "what it does"), rows),
    ]
    return lines, sum(1 for _, default, _ in rows if default != "(section)")
