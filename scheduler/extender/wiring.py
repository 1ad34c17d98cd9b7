"""The extender's parts built from the configuration, as `kubejoule-scheduler extender` runs
them: the HTTP server's process (the Extender, its recorder) and the refresh (telemetry store,
energy plugin, cluster watch, prepared snapshots) — in a refresher process of its own
(`refresher.py`, what the command runs) or in the same process (`refresh_process=False`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.config.build import (
    build_api_client,
    build_energy_plugin,
    build_store,
    kubernetes_configured,
)
from scheduler.config.parse import Config
from scheduler.extender.calls import MemoryRecorder
from scheduler.extender.core import Extender
from scheduler.extender.remote import RemoteStates
from scheduler.extender.state import NodeStates
from scheduler.plugins.defaults import served_profile
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.store import TelemetryStore

if TYPE_CHECKING:
    from scheduler.cluster.kube import ApiClient
    from scheduler.cluster.watch import ClusterWatch
    from scheduler.extender.recorder import ExtenderRecorder

Hooks = list[Callable[[], None]]


def _cluster_watch(config: Config) -> tuple[ClusterWatch | None, ApiClient | None]:
    """The cluster watch when configured (`extender.watch_cluster`, else a Kubernetes
    configuration found), and the API client (also when a source needs it)."""
    watch_on = config.extender.watch_cluster
    if watch_on is None:
        watch_on = kubernetes_configured(config)
    if not watch_on:
        return None, build_api_client(config) if config.needs_kubernetes else None
    api = build_api_client(config)
    from scheduler.cluster.cache import ClusterCache
    from scheduler.cluster.watch import ClusterWatch, KubeWatchApi
    from scheduler.lifetimes import LifetimePredictor

    # No scheduler name: the extender only counts what kube-scheduler binds; its predictor
    # learns from the pods that end (the decision log's v3 lifetimes).
    cache = ClusterCache(None, lifetimes=LifetimePredictor())
    return ClusterWatch(KubeWatchApi(api), cache), api


def _watch_hooks(watch: ClusterWatch, on_start: Hooks, on_stop: Hooks) -> None:
    stop = threading.Event()

    def start() -> None:
        watch.start(stop)

    on_start.append(start)
    on_stop.append(stop.set)
    on_stop.append(watch.close)


def build_refresh_parts(config: Config) -> tuple[EnergyPlugin, TelemetryStore, NodeStates, Hooks, Hooks]:
    """What the refresher process runs: the energy plugin, the store, the prepared node states
    (fed by both), and the cluster watch's start and stop hooks."""
    energy = build_energy_plugin(config)
    watch, api = _cluster_watch(config)
    store = build_store(config, api)
    states = NodeStates(energy, store, watch)
    on_start: Hooks = []
    on_stop: Hooks = []
    if watch is not None:
        _watch_hooks(watch, on_start, on_stop)
    return energy, store, states, on_start, on_stop


def build_extender(
    config: Config,
    decision_log_path: str | None = None,
    refresh_process: bool = False,
    log_level: str = "WARNING",
) -> Extender:
    """The extender as the configuration describes it (not started: `create_app` or
    `Extender.start()` start its refresh — the refresher process with `refresh_process` — and
    cluster watch)."""
    energy = build_energy_plugin(config)
    on_start: Hooks = []
    on_stop: Hooks = []
    remote: RemoteStates | None = None
    store: TelemetryStore | RemoteStates
    watch: ClusterWatch | None = None
    if refresh_process:
        store = remote = RemoteStates(energy, config, log_level=log_level)
    else:
        watch, api = _cluster_watch(config)
        store = build_store(config, api)
        if watch is not None:
            _watch_hooks(watch, on_start, on_stop)
    memory = MemoryRecorder(config.extender.shadow_log_size)
    logged: ExtenderRecorder | None = None
    decision_log = None
    if decision_log_path:
        from scheduler.decisionlog.logfile import DecisionLog, DecisionLogConfig
        from scheduler.extender.recorder import ExtenderRecorder
        from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3, batch_features_v3

        # Feature schema v3, as the standalone scheduler and the simulator log it: with the
        # cluster watch's workloads and lifetime predictor where the watch runs in this
        # process; without (the refresher process's mode, or no watch) the workload and
        # lifetime features are unknown (null), never guessed.
        cache = watch.cache if watch is not None else None
        workload = cache.workload if cache is not None else None
        lifetimes = cache.lifetimes if cache is not None else None
        decision_log = DecisionLog(DecisionLogConfig(path=decision_log_path))
        logged = ExtenderRecorder(
            decision_log,
            energy,
            also=memory,
            features=lambda pod, batch: batch_features_v3(
                pod, batch, energy, workload, lifetimes
            ),
            feature_schema=FEATURE_SCHEMA_V3.version,
            scorer=config.scorer.name,
        )
    extender = Extender(
        served_profile(energy),
        store,
        mode=config.mode,
        power_caps_watts=config.power_caps_watts,
        default_power_cap_watts=config.default_power_cap_watts,
        recorder=logged if logged is not None else memory,
        max_body_bytes=config.extender.max_body_bytes,
        cluster=watch,
        states=remote,
    )
    extender.on_start.extend(on_start)
    extender.on_stop.extend(on_stop)
    if decision_log is not None and logged is not None:
        # Batches reach the disk at least once per telemetry refresh, and all of them on exit:
        # the recorder first writes what its queue still holds, then the decision log closes.
        store.add_listener(lambda _view: decision_log.flush_if_due())
        extender.on_stop.append(logged.close)
        extender.on_stop.append(decision_log.close)
    return extender
