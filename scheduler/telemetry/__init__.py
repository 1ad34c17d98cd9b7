"""TelemetryStore: what the scheduler knows of each node's power and load, and how old it is.

Refreshed in the background, never on the scoring path: `TelemetryStore.start()` runs a thread
that asks every source in turn and swaps in a new immutable view; scoring reads that view with a
dict lookup. A source that fails leaves the nodes it alone served to age into staleness; scoring
then prices them at their worst state (scheduler/plugins/energy/plugin.py, "Missing data never wins").

Sources, in the order they are given (the first fresh one wins per node):

* `AgentScrapeSource` — the agents' own `/metrics`, scraped directly (the default; no Prometheus
  needed). Targets come from a static `node=url` list (`StaticTargets`) or from the agent
  Service's EndpointSlices (`EndpointSliceTargets`).
* `PrometheusSource` — a Prometheus HTTP API that scrapes the agents (large clusters).
* `MetricsServerSource` — `metrics.k8s.io` node usage: utilization only, no watts; useful with
  configured curves on nodes without an agent.

Times are wall-clock seconds. A node's age is `now − kubejoule_sample_timestamp_seconds`, the
agent's own time of the sample, so a stuck agent or a Prometheus serving old points ages out. A
sample time in the future (the agent's clock runs ahead) is taken as the time the store first
fetched that sample, so such a sample ages by the scheduler's clock instead of staying "fresh"
for as long as the skew.

Modules: `samples` (what a source returns), `exposition` (the agents' Prometheus series),
`discovery` (scrape targets, node cores), `sources` (agents, Prometheus, metrics-server),
`store` (merging and the refresh thread).

May import domain/ and cluster/ (the API door, for discovery)."""

from scheduler.telemetry.discovery import (
    EndpointSliceTargets,
    NodeCoresFromKubernetes,
    StaticTargets,
    parse_static_targets,
)
from scheduler.telemetry.samples import FetchResult, NodeSample, TelemetrySource
from scheduler.telemetry.sources import AgentScrapeSource, MetricsServerSource, PrometheusSource
from scheduler.telemetry.store import TelemetryStore

__all__ = [
    "AgentScrapeSource",
    "EndpointSliceTargets",
    "FetchResult",
    "MetricsServerSource",
    "NodeCoresFromKubernetes",
    "NodeSample",
    "PrometheusSource",
    "StaticTargets",
    "TelemetrySource",
    "TelemetryStore",
    "parse_static_targets",
]
