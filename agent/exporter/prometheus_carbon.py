"""The exporter's carbon families (only with a carbon intensity configured): the grid intensity
the agent uses and the grams of CO2-equivalent beside the energy counters, for the node, its pods
and their namespaces (agent/monitor/carbon_ledger.py). An unknown intensity has no series — never
a 0 in its place — and the counters hold while it is unknown."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from agent.exporter import metrics as m
from agent.monitor.carbon_ledger import CarbonView


def carbon_families(node: str, carbon: CarbonView, pods: bool) -> Iterator[Metric]:
    intensity = m.CARBON_INTENSITY.gauge_family()
    if carbon.intensity is not None:
        intensity.add_metric([node, carbon.source, carbon.zone], carbon.intensity)
    yield intensity
    node_grams = m.NODE_CARBON.counter_family()
    for source, grams in sorted(carbon.node.items()):
        node_grams.add_metric([node, source], grams)
    yield node_grams
    if not pods:
        return
    pod_grams = m.POD_CARBON.counter_family()
    for labels, grams in carbon.pod_series:
        pod_grams.add_metric([node, *labels], grams)
    yield pod_grams
    namespace_grams = m.NAMESPACE_CARBON.counter_family()
    for namespace, grams in sorted(carbon.namespaces.items()):
        namespace_grams.add_metric([node, namespace], grams)
    yield namespace_grams
