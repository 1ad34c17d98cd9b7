"""A kubejoule dashboard from its panels and variables, and its JSON as written to disk."""

from __future__ import annotations

import json
from collections.abc import Sequence

from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dashboard_models

from .panels import DATASOURCE

TAG = "kubejoule"


def node_variable(*, multi: bool = True) -> dashboard_builders.QueryVariable:
    """The nodes the agents report: every one selected by default, or one at a time
    (`multi=False`, Node detail)."""
    return label_variable("node", "Node", "kubejoule_node_power_watts", "node", multi=multi)


def namespace_variable() -> dashboard_builders.QueryVariable:
    return label_variable("namespace", "Namespace", "kubejoule_pod_power_watts", "namespace")


def label_variable(
    name: str, label: str, metric: str, label_name: str, *, multi: bool = True
) -> dashboard_builders.QueryVariable:
    """A variable listing the values of one label of a kubejoule metric."""
    values = f"label_values({metric}, {label_name})"
    variable = (
        dashboard_builders.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(
            {
                "query": values,
                "refId": "PrometheusVariableQueryEditor-VariableQuery",
                "qryType": 1,  # label values
            }
        )
        .refresh(dashboard_models.VariableRefresh.ON_TIME_RANGE_CHANGED)  # nodes, pods come and go
        .sort(dashboard_models.VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
        .include_all(multi)
        .options([])
        .regex("")
        .hide(dashboard_models.VariableHide.DONT_HIDE)
    )
    return variable.all_value(".*") if multi else variable


def datasource_variable() -> dashboard_builders.DatasourceVariable:
    """The Prometheus every panel and variable reads, picked on the dashboard."""
    return (
        dashboard_builders.DatasourceVariable("datasource")
        .label("Prometheus")
        .type("prometheus")
        .regex("")
        .hide(dashboard_models.VariableHide.DONT_HIDE)
    )


def dashboard(
    uid: str,
    title: str,
    description: str,
    variables: Sequence[dashboard_builders.QueryVariable],
    panels: Sequence[Builder[dashboard_models.Panel]],
) -> dashboard_models.Dashboard:
    """The dashboard: a datasource variable first, a link menu to the other kubejoule dashboards,
    the panels numbered in order. The SDK lays the panels out left to right and starts a new row
    once one is full, so each row's widths add up to 24 (the layout test checks that no panel
    leaves the grid or overlaps another)."""
    built = (
        dashboard_builders.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags([TAG])
        .editable()
        .tooltip(dashboard_models.DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .version(1)
        .time("now-6h", "now")
        .timezone("browser")
        .annotations([])
        .link(
            dashboard_builders.DashboardLink(TAG)
            .type(dashboard_models.DashboardLinkType.DASHBOARDS)
            .tags([TAG])
            .as_dropdown(True)
        )
        .with_variable(datasource_variable())
    )
    for variable in variables:
        built = built.with_variable(variable)
    for panel in panels:
        built = built.with_panel(panel)
    model = built.build()
    for panel_id, panel_model in enumerate(model.panels or [], start=1):
        panel_model.id_val = panel_id
    return model


def render(built: dashboard_models.Dashboard) -> str:
    """The JSON file's text."""
    return json.dumps(built, cls=JSONEncoder, indent=2) + "\n"
