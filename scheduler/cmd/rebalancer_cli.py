"""`kubejoule-scheduler rebalancer`: the energy rebalancer's command and its wiring — the
scheduler's configuration file (its `rebalancer:` section, its telemetry, its curves), the
watch, the lifetime predictor and its state file, leader election on its own Lease, and
/metrics, /healthz, /readyz."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from common.options import Subparsers
from scheduler.config.parse import ConfigError, load_config, parse_listen
from scheduler.framework.decision import MODES

if TYPE_CHECKING:
    from scheduler.config.parse import Config
    from scheduler.config.rebalancer import RebalancerConfig

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "0.0.0.0:10262"
STATE_SAVE_ROUNDS = 10  # the predictor's state file is written every this many intervals


def add_rebalancer_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "rebalancer",
        help="empty inefficient nodes onto efficient ones when it saves energy",
        description="The energy rebalancer (see docs/rebalancer.md): shadow mode recommends, "
        "active mode taints the node and evicts its pods through the Eviction API; "
        "cluster-autoscaler removes the emptied node.",
    )
    parser.add_argument("--config", metavar="FILE",
                        help="the scheduler's YAML configuration; its rebalancer: section")
    parser.add_argument("--mode", choices=MODES, help="override rebalancer.mode")
    parser.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                        help="/metrics, /healthz, /readyz (default: %(default)s)")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                        help="elect a leader among replicas with a Lease (default: on)")
    parser.add_argument("--lease-namespace", default=None,
                        help="namespace of the Lease (default: $POD_NAMESPACE, else the configuration's "
                        "rebalancer.lease_namespace)")
    parser.add_argument("--identity", default=None, help="this replica's name in the Lease")
    parser.add_argument("--lifetime-state", metavar="FILE",
                        help="the lifetime predictor's state file: read at start, written "
                        "every few rounds and at exit (default: none, learn from scratch)")
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"),
        help="log verbosity (default: info)",
    )
    parser.set_defaults(func=run_rebalancer)


def run_rebalancer(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    settings = config.rebalancer
    if args.mode:
        settings = replace(settings, mode=args.mode)
    host, port = parse_listen(args.listen)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return serve(config, settings, args, host, port, stop)


def serve(config: Config, settings: RebalancerConfig, args: argparse.Namespace, host: str, port: int,
          stop: threading.Event) -> int:
    from scheduler.config.build import build_api_client, build_store
    from scheduler.lifetimes import LifetimeCollector, LifetimePredictor, load_state
    from scheduler.lifetimes.state import save_quietly, saving_thread
    from scheduler.rebalancer.api import KubeRebalancerApi
    from scheduler.rebalancer.loop import Rebalancer
    from scheduler.rebalancer.metrics import RebalancerMetrics
    from scheduler.service.leader import (
        KubeLeaseStore,
        LeaderElectionConfig,
        LeaderElector,
        default_identity,
    )
    from scheduler.service.metrics import serve as serve_http

    api = build_api_client(config)
    store = build_store(config, api)
    predictor = LifetimePredictor()
    if args.lifetime_state:
        load_state(predictor, args.lifetime_state)
    metrics = RebalancerMetrics()
    metrics.registry.register(LifetimeCollector(predictor))
    try:
        leader = LeaderElectionConfig(
            namespace=args.lease_namespace or os.environ.get("POD_NAMESPACE") or settings.lease_namespace,
            name=settings.lease_name,
            identity=args.identity or default_identity(),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    rebalancer = Rebalancer(
        KubeRebalancerApi(api), settings, store.telemetry, lambda: store.ready,
        curves=config.curves, predictor=predictor, metrics=metrics,
        max_staleness_seconds=config.max_staleness_seconds, identity=leader.identity,
    )
    elector = None
    if args.leader_elect:
        elector = LeaderElector(KubeLeaseStore(api, leader.namespace, leader.name), leader,
                                on_change=rebalancer.on_leadership)
        rebalancer.is_leader = elector.is_leader
    else:
        rebalancer.on_leadership(True)
    server = serve_http(metrics.registry, lambda: rebalancer.watch.synced and store.ready, host, port)
    log.info("rebalancer in %s mode every %g s; metrics on %s:%d; leader election %s",
             settings.mode, settings.interval_seconds, host, port,
             f"on ({leader.namespace}/{leader.name} as {leader.identity})" if elector else "off")
    store.start()
    threads = []
    if elector is not None:
        threads.append(threading.Thread(target=elector.run, args=(stop,), name="leader-election",
                                        daemon=True))
    if args.lifetime_state:
        threads.append(saving_thread(predictor, args.lifetime_state, stop,
                                     settings.interval_seconds * STATE_SAVE_ROUNDS))
    for thread in threads:
        thread.start()
    try:
        rebalancer.run(stop)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10.0)  # the elector releases the lease on its way out
        if args.lifetime_state:
            save_quietly(predictor, args.lifetime_state)
        store.stop()
        server.shutdown()
    return 0
