"""`kubejoule-scheduler autoscaler-expander`: serve cluster-autoscaler's gRPC expander.

    kubejoule-scheduler autoscaler-expander --listen HOST:PORT --tls-cert FILE --tls-key FILE
        [--config FILE] [--metrics-listen HOST:PORT] [--max-request-bytes N] [--running-curves]

The node groups' power curves come from the config's `node_groups:` and `node_group_labels:`
(docs/autoscaler-expander.md), and with `--running-curves` from the curves the agents of running
nodes export (the config's `telemetry:` sources, node labels from the Kubernetes API);
`scorer.consolidation_utilization` is the reference load of the amortized price. A certificate or key that cannot be read or does not match is a usage error
(exit 2), as is a bad address.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import TYPE_CHECKING

from common.options import Subparsers
from scheduler.autoscaler import DEFAULT_MAX_REQUEST_BYTES
from scheduler.autoscaler.tls import read_tls
from scheduler.config.parse import Config, ConfigError, load_config, parse_listen

if TYPE_CHECKING:
    from scheduler.autoscaler.running import RunningCurves
    from scheduler.autoscaler.server import Expander
    from scheduler.telemetry.store import TelemetryStore

log = logging.getLogger("kubejoule.expander")

DEFAULT_LISTEN = "0.0.0.0:8443"
DEFAULT_METRICS_LISTEN = "0.0.0.0:8890"


def add_autoscaler_expander_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "autoscaler-expander",
        help="serve cluster-autoscaler's gRPC expander (least-energy node group)",
        description="Serve cluster-autoscaler's grpcplugin.Expander/BestOptions over TLS: the "
        "node group whose power curve serves the pending pods with the least energy.",
    )
    parser.add_argument(
        "--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
        help=f"gRPC address (default {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--tls-cert", metavar="FILE", required=True,
        help="server certificate (PEM); give cluster-autoscaler the same file (or its CA) as "
        "--grpc-expander-cert; it needs a SAN for the host in --grpc-expander-url",
    )
    parser.add_argument("--tls-key", metavar="FILE", required=True, help="its private key (PEM)")
    parser.add_argument(
        "--metrics-listen", metavar="HOST:PORT", default=DEFAULT_METRICS_LISTEN,
        help=f"plain HTTP /metrics, /healthz, /readyz (default {DEFAULT_METRICS_LISTEN}; 'off' for none)",
    )
    parser.add_argument(
        "--max-request-bytes", metavar="N", type=int, default=DEFAULT_MAX_REQUEST_BYTES,
        help=f"largest request accepted (default {DEFAULT_MAX_REQUEST_BYTES}; grpcio's own is 4 MiB)",
    )
    parser.add_argument(
        "--running-curves", action="store_true",
        help="also price a group by the curves the agents of running nodes with the same "
        "node_group_labels value export (needs the config's telemetry sources and read access "
        "to Nodes)",
    )
    parser.add_argument("--config", metavar="FILE", help="YAML configuration (see docs/scheduler.md)")
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"),
        help="log verbosity (default: info)",
    )
    parser.set_defaults(func=run_autoscaler_expander)


def build_expander(config: Config) -> Expander:
    from scheduler.autoscaler.server import Expander

    return Expander(
        node_groups=config.node_groups,
        label_keys=config.node_group_labels,
        reference_utilization=config.scorer.consolidation_utilization,
    )


def start_running_curves(config: Config, expander: Expander) -> tuple[TelemetryStore, RunningCurves]:
    """The telemetry store (started) whose refreshes publish the running nodes' curves to the
    expander, and the RunningCurves; ConfigError when the config has no telemetry source."""
    from scheduler.autoscaler.running import NodeLabelsFromKubernetes, RunningCurves
    from scheduler.config.build import build_api_client, build_store

    try:
        api = build_api_client(config)
    except Exception as exc:  # no in-cluster credentials and no kubeconfig
        raise ConfigError(f"--running-curves: cannot reach the Kubernetes API: {exc}") from exc
    store = build_store(config, api)
    if not store.sources:
        raise ConfigError("--running-curves: the config has no telemetry source (telemetry:)")
    running = RunningCurves(
        NodeLabelsFromKubernetes(api, refresh_seconds=max(30.0, config.refresh_seconds)),
        config.node_group_labels,
    )
    store.add_listener(running.update)
    expander.running_curves = running.current
    store.start()
    return store, running


def run_autoscaler_expander(args: argparse.Namespace) -> int:
    from scheduler.autoscaler.server import start_server
    from scheduler.service import metrics as scheduler_metrics

    config = load_config(args.config)
    host, port = parse_listen(args.listen)
    if args.max_request_bytes < 1024 * 1024:
        raise ConfigError(f"--max-request-bytes: at least 1 MiB, got {args.max_request_bytes}")
    cert, key = read_tls(args.tls_cert, args.tls_key)
    expander = build_expander(config)
    store, running = start_running_curves(config, expander) if args.running_curves else (None, None)
    try:
        server, bound = start_server(expander, host, port, cert, key, args.max_request_bytes)
    except (OSError, RuntimeError) as exc:
        raise ConfigError(f"--listen {args.listen}: {exc}") from exc
    http = None
    if args.metrics_listen != "off":
        metrics_host, metrics_port = parse_listen(args.metrics_listen)
        # Ready once the running nodes' curves have been published (when they are used).
        ready = (lambda: running.updates > 0) if running is not None else (lambda: True)
        http = scheduler_metrics.serve(expander.metrics.registry, ready, metrics_host, metrics_port)
    log.info(
        "autoscaler expander on %s:%d (TLS), %d node-group curve(s) configured, labels %s%s",
        host, bound, len(config.node_groups), ", ".join(config.node_group_labels),
        f", running nodes' curves from {len(store.sources)} telemetry source(s)" if store else "",
    )
    if not config.node_groups and store is None:
        log.warning("no node_groups configured: no group has a curve, every option will be answered")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # Bounded: a signal the kernel hands to one of gRPC's threads runs its Python handler only
    # when this thread next runs Python code (an unbounded wait never would: CI saw it hang).
    while not stop.wait(1.0):
        pass
    log.info("stopping: finishing calls in flight (up to 5 s)")
    server.stop(grace=5).wait()
    if http is not None:
        http.shutdown()
    if store is not None:
        store.stop()
    return 0
