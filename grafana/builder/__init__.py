"""The four kubejoule dashboards, built with Grafana's Foundation SDK (grafana-foundation-sdk):
typed panels, Prometheus queries and variables, one module per dashboard. Edit them there and run

    python -m grafana.builder

which writes grafana/dashboards/*.json and the Helm chart's copy (Helm reads only files inside
the chart). tests/deploy/test_grafana_dashboards.py checks that the checked-in files are what
this writes, byte for byte; tests/deploy/test_grafana_live.py that every query returns data
from a real Prometheus scraping real agents and a real scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.models.dashboard import Dashboard

from .board import render
from .cluster import cluster
from .node import node
from .scheduler import scheduler
from .workloads import workloads

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = ROOT / "grafana" / "dashboards"
CHART_DASHBOARD_DIR = ROOT / "daemonset" / "chart" / "kubejoule" / "dashboards"
DASHBOARDS: tuple[Callable[[], Dashboard], ...] = (cluster, node, workloads, scheduler)
COMMAND = "python -m grafana.builder"


def files() -> dict[str, str]:
    """Each dashboard's file name and text."""
    built = [make() for make in DASHBOARDS]
    return {f"{dashboard.uid}.json": render(dashboard) for dashboard in built}


__all__ = ["CHART_DASHBOARD_DIR", "COMMAND", "DASHBOARDS", "DASHBOARD_DIR", "files"]
