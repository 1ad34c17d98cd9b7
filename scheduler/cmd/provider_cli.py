"""`kubejoule-scheduler cloud-provider`: serve cluster-autoscaler's externalgrpc CloudProvider
for bare-metal machines switched on and off through their BMC (docs/bare-metal.md).

    kubejoule-scheduler cloud-provider --provider-config FILE --tls-cert FILE --tls-key FILE
        [--client-ca FILE] [--listen HOST:PORT] [--metrics-listen HOST:PORT]
        [--refresh-seconds S] [--kubeconfig FILE]

At start every machine's BMC is asked for its power state: a BMC that answers with something
other than a Redfish ComputerSystem, or refuses the credentials, is a configuration error naming
the machine's key (exit 2); one that does not answer is reported and left alone. The states are
read again every `--refresh-seconds` and on cluster-autoscaler's Refresh."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import TYPE_CHECKING

from common.options import Subparsers
from scheduler.autoscaler.provider.backend import BackendError, PowerBackend
from scheduler.autoscaler.provider.settings import ProviderSettings, load_settings
from scheduler.autoscaler.tls import read_tls
from scheduler.config.basics import ConfigError, parse_listen

if TYPE_CHECKING:
    from scheduler.autoscaler.provider.kubeside import KubeSide

log = logging.getLogger("kubejoule.cloudprovider")

DEFAULT_LISTEN = "0.0.0.0:8086"
DEFAULT_METRICS_LISTEN = "0.0.0.0:8891"


def add_cloud_provider_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "cloud-provider",
        help="serve cluster-autoscaler's externalgrpc cloud provider (bare metal through BMCs)",
        description="Serve cluster-autoscaler's externalgrpc CloudProvider over TLS: node groups "
        "of bare-metal machines switched on and off through their BMC (Redfish).",
    )
    parser.add_argument("--provider-config", metavar="FILE", required=True,
                        help="node groups, machines, allow-list, shadow mode (docs/bare-metal.md)")
    parser.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                        help=f"gRPC address (default {DEFAULT_LISTEN})")
    parser.add_argument("--tls-cert", metavar="FILE", required=True, help="server certificate (PEM)")
    parser.add_argument("--tls-key", metavar="FILE", required=True, help="its private key (PEM)")
    parser.add_argument("--client-ca", metavar="FILE",
                        help="require a client certificate signed by this CA (cluster-autoscaler's cert/key)")
    parser.add_argument("--metrics-listen", metavar="HOST:PORT", default=DEFAULT_METRICS_LISTEN,
                        help=f"plain HTTP /metrics, /healthz, /readyz (default {DEFAULT_METRICS_LISTEN}; 'off')")
    parser.add_argument("--refresh-seconds", type=float, default=10.0,
                        help="how often the machines' power states are read (default 10)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="outside a cluster: the kubeconfig to use")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                        help="the least severe log lines written (default info)")
    parser.set_defaults(func=run_cloud_provider)


def build_backend(settings: ProviderSettings, kube: KubeSide) -> PowerBackend:
    if settings.backend == "simulated":
        from scheduler.autoscaler.provider.simulated import on_the_api

        return on_the_api(kube, settings.simulated_boot_seconds)
    from scheduler.autoscaler.provider.redfish import RedfishBackend

    return RedfishBackend(settings.bmc_timeout_seconds)


def probe(settings: ProviderSettings, backend: PowerBackend) -> list[str]:
    """Ask each BMC once: ConfigError naming the machine's key when one answers but is not a
    Redfish ComputerSystem or refuses the credentials; the machines that did not answer."""
    silent = []
    for i, group in enumerate(settings.groups):
        for j, machine in enumerate(group.machines):
            try:
                backend.power_state(machine)
            except BackendError as exc:
                if exc.refused:
                    raise ConfigError(f"groups[{i}].machines[{j}].bmc ({machine.node}): {exc}") from exc
                silent.append(f"{machine.node}: {exc}")
    return silent


def run_cloud_provider(args: argparse.Namespace) -> int:
    from scheduler.autoscaler.provider.kubeside import KubeSide
    from scheduler.autoscaler.provider.machines import Fleet
    from scheduler.autoscaler.provider.service import CloudProviderService, start_server
    from scheduler.cluster import kube
    from scheduler.service import metrics as scheduler_metrics

    settings = load_settings(args.provider_config)
    host, port = parse_listen(args.listen)
    cert, key = read_tls(args.tls_cert, args.tls_key)
    client_ca = None
    if args.client_ca:
        try:
            with open(args.client_ca, "rb") as f:
                client_ca = f.read()
        except OSError as exc:
            raise ConfigError(f"--client-ca {args.client_ca}: {exc.strerror}") from exc
    if args.refresh_seconds <= 0:
        raise ConfigError(f"--refresh-seconds: positive, got {args.refresh_seconds}")
    try:
        side = KubeSide(kube.make_api_client(kubeconfig=args.kubeconfig))
    except Exception as exc:
        raise ConfigError(f"cannot reach the Kubernetes API: {exc}") from exc
    backend = build_backend(settings, side)
    for silent in probe(settings, backend):
        log.warning("BMC not answering at start, machine left alone until it does: %s", silent)
    fleet = Fleet(settings, backend, side)
    fleet.refresh()
    service = CloudProviderService(fleet)
    try:
        server, bound = start_server(service, host, port, cert, key, client_ca)
    except (OSError, RuntimeError) as exc:
        raise ConfigError(f"--listen {args.listen}: {exc}") from exc
    http = None
    if args.metrics_listen != "off":
        metrics_host, metrics_port = parse_listen(args.metrics_listen)
        http = scheduler_metrics.serve(fleet.metrics.registry, lambda: fleet.refreshed > 0, metrics_host, metrics_port)
    log.info("cloud provider on %s:%d (TLS%s), %d group(s), %d machine(s), %d allowed, backend %s%s",
             host, bound, ", client certificates" if client_ca else "", len(settings.groups),
             len(settings.machines()), len(settings.allow), settings.backend,
             ", SHADOW MODE: no machine is switched" if settings.shadow else "")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.wait(args.refresh_seconds):
        try:
            fleet.refresh()
        except Exception:
            log.exception("refresh failed")
    server.stop(grace=5).wait()
    if http is not None:
        http.shutdown()
    return 0
