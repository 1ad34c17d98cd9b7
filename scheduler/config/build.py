"""The composition root: the objects a scheduler process runs, built from its parsed configuration
(`scheduler.config.parse`) — the energy plugin, the profile, the Kubernetes API client, the
TelemetryStore with its sources."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.config.parse import Config
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.scheduling_profile import SchedulingProfile
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.discovery import (
    EndpointSliceTargets,
    NodeCoresFromKubernetes,
    StaticTargets,
)
from scheduler.telemetry.samples import TelemetrySource
from scheduler.telemetry.sources import AgentScrapeSource, MetricsServerSource, PrometheusSource
from scheduler.telemetry.store import TelemetryStore

if TYPE_CHECKING:
    from scheduler.cluster.kube import ApiClient
    from scheduler.learning.plugin import LifetimesLookup, WorkloadLookup


def build_energy_plugin(config: Config) -> EnergyPlugin:
    """kubejoule's energy Score plugin with the `scorer:` section's settings, the staleness
    limit and the configured curves: what the extender serves and the standalone scheduler's
    profile scores with."""
    return EnergyPlugin(
        delta_p_ref_watts=config.scorer.delta_p_ref_watts,
        consolidation=config.scorer.consolidation,
        consolidation_utilization=config.scorer.consolidation_utilization,
        max_staleness_seconds=config.max_staleness_seconds,
        curves=config.curves,
    )


def build_profile(
    config: Config,
    energy: ScorePlugin,
    workload: WorkloadLookup | None = None,
    lifetimes: LifetimesLookup | None = None,
) -> SchedulingProfile:
    """The standalone scheduler's profile: the configured entries, else the shipped `kubejoule`
    profile (shipped_kubejoule_profile: the energy plugin with its v3 levers).
    `workload(name)`: the nodes' workloads (the cluster cache's), `lifetimes()`: its lifetime
    predictor, for the `learned` plugin's features."""
    from scheduler.config.registry import PluginContext, profile_from_entries
    from scheduler.plugins.defaults import KUBEJOULE_PROFILE, shipped_kubejoule_profile

    if config.profile is None:
        return shipped_kubejoule_profile(energy)
    return profile_from_entries(
        config.profile,
        PluginContext(energy, config.curves, workload, lifetimes),
        name=KUBEJOULE_PROFILE,
    )


# Where a pod's service-account token is mounted (in-cluster configuration).
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def kubernetes_configured(
    config: Config,
    environ: Mapping[str, str] | None = None,
    token_path: str = SERVICE_ACCOUNT_TOKEN,
) -> bool:
    """Whether an API client could be configured, without building one: `kubernetes.host` or
    `kubernetes.kubeconfig` set, in-cluster credentials present, or a kubeconfig file at
    $KUBECONFIG or ~/.kube/config — the places `build_api_client` looks, in its order."""
    env = os.environ if environ is None else environ
    if config.kubernetes.host or config.kubernetes.kubeconfig:
        return True
    if env.get("KUBERNETES_SERVICE_HOST") and Path(token_path).is_file():
        return True
    paths = env.get("KUBECONFIG") or str(Path(env.get("HOME") or "~").expanduser() / ".kube" / "config")
    return any(Path(p).is_file() for p in paths.split(os.pathsep) if p)


def build_api_client(config: Config) -> ApiClient:
    """A Kubernetes API client (through scheduler/cluster/kube.py, imported only when needed)."""
    from scheduler.cluster import kube

    return kube.make_api_client(host=config.kubernetes.host, kubeconfig=config.kubernetes.kubeconfig)


def source_names(config: Config) -> list[str]:
    """The names of the telemetry sources build_store() makes, in its order."""
    t = config.telemetry
    found = [
        ("agents", bool(t.agents.static)),
        ("agents-k8s", t.agents.endpoint_slices is not None),
        ("prometheus", t.prometheus is not None),
        ("metrics-server", bool(t.metrics_server)),
    ]
    return [name for name, configured in found if configured]


def build_store(config: Config, api: ApiClient | None = None) -> TelemetryStore:
    """The TelemetryStore with the configured sources, in priority order: agents, Prometheus,
    Metrics Server. `api` is needed only for the Kubernetes-backed parts."""
    t = config.telemetry
    if config.needs_kubernetes and api is None:
        api = build_api_client(config)

    def kube_api() -> ApiClient:
        assert api is not None  # config.needs_kubernetes: every source below that calls it
        return api

    sources: list[TelemetrySource] = []
    if t.agents.static:
        sources.append(
            AgentScrapeSource(
                StaticTargets(t.agents.static), t.agents.timeout_seconds, t.agents.max_parallel
            )
        )
    if t.agents.endpoint_slices is not None:
        e = t.agents.endpoint_slices
        targets = EndpointSliceTargets(kube_api(), e.namespace, e.service, e.port)
        sources.append(
            AgentScrapeSource(targets, t.agents.timeout_seconds, t.agents.max_parallel, name="agents-k8s")
        )
    if t.prometheus is not None:
        sources.append(PrometheusSource(t.prometheus.url, t.prometheus.timeout_seconds))
    if t.metrics_server:
        sources.append(MetricsServerSource(kube_api()))
    node_cores: Callable[[], Mapping[str, float]] | None = None
    if t.node_capacity_from_kubernetes:
        from_api = NodeCoresFromKubernetes(kube_api(), refresh_seconds=max(30.0, config.refresh_seconds))
        node_cores = lambda: {**from_api(), **t.node_cores}  # noqa: E731
    elif t.node_cores:
        node_cores = lambda: t.node_cores  # noqa: E731
    return TelemetryStore(
        sources,
        refresh_seconds=config.refresh_seconds,
        max_staleness_seconds=config.max_staleness_seconds,
        node_cores=node_cores,
    )
