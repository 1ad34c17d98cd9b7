"""The cloud provider's Prometheus metrics.

| metric | type | labels |
|---|---|---|
| `kubejoule_cloudprovider_power_actions_total` | counter | `node_group`, `action`: power_on, graceful_shutdown, force_off; `result`: done, refused, shadow, failed |
| `kubejoule_cloudprovider_machines` | gauge | `node_group`, `state`: off, booting, running, stopping, failed |
| `kubejoule_cloudprovider_bmc_errors_total` | counter | `node_group` (a BMC that did not answer or answered nonsense) |
| `kubejoule_cloudprovider_requests_total` | counter | `method`, `code` (the gRPC calls) |
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from common.metrics import MetricSpec

POWER_ACTIONS = MetricSpec(
    "kubejoule_cloudprovider_power_actions", "counter", "Power actions asked of BMCs, by result.",
    ("node_group", "action", "result"),
)
MACHINES = MetricSpec("kubejoule_cloudprovider_machines", "gauge", "Machines by power state.", ("node_group", "state"))
BMC_ERRORS = MetricSpec("kubejoule_cloudprovider_bmc_errors", "counter", "BMC reads that failed.", ("node_group",))
REQUESTS = MetricSpec(
    "kubejoule_cloudprovider_requests", "counter", "cluster-autoscaler's calls by method and status.",
    ("method", "code"),
)


class ProviderMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.actions = POWER_ACTIONS.counter(self.registry)
        self.machines = MACHINES.gauge(self.registry)
        self.bmc_errors = BMC_ERRORS.counter(self.registry)
        self.requests = REQUESTS.counter(self.registry)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, dict(labels or {}))
