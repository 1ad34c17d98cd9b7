"""`kubejoule-scheduler run`: the parts wired from the configuration, until stopped."""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass, field

from scheduler.config.parse import Config
from scheduler.decisionlog.logfile import DecisionLog, DecisionLogConfig
from scheduler.decisionlog.outcomes import OutcomeTracker
from scheduler.decisions.placement import energy_of
from scheduler.lifetimes import LifetimeCollector, LifetimePredictor, load_state
from scheduler.lifetimes.state import save_quietly, saving_thread
from scheduler.plugins.energy import EnergyPlugin
from scheduler.plugins.energy.levers import CacheOutlook
from scheduler.service.leader import KubeLeaseStore, LeaderElectionConfig, LeaderElector
from scheduler.service.metrics import SchedulerMetrics
from scheduler.standalone.binding import KubeClusterApi
from scheduler.standalone.loop import StandaloneScheduler
from scheduler.standalone.settings import GIL_SWITCH_INTERVAL_SECONDS, StandaloneConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """What `kubejoule-scheduler run` adds to the shared YAML configuration."""

    scheduler: StandaloneConfig = field(default_factory=StandaloneConfig)
    listen: str = "0.0.0.0:10260"  # /metrics, /healthz, /readyz
    decision_log_path: str | None = None  # JSONL decision log; None: no log
    decision_log_max_bytes: int = 64 * 1024 * 1024
    outcome_window_seconds: float = 60.0
    leader_elect: bool = True
    leader: LeaderElectionConfig | None = None  # None: defaults (kube-system/kubejoule-scheduler)
    # The cluster cache's lifetime predictor's state file (scheduler/lifetimes/state.py): read
    # at start, written every `lifetime_state_seconds` and at exit. None: learn from scratch.
    lifetime_state: str | None = None
    lifetime_state_seconds: float = 300.0


def attach_outlook(energy: EnergyPlugin, scheduler: StandaloneScheduler) -> None:
    """Levers that read the cluster's outlook (scheduler/plugins/energy/levers.py) read the
    scheduler's cluster cache and the lifetime predictor the cache teaches from every pod that
    ends on its own (the one the decision features read)."""
    if not energy.levers.needs_outlook:
        return
    predictor = scheduler.cache.lifetimes
    if predictor is None:
        predictor = scheduler.cache.lifetimes = LifetimePredictor()
    energy.outlook = CacheOutlook(scheduler.cache, predictor, time.time)


def run_process(config: Config, options: RunOptions, stop: threading.Event) -> int:
    """Wire the parts from the configuration and schedule until `stop` is set."""
    from scheduler.config.build import (
        build_api_client,
        build_energy_plugin,
        build_profile,
        build_store,
    )
    from scheduler.config.parse import parse_listen
    from scheduler.learning.features_v3 import V3Features
    from scheduler.service.metrics import serve

    api = build_api_client(config)
    energy = build_energy_plugin(config)  # the decision features' energy inputs…
    # …from the plugin the profile scores with; `learned` reads the cluster cache's workloads
    profile = build_profile(
        config,
        energy,
        lambda name: scheduler.cache.workload(name),
        lifetimes=lambda: scheduler.cache.lifetimes,
    )
    # The profile's own energy plugin (its entry may have built one with levers) is the one the
    # features and the outlook go with; a profile without one keeps the configured plugin.
    found = energy_of(profile)
    if found is not None:
        energy = found[1]
    store = build_store(config, api)
    metrics = SchedulerMetrics()
    decision_log = outcomes = None
    if options.decision_log_path:
        decision_log = DecisionLog(
            DecisionLogConfig(
                options.decision_log_path,
                max_bytes=options.decision_log_max_bytes,
                outcome_window_seconds=options.outcome_window_seconds,
            )
        )
        outcomes = OutcomeTracker(decision_log, options.outcome_window_seconds)
    leader_config = options.leader or LeaderElectionConfig()
    elector: LeaderElector | None = None
    scheduler = StandaloneScheduler(
        KubeClusterApi(
            api, options.scheduler.api_timeout_seconds, options.scheduler.watch_timeout_seconds
        ),
        profile,
        options.scheduler,
        telemetry=store,
        decision_log=decision_log,
        outcomes=outcomes,
        metrics=metrics,
        features=V3Features(
            energy,
            lambda name: scheduler.cache.workload(name),
            lambda: scheduler.cache.lifetimes,
        ),
        identity=leader_config.identity,
    )
    attach_outlook(energy, scheduler)
    predictor = scheduler.cache.lifetimes
    if options.lifetime_state and predictor is not None:
        load_state(predictor, options.lifetime_state)
    if predictor is not None:  # its errors and fallbacks (kubejoule_lifetime_*) beside ours
        metrics.registry.register(LifetimeCollector(predictor))
    if options.leader_elect:
        elector = LeaderElector(
            KubeLeaseStore(api, leader_config.namespace, leader_config.name),
            leader_config,
            on_change=scheduler.on_leadership,
        )
        scheduler.is_leader = elector.is_leader
    else:
        scheduler.on_leadership(True)
    host, port = parse_listen(options.listen)
    server = serve(metrics.registry, lambda: scheduler.synced.is_set() and store.ready, host, port)
    log.info(
        "scheduling pods of schedulerName %s in %s mode with profile %s (%s); metrics on %s:%d; "
        "leader election %s",
        options.scheduler.scheduler_name,
        options.scheduler.mode,
        profile.name,
        ", ".join(f"{plugin.name}×{weight}" for plugin, weight in profile.scores),
        host,
        port,
        f"on ({leader_config.namespace}/{leader_config.name} as {leader_config.identity})"
        if elector
        else "off",
    )
    store.start()
    # The scheduling loop shares the interpreter with the watch, binder and event threads; a
    # shorter GIL switch interval (default 5 ms) keeps it from waiting on them between pods.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECONDS)
    saver = None
    if options.lifetime_state and predictor is not None:
        saver = saving_thread(predictor, options.lifetime_state, stop, options.lifetime_state_seconds)
        saver.start()
    elector_thread = None
    if elector is not None:
        elector_thread = threading.Thread(
            target=elector.run, args=(stop,), name="leader-election", daemon=True
        )
        elector_thread.start()
    try:
        scheduler.run(stop)
    finally:
        stop.set()
        if elector_thread is not None:
            elector_thread.join(10.0)  # releases the lease on its way out
        if saver is not None and predictor is not None and options.lifetime_state:
            saver.join(10.0)
            save_quietly(predictor, options.lifetime_state)
        store.stop()
        server.shutdown()
        if decision_log is not None:
            decision_log.close()
        sys.setswitchinterval(switch_interval)
    return 0
