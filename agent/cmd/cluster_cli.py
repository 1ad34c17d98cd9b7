"""The Kubernetes parts of `kubejoule-agent`'s command line: pod names from a watch of this node's
pods, Metrics Server usage, network counters (docs/agent-kubernetes.md), and the pod watch's
names for the GPUs' holders. None of it can stop the energy series."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agent.device.hostfs import HostFS
from agent.monitor.raw_sample import RawSample
from agent.monitor.snapshot import Snapshot
from common.options import positive_float

if TYPE_CHECKING:  # the server imports nothing of this module; only its type is named here
    from agent.cmd.server import AgentService


def kubernetes_options(run: bool = True) -> argparse.ArgumentParser:
    """Options for pod names, Metrics Server and network counters (docs/agent-kubernetes.md)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--kubeconfig", type=Path, default=None, metavar="FILE",
        help="kubeconfig for the API (default: the pod's service account, else $KUBECONFIG or ~/.kube/config)",
    )
    options.add_argument(
        "--no-kube", action="store_true",
        help="do not use the Kubernetes API: pod series keep their pod_uid with empty names, no Metrics Server",
    )
    options.add_argument(
        "--metrics-server", action=argparse.BooleanOptionalAction, default=True,
        help="read metrics.k8s.io for this node and its pods (default: on when the API is used)",
    )
    if run:
        options.add_argument(
            "--metrics-server-interval", type=positive_float, default=None, metavar="SECONDS",
            help="seconds between Metrics Server reads (default: --interval, at least 15: its resolution)",
        )
    options.add_argument(
        "--network", action=argparse.BooleanOptionalAction, default=True,
        help="node interface and per-pod byte counters, from /proc/<pid>/net/dev (default on; no capability needed)",
    )
    return options


def attach_cluster_data(args: argparse.Namespace, service: AgentService) -> None:
    """Start what `run` adds to each snapshot: pod names from a watch of this node's pods,
    Metrics Server usage, network counters. Nothing here can stop the energy series: without
    an API the agent logs it once and exports pod-UID series as before."""
    from agent.device.network import NetworkReader
    from agent.device.podprocs import PodProcesses
    from agent.kube.podmeta import with_pod_names
    from agent.monitor.network_section import with_network

    log = logging.getLogger("kubejoule.agent")
    node = service.sampler.node
    if not args.no_kube:
        from agent.kube.client import KubeClient, KubeConfigError, NodePodWatch
        from agent.kube.metrics_server import MetricsServerReader, with_metrics_server
        from agent.kube.podmeta import PodMetadataCache

        try:
            client = KubeClient.connect(args.kubeconfig)
        except KubeConfigError as exc:
            log.warning("no Kubernetes API: pod series keep their pod_uid with empty names, no Metrics Server "
                        "series", extra={"fields": {"reason": str(exc)}})
        else:
            cache = PodMetadataCache()
            service.accounts.count_error("kube_api", 0)
            watch = NodePodWatch(client, node, cache, on_error=lambda _exc: service.accounts.count_error("kube_api"))
            watch.start()
            service.stoppers.append(watch.stop)
            service.enrichers.append(lambda snapshot, _raw: with_pod_names(snapshot, cache))
            if service.sampler.gpus is not None:  # a GPU's holder, named by PodResources, to its pod's UID
                service.sampler.gpus.uid_of = cache.uid_of
            log.info("watching this node's pods", extra={"fields": {"api": client.server, "node": node}})
            if args.metrics_server:
                service.accounts.count_error("metrics_server", 0)
                reader = MetricsServerReader(
                    client, node, cache.pods,
                    period_seconds=args.metrics_server_interval or max(args.interval, 15.0),
                    on_error=lambda: service.accounts.count_error("metrics_server"),
                )
                reader.start()
                service.stoppers.append(reader.stop)
                service.enrichers.append(
                    lambda snapshot, _raw: with_metrics_server(snapshot, reader.latest(snapshot.timestamp))
                )
            service.stoppers.append(client.close)
    if args.network:
        network = NetworkReader(args.procfs, sysfs=args.sysfs)
        pod_processes = PodProcesses(HostFS(args.procfs, args.sysfs))  # one live process per pod, when the read had no cgroup.procs

        def add_network(snapshot: Snapshot, raw: RawSample) -> Snapshot:
            pids = pod_processes.pids(raw.cgroups)
            return with_network(snapshot, network.read(pids, pod_processes.namespaces))

        service.enrichers.append(add_network)
        service.stoppers.append(pod_processes.close)


def cluster_data_once(args: argparse.Namespace, snapshot: Snapshot, raw: RawSample) -> Snapshot:
    """`once`: pod names from one list of this node's pods, one Metrics Server read, network
    counters. Quiet when no API is configured; a configured API that fails is said on stderr."""
    from agent.device.network import NetworkReader
    from agent.kube.podmeta import PodMetadataCache, with_pod_names
    from agent.monitor.network_section import with_network

    if not args.no_kube:
        from agent.kube.client import KubeClient, KubeConfigError, KubeError
        from agent.kube.metrics_server import MetricsServerReader, with_metrics_server

        try:
            client = KubeClient.connect(args.kubeconfig, request_timeout_seconds=3.0)
        except KubeConfigError:
            client = None
        if client is not None:
            cache = PodMetadataCache()
            try:
                cache.replace(client.list_node_pods(snapshot.node).items)
                snapshot = with_pod_names(snapshot, cache)
                if args.metrics_server:
                    reader = MetricsServerReader(client, snapshot.node, cache.pods)
                    if reader.read_once():
                        snapshot = with_metrics_server(snapshot, reader.latest(snapshot.timestamp))
            except KubeError as exc:
                print(f"pod names unknown: {exc}", file=sys.stderr)
            finally:
                client.close()
    if args.network:
        pods = raw.cgroups.pods if raw.cgroups is not None else {}
        snapshot = with_network(snapshot, NetworkReader(args.procfs, sysfs=args.sysfs).read({u: sorted(p.pids) for u, p in pods.items()}))
    return snapshot


def validate_kube(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.kubeconfig is not None and args.no_kube:
        parser.error("--kubeconfig and --no-kube contradict each other")
    if args.kubeconfig is not None and not args.kubeconfig.is_file():
        parser.error(f"--kubeconfig {args.kubeconfig}: no such file")
