"""The dashboards' queries as Grafana sends them, for tests/deploy/test_grafana_live.py: every
panel and variable query of grafana/dashboards/, with the template variables a user would pick."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "grafana" / "dashboards"
RAPL_NODE = "node-rapl"
ESTIMATED_NODE = "node-est"
GPU_NODE = "node-gpu"  # RAPL, GPUs and a BMC: the Node detail dashboard shows this one
NAMESPACES = ("shop", "analytics")  # given to the fixture's pods through the API
RANGE = "1m"  # $__range: the data is seconds old, any range covering it will do
RATE_INTERVAL = "5s"  # $__rate_interval: 5 scrapes at 1 s


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    expr: str
    panel_interval: str | None

    @property
    def id(self) -> str:
        return f"{self.dashboard}:{self.panel}:{self.expr[:40]}"


def panel_queries() -> list[Query]:
    queries = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                queries.append(
                    Query(dashboard["uid"], panel["title"], target["expr"], panel.get("interval"))
                )
    return queries


def variable_queries() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for variable in dashboard["templating"]["list"]:
            if variable["type"] == "query":
                match = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]["query"])
                assert match, variable
                found.append((dashboard["uid"], match.group(1), match.group(2)))
    return found


def substitute(query: Query) -> str:
    """The query as Grafana sends it: variables replaced by the values a user would pick."""
    values = {
        "__range": RANGE,
        "__rate_interval": RATE_INTERVAL,
        "__interval": query.panel_interval or "2s",
        # Node detail has a single-value node variable; the others are multi-value, which
        # Grafana renders as a regex alternation for =~.
        "node": GPU_NODE
        if query.dashboard == "kubejoule-node"
        else f"({RAPL_NODE}|{ESTIMATED_NODE}|{GPU_NODE})",
        "namespace": "(" + "|".join(NAMESPACES) + ")",  # both selected
    }

    def replace(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return re.sub(r"\$\{?(\w+)\}?", replace, query.expr)
