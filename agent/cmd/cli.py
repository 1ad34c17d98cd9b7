"""`kubejoule-agent`: the node agent's command line.

Subcommands: once, snapshot, replay (part 1); run, top (part 2). Command-line misuse exits 2
with usage; measurement problems never change the exit code — they are gaps in the record.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from agent import __version__
from agent.cmd.carbon_cli import carbon_ledger, validate_carbon
from agent.cmd.carbon_cli import describe as describe_carbon
from agent.cmd.cloud_cli import (
    NONE,
    add_instance_type_option,
    resolve_from_node,
    validate_instance_type,
)
from agent.cmd.cluster_cli import (
    attach_cluster_data,
    cluster_data_once,
    kubernetes_options,
    validate_kube,
)
from agent.cmd.devices_cli import device_options, open_gpus, open_platform, validate_bmc
from agent.cmd.vm_energy_cli import (
    attach_vm_energy,
    host_energy_options,
    open_host_energy,
    validate_vm_energy,
)
from agent.device.gaps import Subject
from agent.device.gpu_source import GpuSource
from agent.device.hostfs import HostFS, copy_preserving_links
from agent.device.platform import PlatformPoller
from agent.device.vms import redact_cmdline
from agent.exporter.report import format_snapshot
from agent.monitor.sampler import DEFAULT_PROCESS_TOP, Sampler, default_node_name
from agent.monitor.snapshot import Snapshot
from common.carbon_options import add_carbon_arguments
from common.options import deprecated_alias, non_negative_int, positive_float, positive_int
from common.power_profile import PowerProfile, PowerProfileError, load_power_profile


def host_options() -> argparse.ArgumentParser:
    """Options every subcommand shares: where the host's /proc and /sys are, the node name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--procfs", type=Path, default=Path("/proc"), help="host procfs root (default /proc)")
    common.add_argument("--sysfs", type=Path, default=Path("/sys"), help="host sysfs root (default /sys)")
    common.add_argument("--node", default=None, help="node name (default $NODE_NAME, else the hostname)")
    return common


def attribution_options(process_top_default: int = DEFAULT_PROCESS_TOP) -> argparse.ArgumentParser:
    """Options of the commands that compute a sample (once, replay, run, top)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--power-profile", type=Path, default=None, metavar="FILE",
        help="power profile (YAML with at least idle_watts): idle power is its static power",
    )
    deprecated_alias(options, "--calibration", "--power-profile")
    add_instance_type_option(options)
    options.add_argument(
        "--process-top", type=non_negative_int, default=process_top_default, metavar="N",
        help=f"list the N processes using the most power (default {process_top_default}; 0: none)",
    )
    return options


def make_sampler(args: argparse.Namespace, fs: HostFS | None = None, gpus: GpuSource | None = None,
                 platform: PlatformPoller | None = None) -> Sampler:
    """The Sampler for parsed options: the one place options turn into a configured sampler, so
    later parts (Kubernetes metadata, estimation) extend it here for every command at once.
    GPUs and the BMC are opened by the commands that read them (`once`, `run`)."""
    host = fs if fs is not None else HostFS(args.procfs, args.sysfs)
    profile: PowerProfile | None = args.profile
    sampler = Sampler(
        host,
        args.node or default_node_name(),
        profile=profile,
        process_top=args.process_top,
        # `run` reads containers' CPU only when it exports them; the records always list them
        containers=args.containers,
        gpus=gpus,
        platform=platform.state if platform is not None else None,
        host_energy=open_host_energy(args, host),
    )
    estimate_gap: str | None = args.estimate_gap  # an unknown cloud instance type
    sampler.estimate_gap = estimate_gap
    return sampler


def _validate_sampling(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Load the power profile once, at parse time: a bad profile is a usage error."""
    args.profile = None
    path: Path | None = args.power_profile
    if path is not None:
        try:
            args.profile = load_power_profile(path)
        except PowerProfileError as exc:
            parser.error(str(exc))
    validate_instance_type(parser, args)


def emit(snapshot: Snapshot, as_json: bool) -> None:
    if as_json:
        print(json.dumps(snapshot.to_record(), indent=2, allow_nan=False))  # strict JSON: to_record has no NaN
        if snapshot.node_watts is None:
            # stdout stays valid JSON; the reason in words goes to stderr.
            for gap in snapshot.gaps:
                if gap.subject is Subject.NODE:
                    print(f"node power unknown: {gap.reason}", file=sys.stderr)
                    break
    else:
        print(format_snapshot(snapshot))


def cmd_once(args: argparse.Namespace) -> int:
    node = args.node or default_node_name()
    gpus = open_gpus(args, say=lambda line: print(line, file=sys.stderr))
    platform = open_platform(args, node)
    resolve_from_node(args, node, say=lambda line: print(line, file=sys.stderr))
    sampler = make_sampler(args, gpus=gpus, platform=platform)
    try:
        before = sampler.read()
        started = time.monotonic()
        if platform is not None:
            platform.poll()  # one BMC reading, within its deadline, while the interval passes
        time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        after = sampler.read()
        emit(cluster_data_once(args, sampler.compute(before, after), after), args.json)
    finally:
        sampler.close()
        if platform is not None:
            platform.client.close()
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    fs = HostFS(args.procfs, args.sysfs, record=True)
    make_sampler(args, fs).read()
    target: Path = args.dir
    copied = skipped = 0
    for path in sorted(fs.recorded):
        for root, name in ((fs.procfs, "proc"), (fs.sysfs, "sys")):
            try:
                rel = path.relative_to(root)
            except ValueError:
                continue
            data = fs.recorded_bytes.get(path)
            if data is not None and name == "proc" and rel.name == "cmdline":
                data = redact_cmdline(data)
            # The copy recreates the kernel's symlinks on the way and writes the bytes the sample
            # read (so the snapshot holds what was read even if the file has changed or gone
            # since), never outside DIR (agent/device/hostfs.py: openat with O_NOFOLLOW, links checked
            # before they are made).
            if copy_preserving_links(root, rel, target / name, data):
                copied += 1
            else:
                skipped += 1
                print(f"warning: could not copy {path} (unreadable)", file=sys.stderr)
            break
    print(f"snapshot of {copied} files written to {target} (replay with --procfs {target / 'proc'} "
          f"--sysfs {target / 'sys'})" + (f"; {skipped} unreadable files left out" if skipped else ""))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    before = make_sampler(args, HostFS(args.before / "proc", args.before / "sys")).read()
    after_sampler = make_sampler(args, HostFS(args.after / "proc", args.after / "sys"))
    after = after_sampler.read()
    emit(after_sampler.compute(before, after, args.interval), args.json)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from agent.cmd.server import AgentService, configure_logging, raise_open_files_limit, serve
    from agent.exporter.prometheus import SnapshotCollector
    from agent.monitor.accounts import EnergyAccounts
    from agent.monitor.energy_ledger import ExportLevels

    configure_logging(args.log_level, args.log_format)
    open_files = raise_open_files_limit()
    resolve_from_node(args, args.node or default_node_name(), say=logging.getLogger("kubejoule.agent").warning)
    profile: PowerProfile | None = args.profile
    accounts = EnergyAccounts(ExportLevels(containers=args.containers, process_top=args.process_top), carbon_ledger(args))
    collector = SnapshotCollector(
        accounts,
        model_points=profile.model_points() if profile is not None else (),
        model_reading=profile.reading if profile is not None else "rapl",
    )
    node = args.node or default_node_name()
    gpus, platform = open_gpus(args), open_platform(args, node)
    service = AgentService(make_sampler(args, gpus=gpus, platform=platform), collector, args.interval,
                           args.listen_address)
    if gpus is not None:
        accounts.count_error("gpu", 0)
    if platform is not None:
        accounts.count_error("platform", 0)
        platform.start()
        service.stoppers.append(platform.stop)
    attach_vm_energy(args, service.enrichers, service.stoppers)
    logging.getLogger("kubejoule.agent").info("starting", extra={"fields": {
        "node": service.sampler.node, "interval_seconds": args.interval, "procfs": str(args.procfs),
        "sysfs": str(args.sysfs), "calibration": str(args.power_profile) if args.power_profile else None,
        "containers": args.containers, "process_top": args.process_top, "open_files_limit": open_files,
        "version": __version__, "carbon_intensity": describe_carbon(args),
    }})
    attach_cluster_data(args, service)
    # Everything made so far (modules, the Kubernetes client's classes) lives as long as the
    # process: out of the cyclic collector's sight, its full collections stay short.
    gc.freeze()
    return serve(service)


def cmd_top(args: argparse.Namespace) -> int:
    from agent.exporter.top import run_top

    return run_top(make_sampler(args), args.interval, count=args.count, rows=args.rows)


def _validate_once(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    validate_kube(parser, args)
    validate_bmc(parser, args)
    validate_vm_energy(parser, args)
    _validate_sampling(parser, args)


def _validate_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from agent.cmd.server import parse_listen

    try:
        args.listen_address = parse_listen(args.listen)
    except ValueError as exc:
        parser.error(str(exc))
    validate_kube(parser, args)
    validate_bmc(parser, args)
    validate_vm_energy(parser, args)
    _validate_sampling(parser, args)
    validate_carbon(parser, args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubejoule-agent",
        description="Measure node, pod, VM and process energy from RAPL counters.",
    )
    # What a subcommand has no option for reads as its default, so every command's namespace has
    # every attribute the shared code reads (a subcommand's own values replace these).
    parser.set_defaults(
        validate=None, power_profile=None, profile=None, estimate_gap=None, instance_type=NONE,
        process_top=DEFAULT_PROCESS_TOP, containers=True, host_energy=None, host_energy_dir=None,
        vm_energy_dir=None, carbon=None, no_kube=True,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = host_options()
    sampling = attribution_options()

    once = sub.add_parser(
        "once", parents=[common, sampling, kubernetes_options(run=False), device_options(),
                        host_energy_options(run=False)], help="take two samples and print the record"
    )
    once.add_argument("--interval", type=positive_float, default=5.0, help="seconds between samples (default 5)")
    once.add_argument("--json", action="store_true", help="print the JSON sample record")
    once.set_defaults(func=cmd_once, validate=_validate_once)

    snap = sub.add_parser("snapshot", parents=[common], help="copy every file the agent reads into DIR")
    snap.add_argument("dir", type=Path, metavar="DIR", help="the folder to copy into (created if missing)")
    snap.set_defaults(func=cmd_snapshot)

    replay = sub.add_parser("replay", parents=[common, sampling], help="the record computed from two snapshot trees")
    replay.add_argument("before", type=Path, metavar="BEFORE", help="the first snapshot tree (`snapshot DIR`)")
    replay.add_argument("after", type=Path, metavar="AFTER", help="the second snapshot tree, taken --interval seconds later")
    replay.add_argument("--interval", type=positive_float, required=True, help="seconds between the two trees")
    replay.add_argument("--json", action="store_true", help="print the JSON sample record")
    replay.set_defaults(func=cmd_replay, validate=_validate_replay)

    run = sub.add_parser(
        "run", parents=[common, attribution_options(process_top_default=0), kubernetes_options(), device_options(),
                        host_energy_options(run=True)],
        help="sample every interval and serve /metrics, /healthz, /readyz",
    )
    run.add_argument("--interval", type=positive_float, default=5.0, help="seconds between samples (default 5)")
    run.add_argument("--listen", default=":9102", metavar="HOST:PORT",
                     help="address for /metrics, /healthz, /readyz (default :9102; port 0 picks a free one)")
    run.add_argument("--containers", action="store_true",
                     help="also export kubejoule_container_power_watts (one series per container)")
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                     help="the least severe log lines written (default info)")
    run.add_argument("--log-format", default="json", choices=["json", "text"],
                     help="json: one object per line (default); text: for people")
    add_carbon_arguments(run)
    run.set_defaults(func=cmd_run, validate=_validate_run)

    top = sub.add_parser("top", parents=[common, sampling], help="live view of node, pods, VMs and processes")
    top.add_argument("--interval", type=positive_float, default=2.0, help="seconds between refreshes (default 2)")
    top.add_argument("--count", type=positive_int, default=None, help="stop after N refreshes (default: until Ctrl-C)")
    top.add_argument("--rows", type=positive_int, default=None, help="rows per section (default: fit the terminal)")
    top.set_defaults(func=cmd_top, validate=_validate_sampling)

    for command in sub.choices.values():
        # a value refused after parsing is reported with the usage of its own subcommand
        command.set_defaults(command_parser=command)
    return parser


def _validate_replay(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name in ("before", "after"):
        tree: Path = getattr(args, name)
        if not tree.is_dir():
            parser.error(f"{name.upper()} {tree} is not a directory (expected a tree from `snapshot`)")
    _validate_sampling(parser, args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    validate: Callable[[argparse.ArgumentParser, argparse.Namespace], None] | None = args.validate
    if validate is not None:
        validate(args.command_parser, args)
    try:
        result: int = args.func(args)
    except BrokenPipeError:  # `kubejoule-agent once | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return result


if __name__ == "__main__":
    raise SystemExit(main())
