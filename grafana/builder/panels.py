"""kubejoule's panels as Grafana Foundation SDK builders: every panel and query reads the
dashboard's `datasource` variable, carries a description, and each kind has one look (time
series: a table legend on the right and gaps left as gaps; stat tiles and bar gauges: the latest
value)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Self, TypeVar

from grafana_foundation_sdk.builders import barchart, bargauge, prometheus, stat, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
WIDTH = 12  # half of Grafana's 24 columns
HEIGHT = 8
LAST = ["lastNotNull"]


class PanelBuilder(Protocol):
    """What every panel kind's builder in the SDK offers (they share no base class)."""

    def title(self, title: str) -> Self: ...
    def description(self, description: str) -> Self: ...
    def datasource(self, datasource: DataSourceRef) -> Self: ...
    def with_target(self, target: prometheus.Dataquery) -> Self: ...
    def unit(self, unit: str) -> Self: ...
    def decimals(self, decimals: float) -> Self: ...
    def span(self, w: int) -> Self: ...
    def height(self, h: int) -> Self: ...


P = TypeVar("P", bound=PanelBuilder)


def query(expr: str, legend: str = "__auto", *, instant: bool = False) -> prometheus.Dataquery:
    """A Prometheus query: a range query (one point per step) unless `instant` (the latest value,
    for bar gauges over the dashboard's time range)."""
    built = prometheus.Dataquery().expr(expr).legend_format(legend).datasource(DATASOURCE)
    return built.instant() if instant else built.range()


def _panel(
    panel: P,
    title: str,
    description: str,
    targets: Sequence[prometheus.Dataquery],
    *,
    unit: str,
    decimals: int | None,
    width: int,
    height: int,
) -> P:
    panel = panel.title(title).description(description).datasource(DATASOURCE).unit(unit)
    for index, target in enumerate(targets):
        panel = panel.with_target(target.ref_id(chr(ord("A") + index)))
    if decimals is not None:
        panel = panel.decimals(decimals)
    return panel.span(width).height(height)


def graph(
    title: str,
    description: str,
    *targets: prometheus.Dataquery,
    unit: str = "watt",
    stack: bool = False,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> timeseries.Panel:
    """A time series; `stack` stacks the series (parts of one whole) and fills under them."""
    panel = (
        timeseries.Panel()
        .draw_style(common.GraphDrawStyle.LINE)
        .line_width(1)
        .fill_opacity(20 if stack else 0)
        .stacking(
            common_builders.StackingConfig()
            .mode(common.StackingMode.NORMAL if stack else common.StackingMode.NONE)
            .group("A")
        )
        .span_nulls(False)  # a gap in the data is a gap on the graph, never a line through it
        .show_points(common.VisibilityMode.NEVER)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.RIGHT)
            .show_legend(True)
            .calcs(["mean", "lastNotNull"])
        )
        .tooltip(
            common_builders.VizTooltipOptions()
            .mode(common.TooltipDisplayMode.MULTI)
            .sort(common.SortOrder.DESCENDING)
        )
    )
    return _panel(
        panel, title, description, targets, unit=unit, decimals=None, width=width, height=height
    )


def stat_tile(
    title: str,
    description: str,
    *targets: prometheus.Dataquery,
    unit: str = "watt",
    decimals: int | None = None,
    width: int = 6,
    height: int = 5,
) -> stat.Panel:
    """The latest value, large, over a sparkline; by default a quarter-width tile, the row of
    headline numbers at the top of a dashboard."""
    panel = (
        stat.Panel()
        .reduce_options(common_builders.ReduceDataOptions().calcs(LAST).fields("").values(False))
        .color_mode(common.BigValueColorMode.VALUE)
        .graph_mode(common.BigValueGraphMode.AREA)
        .text_mode(common.BigValueTextMode.AUTO)
    )
    return _panel(
        panel, title, description, targets, unit=unit, decimals=decimals, width=width, height=height
    )


def bar_gauge(
    title: str,
    description: str,
    *targets: prometheus.Dataquery,
    unit: str = "watt",
    decimals: int | None = None,
    width: int = WIDTH,
) -> bargauge.Panel:
    """Horizontal bars, one per series, at its latest value (a ranking)."""
    panel = (
        bargauge.Panel()
        .reduce_options(common_builders.ReduceDataOptions().calcs(LAST).fields("").values(False))
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.GRADIENT)
        .show_unfilled(True)
    )
    return _panel(
        panel, title, description, targets, unit=unit, decimals=decimals, width=width, height=HEIGHT
    )


def bar_chart(
    title: str,
    description: str,
    *targets: prometheus.Dataquery,
    unit: str,
    interval: str,
    decimals: int | None = None,
) -> barchart.Panel:
    """One bar per `interval` (the panel's minimum step, e.g. "1d" for daily bars)."""
    panel = (
        barchart.Panel()
        .x_tick_label_rotation(0)
        .show_value(common.VisibilityMode.AUTO)
        .stacking(common.StackingMode.NONE)
        .legend(common_builders.VizLegendOptions().show_legend(True))
        .tooltip(
            common_builders.VizTooltipOptions()
            .mode(common.TooltipDisplayMode.SINGLE)
            .sort(common.SortOrder.NONE)  # Grafana's own default (the SDK's is "asc")
        )
        .interval(interval)
    )
    return _panel(
        panel, title, description, targets, unit=unit, decimals=decimals, width=WIDTH, height=HEIGHT
    )
