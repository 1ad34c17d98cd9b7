"""`kubejoule-scheduler`: the energy-aware scheduler's command line.

    kubejoule-scheduler extender [--listen HOST:PORT] [--config FILE] [--mode shadow|active]
    kubejoule-scheduler run [--config FILE] [--mode shadow|active] [--decision-log FILE] …
    kubejoule-scheduler autoscaler-expander --listen HOST:PORT --tls-cert FILE --tls-key FILE …
    kubejoule-scheduler cloud-provider --provider-config FILE --tls-cert FILE --tls-key FILE …
    kubejoule-scheduler rebalancer [--config FILE] [--mode shadow|active] [--listen HOST:PORT] …

Each subcommand is one `add_<name>_command(subparsers)` function that declares its arguments
and sets `func` to the function that runs it; `build_parser()` lists them. To add a subcommand,
write its pair of functions and add one line to `SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from common.options import Subparsers, deprecated_alias
from scheduler.cmd.expander_cli import add_autoscaler_expander_command
from scheduler.cmd.provider_cli import add_cloud_provider_command
from scheduler.cmd.rebalancer_cli import add_rebalancer_command
from scheduler.config.build import source_names
from scheduler.config.parse import MODES, Config, ConfigError, load_config, parse_listen
from scheduler.extender.wiring import build_extender
from scheduler.telemetry.discovery import parse_static_targets

log = logging.getLogger("kubejoule.scheduler")


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML configuration (see docs/scheduler.md)")
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"),
        help="log verbosity (default: info)",
    )


def _load(path: str | None, mode: str | None, listen: str | None = None, agents: Sequence[str] = ()) -> Config:
    """The configuration file (defaults without one) with the command line's --mode, --listen and
    --agent over it."""
    config = load_config(path)
    if mode:
        config = replace(config, mode=mode)
    if listen:
        parse_listen(listen)
        config = replace(config, listen=listen)
    if agents:
        try:
            static = {**config.telemetry.agents.static, **parse_static_targets(agents)}
        except ValueError as exc:
            raise ConfigError(f"--agent: {exc}") from exc
        config = replace(
            config,
            telemetry=replace(config.telemetry, agents=replace(config.telemetry.agents, static=static)),
        )
    return config


# -- extender ------------------------------------------------------------------------------------


def add_extender_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "extender",
        help="serve the kube-scheduler extender (POST /filter, /prioritize)",
        description="Serve kube-scheduler's extender v1 API with energy scores.",
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help="address to serve on (default 0.0.0.0:8888)")
    parser.add_argument("--mode", choices=MODES, help="shadow (default): record only; active: score")
    parser.add_argument(
        "--agent", action="append", metavar="NODE=URL",
        help="scrape this node's agent (repeatable; adds to the config's static targets)",
    )
    parser.add_argument(
        "--decision-log", metavar="FILE",
        help="append each recommendation to this decision log (JSONL, kubejoule.decision/v1)",
    )
    deprecated_alias(parser, "--collector", "--decision-log")
    parser.add_argument(
        "--watch-cluster", action=argparse.BooleanOptionalAction, default=None,
        help="watch Nodes and Pods to count pods bound since each node's sample (default: on "
        "when a Kubernetes configuration is found; overrides extender.watch_cluster)",
    )
    parser.add_argument("--tls-cert", metavar="FILE",
                        help="serve HTTPS with this certificate (PEM; kube-scheduler's enableHTTPS), with --tls-key")
    parser.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    _common_options(parser)
    parser.set_defaults(func=run_extender)


def _extender_tls(args: argparse.Namespace) -> dict[str, str]:
    """uvicorn's TLS arguments from --tls-cert/--tls-key (both or neither); ConfigError when
    they are not a usable pair, before anything is served."""
    cert, key = args.tls_cert, args.tls_key
    if cert is None and key is None:
        return {}
    if cert is None or key is None:
        raise ConfigError("--tls-cert and --tls-key go together")
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"--tls-cert {cert} / --tls-key {key}: not a usable pair: {exc}") from exc
    return {"ssl_certfile": cert, "ssl_keyfile": key}


# The cyclic collector's thresholds in the extender process. Every refresh replaces each node's
# samples (and adds to its history): with CPython's defaults (700, 10, 10) a full collection
# walked all of that every second or two, up to 0.5 s each at 5,000 nodes with the GIL held
# against requests (measured: benchmarks/bench_scheduler.py, p99 330 → 71 ms). The young
# generation is collected every 50,000 net allocations; the oldest only after 100 collections of
# the middle one (and CPython's rule that a quarter of it be new). The state is acyclic; what
# cycles there are (asyncio, exceptions) die in the younger generations.
EXTENDER_GC_THRESHOLDS = (50_000, 20, 100)


def run_extender(args: argparse.Namespace) -> int:
    import uvicorn

    from scheduler.extender.app import create_app
    from scheduler.extender.remote import RemoteStates

    config = _load(args.config, args.mode, args.listen, args.agent or ())
    tls = _extender_tls(args)
    if args.watch_cluster is not None:
        config = replace(config, extender=replace(config.extender, watch_cluster=args.watch_cluster))
    host, port = parse_listen(config.listen)
    sources = source_names(config)
    if not sources:
        log.warning("no telemetry source configured: every node is priced at its worst state (0 without a configured curve)")
    extender = build_extender(
        config, args.decision_log, refresh_process=True, log_level=args.log_level.upper()
    )
    log.info(
        "extender on %s:%d, mode %s, telemetry source(s) %s refreshed in process %s",
        host, port, config.mode, ", ".join(sources) or "none",
        extender.states.pid if isinstance(extender.states, RemoteStates) else None,
    )
    app = create_app(extender, inflight_body_bytes=config.extender.inflight_body_bytes)
    # Everything allocated so far lives as long as the process: keep it out of the cyclic
    # collector's generations so a full collection never walks it on the request path.
    gc.freeze()
    gc.set_threshold(*EXTENDER_GC_THRESHOLDS)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=args.log_level,
        access_log=False,
        **tls,  # type: ignore[arg-type]
    )
    return 0


# -- run (the standalone scheduler) --------------------------------------------------------------


def add_run_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="schedule pods that ask for this scheduler (spec.schedulerName)",
        description="A standalone scheduler: watch, filter, score, bind (see docs/standalone.md).",
    )
    parser.add_argument("--mode", choices=MODES,
                        help="shadow (default): bind where kube-scheduler's default profile would "
                        "and tell the profile's pick in an Event; active: bind to the profile's pick")
    parser.add_argument("--scheduler-name", default="kubejoule-scheduler",
                        help="schedule pods with this spec.schedulerName (default: %(default)s)")
    parser.add_argument("--listen", metavar="HOST:PORT", default="0.0.0.0:10260",
                        help="/metrics, /healthz, /readyz (default: %(default)s)")
    parser.add_argument("--decision-log", metavar="FILE",
                        help="append decision and outcome lines (JSONL) to FILE")
    parser.add_argument("--decision-log-max-bytes", type=int, default=64 * 1024 * 1024,
                        help="rotate the decision log past this size (default: 64 MiB)")
    deprecated_alias(parser, "--collector", "--decision-log")
    deprecated_alias(parser, "--collector-max-bytes", "--decision-log-max-bytes")
    parser.add_argument("--outcome-window", type=float, default=60.0, metavar="SECONDS",
                        help="measure a placement's power this long after it (default: 60)")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                        help="elect a leader among replicas with a Lease (default: on)")
    parser.add_argument("--lease-namespace", default=None,
                        help="namespace of the Lease (default: $POD_NAMESPACE or kube-system)")
    parser.add_argument("--lease-name", default="kubejoule-scheduler", help="name of the Lease (default: %(default)s)")
    parser.add_argument("--identity", default=None, help="this replica's name in the Lease")
    parser.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS",
                        help="how long a Lease holds without renewal (default: %(default)s)")
    parser.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS",
                        help="the leader gives up leading when it cannot renew for this long (default: %(default)s)")
    parser.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS",
                        help="time between tries to take or renew the Lease (default: %(default)s)")
    parser.add_argument("--bind-workers", type=int, default=16,
                        help="concurrent binding calls (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=None, help="seed for tie-breaking")
    parser.add_argument("--pod-initial-backoff-seconds", type=float, default=1.0, metavar="SECONDS",
                        help="a pod's first retry backoff, doubled per failed attempt, as kube-scheduler's "
                        "podInitialBackoffSeconds (default: %(default)s)")
    parser.add_argument("--pod-max-backoff-seconds", type=float, default=10.0, metavar="SECONDS",
                        help="the longest retry backoff, as kube-scheduler's podMaxBackoffSeconds "
                        "(default: %(default)s)")
    parser.add_argument("--lifetime-state", metavar="FILE",
                        help="the lifetime predictor's state file (what it learned from the pods "
                        "that ended): read at start, written every 5 min and at exit (default: "
                        "none, learn from scratch)")
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=None, metavar="PCT",
                        help="score only the feasible nodes kube-scheduler's percentageOfNodesToScore "
                        "rule finds (0: its adaptive default); default: the config's "
                        "percentage_of_nodes_to_score, else every feasible node")
    _common_options(parser)
    parser.set_defaults(func=run_standalone)


def run_standalone(args: argparse.Namespace) -> int:
    import os
    import signal

    from scheduler.service.leader import LeaderElectionConfig, default_identity
    from scheduler.standalone.process import RunOptions, run_process
    from scheduler.standalone.settings import StandaloneConfig

    config = _load(args.config, args.mode)  # --listen here is the metrics address
    parse_listen(args.listen)
    try:
        leader = LeaderElectionConfig(
            namespace=args.lease_namespace or os.environ.get("POD_NAMESPACE") or "kube-system",
            name=args.lease_name,
            identity=args.identity or default_identity(),
            lease_duration_seconds=args.lease_duration,
            renew_deadline_seconds=args.renew_deadline,
            retry_period_seconds=args.retry_period,
        )
        options = RunOptions(
            scheduler=StandaloneConfig(
                scheduler_name=args.scheduler_name,
                mode=config.mode,
                bind_workers=args.bind_workers,
                seed=args.seed,
                initial_backoff_seconds=args.pod_initial_backoff_seconds,
                max_backoff_seconds=args.pod_max_backoff_seconds,
                percentage_of_nodes_to_score=(
                    config.percentage_of_nodes_to_score
                    if args.percentage_of_nodes_to_score is None
                    else args.percentage_of_nodes_to_score
                ),
            ),
            listen=args.listen,
            decision_log_path=args.decision_log,
            decision_log_max_bytes=args.decision_log_max_bytes,
            outcome_window_seconds=args.outcome_window,
            leader_elect=args.leader_elect,
            leader=leader,
            lifetime_state=args.lifetime_state,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return run_process(config, options, stop)


# -- the parser ----------------------------------------------------------------------------------

SUBCOMMANDS: list[Callable[[Subparsers], None]] = [
    add_extender_command,
    add_run_command,
    add_autoscaler_expander_command,
    add_cloud_provider_command,
    add_rebalancer_command,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubejoule-scheduler", description="Energy-aware scheduling for Kubernetes."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),  # every subcommand has --log-level
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"kubejoule-scheduler: configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
