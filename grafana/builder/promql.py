"""The PromQL pieces the dashboards share: the selectors built on their variables, and rate() of an
energy counter.

A panel that shows a range of time graphs watts as `rate()` of the `_joules_total` counters (the
average over each step: no energy lost between scrapes, as a gauge's samples would lose it) and
energy as their `increase()` (never an integral of watts); a missing value stays missing (no
`or vector(0)` on power figures).
"""

from __future__ import annotations

J_PER_KWH = 3.6e6
KWH = f"{J_PER_KWH:g}"  # divide joules by this for kWh

SEL = 'node=~"$node"'  # the selected nodes (a multi-value variable)
SEL_NS = 'node=~"$node", namespace=~"$namespace"'
ONE = 'node="$node"'  # Node detail's one node
ONE_PLATFORM = ONE + ', source="platform"'
SEL_NS_CPU = SEL_NS + ', component="cpu"'  # a pod's CPU-side share: one series per pod
SEL_NS_GPU = SEL_NS + ', component="gpu"'


def rate(counter: str, selector: str) -> str:
    """Average watts over each step: rate() of an energy counter (`pod_energy` ->
    kubejoule_pod_energy_joules_total)."""
    return f"rate(kubejoule_{counter}_joules_total{{{selector}}}[$__rate_interval])"
