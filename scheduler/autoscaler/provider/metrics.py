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

from prometheus_client import CollectorRegistry, Counter, Gauge


class ProviderMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.actions = Counter(
            "kubejoule_cloudprovider_power_actions", "Power actions asked of BMCs, by result.",
            ["node_group", "action", "result"], registry=self.registry,
        )
        self.machines = Gauge(
            "kubejoule_cloudprovider_machines", "Machines by power state.",
            ["node_group", "state"], registry=self.registry,
        )
        self.bmc_errors = Counter(
            "kubejoule_cloudprovider_bmc_errors", "BMC reads that failed.",
            ["node_group"], registry=self.registry,
        )
        self.requests = Counter(
            "kubejoule_cloudprovider_requests", "cluster-autoscaler's calls by method and status.",
            ["method", "code"], registry=self.registry,
        )

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, dict(labels or {}))
