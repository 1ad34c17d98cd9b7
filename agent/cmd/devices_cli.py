"""The command line of what the agent reads beside RAPL: GPUs (NVML, the kubelet's PodResources)
and the BMC's platform reading (Redfish). Options for `once` and `run`; opening them never stops
the agent: without a GPU or a driver there are no GPU series and one line says why, and a BMC
that cannot be used is a gap in every sample with its reason."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path

from agent.device.gpu_source import GpuSource, NvmlUnavailable
from agent.device.platform import DEFAULT_INTERVAL_SECONDS, PlatformPoller
from agent.device.podresources import DEFAULT_SOCKET
from agent.device.redfish import (
    DEFAULT_TIMEOUT_SECONDS,
    Credentials,
    Reading,
    RedfishClient,
    redact_url,
)
from common.options import positive_float

log = logging.getLogger("kubejoule.agent")


def device_options() -> argparse.ArgumentParser:
    """The agent's options: GPUs and the BMC."""
    options = argparse.ArgumentParser(add_help=False, parents=[bmc_options()])
    options.add_argument(
        "--gpu", action=argparse.BooleanOptionalAction, default=None,
        help="read NVIDIA GPUs through NVML (default: when the driver's library is there; --gpu says why not)",
    )
    options.add_argument("--nvml-library", type=Path, default=None, metavar="FILE",
                         help="the NVML library to load (default: the system's libnvidia-ml.so.1)")
    options.add_argument(
        "--pod-resources-socket", type=Path, default=DEFAULT_SOCKET, metavar="PATH",
        help=f"the kubelet's PodResources socket: which pod holds which GPU (default {DEFAULT_SOCKET})",
    )
    return options


def bmc_options(interval_seconds: float = DEFAULT_INTERVAL_SECONDS) -> argparse.ArgumentParser:
    """The BMC's options (the agent's, and `kubejoule-calibrate run`'s with a shorter interval)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--bmc-url", default=None, metavar="URL",
        help="the node's BMC (https://HOST[:PORT]; {node} is replaced by the node name): platform power over Redfish",
    )
    options.add_argument(
        "--bmc-url-file", type=Path, default=None, metavar="FILE",
        help="a file holding the BMC's URL (e.g. a ConfigMap key per node); a missing file means no BMC here",
    )
    options.add_argument("--bmc-credentials", type=Path, default=None, metavar="DIR",
                         help="directory with the BMC's `username` and `password` files (a mounted basic-auth Secret)")
    options.add_argument("--bmc-ca-bundle", type=Path, default=None, metavar="FILE",
                         help="CA certificates to verify the BMC's TLS certificate with (required for https://: "
                              "the system's CAs would trust any public host the URL could be changed to)")
    options.add_argument("--bmc-insecure-http", action="store_true",
                         help="allow an http:// BMC URL, whose password crosses the network in clear (labs only; logged)")
    options.add_argument("--bmc-chassis", default=None, metavar="ID",
                         help="the chassis to read (default: the one holding this node's system, found from /redfish/v1)")
    options.add_argument("--bmc-interval", type=positive_float, default=interval_seconds, metavar="SECONDS",
                         help=f"seconds between BMC polls (default {interval_seconds:g})")
    options.add_argument("--bmc-timeout", type=positive_float, default=DEFAULT_TIMEOUT_SECONDS, metavar="SECONDS",
                         help=f"deadline of one BMC request (default {DEFAULT_TIMEOUT_SECONDS:g})")
    options.add_argument("--bmc-max-age", type=positive_float, default=None, metavar="SECONDS",
                         help="oldest BMC reading used (default: 3 polls, at least 30 s); older is a gap")
    return options


def validate_bmc(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Misuse is a usage error (exit 2); a file missing at run time is a logged gap instead."""
    if args.bmc_url is not None and args.bmc_url_file is not None:
        parser.error("--bmc-url and --bmc-url-file contradict each other")
    if args.bmc_url is None and args.bmc_url_file is None:
        if args.bmc_credentials is not None or args.bmc_ca_bundle is not None or args.bmc_chassis is not None:
            parser.error("--bmc-credentials, --bmc-ca-bundle and --bmc-chassis need --bmc-url or --bmc-url-file")
        if args.bmc_insecure_http:
            parser.error("--bmc-insecure-http needs --bmc-url or --bmc-url-file")
        return
    if args.bmc_credentials is None:
        parser.error("a BMC needs --bmc-credentials DIR (credentials are never taken from flags)")
    if args.bmc_url is None:
        return  # read when the agent starts: a node without a BMC has no file
    try:
        client = RedfishClient(args.bmc_url.replace("{node}", "node"), Credentials("-", "-"),
                               allow_http=args.bmc_insecure_http)
    except ValueError as exc:
        parser.error(f"--bmc-url: {exc}")
    if client.url.startswith("https:") and args.bmc_ca_bundle is None:
        parser.error("--bmc-url https://…: give the CA that signed the BMC's certificate with --bmc-ca-bundle FILE")


def open_gpus(args: argparse.Namespace, say: Callable[[str], None] | None = None) -> GpuSource | None:
    """The GPUs, or None and one line saying why not (to `say`, else the log)."""
    if args.gpu is False:
        return None
    try:
        source = GpuSource.open(args.nvml_library, args.pod_resources_socket)
    except NvmlUnavailable as exc:
        if say is not None:
            if args.gpu:  # asked for explicitly: say why there are none
                say(f"no GPU series: {exc}")
        else:
            log.info("no GPU series", extra={"fields": {"reason": str(exc)}})
        return None
    devices = source.reader.devices
    log.info("reading GPUs through NVML", extra={"fields": {
        "driver": source.reader.driver, "gpus": [f"{d.index}:{d.name}" for d in devices],
        "pod_resources": str(args.pod_resources_socket) if args.pod_resources_socket.exists() else None,
    }})
    return source


def open_platform(args: argparse.Namespace, node: str,
                  on_reading: Callable[[Reading], None] | None = None) -> PlatformPoller | None:
    """The BMC poller (not started), or None and one line saying why not."""
    if args.bmc_url is None and args.bmc_url_file is None:
        return None
    url = args.bmc_url or str(args.bmc_url_file)
    try:
        if args.bmc_url_file is not None:
            url = args.bmc_url_file.read_text().strip()
        url = url.replace("{node}", node)
        credentials = Credentials.load(args.bmc_credentials, node)
        bundle = args.bmc_ca_bundle
        if url.lower().startswith("https:") and (bundle is None or not bundle.is_file()):
            # e.g. the optional ConfigMap not created: the system's CAs would trust any public
            # host, and whoever can edit the URL could send the credentials there.
            raise ValueError(f"no CA bundle at {bundle}: the BMC's certificate is verified only against the "
                             "CA that signed it (--bmc-ca-bundle)")
        client = RedfishClient(url, credentials, bundle, args.bmc_timeout, allow_http=args.bmc_insecure_http)
    except (ValueError, OSError) as exc:  # a missing Secret, an unreadable CA bundle
        log.warning("no platform power: the BMC cannot be used",
                    extra={"fields": {"bmc": redact_url(url), "reason": str(exc)}})
        return None
    if client.url.startswith("http:"):
        log.warning("the BMC is read over plain http (--bmc-insecure-http): its password crosses the network "
                    "in clear", extra={"fields": {"bmc": client.url}})
    log.info("reading platform power from the BMC", extra={"fields": {
        "bmc": client.url, "interval_seconds": args.bmc_interval, "chassis": args.bmc_chassis}})
    return PlatformPoller(client, args.bmc_interval, args.bmc_max_age, chassis_id=args.bmc_chassis,
                          on_reading=on_reading)
