"""The command line of VM energy passed from a host to its guests (docs/agent-devices.md):
`--vm-energy-dir DIR` (`run` on the host: each VM's energy in `DIR/<vm>/`) and `--host-energy DIR`
(`once` and `run` in the guest: node power from that counter, `source="host"`; found at the
mount point `run/kubejoule/host-energy` beside `--sysfs` when not given)."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from pathlib import Path

from agent.device.host_energy import HostEnergyReader, found_at_mount_point, mount_point
from agent.device.hostfs import HostFS
from agent.exporter.vm_energy import VmEnergyWriter
from agent.monitor.raw_sample import RawSample
from agent.monitor.snapshot import Snapshot

log = logging.getLogger("kubejoule.agent")


def host_energy_options(run: bool) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--host-energy", type=Path, default=None, metavar="DIR",
        help="in a VM: node power from the counter its host publishes in DIR (source=\"host\"; default: "
             "the mount point run/kubejoule/host-energy beside --sysfs, when it holds a counter)",
    )
    if run:
        options.add_argument(
            "--vm-energy-dir", type=Path, default=None, metavar="DIR",
            help="on a VM host: keep each VM's energy in DIR/<vm>/ (powercap layout) for its guest to read",
        )
    return options


def validate_vm_energy(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Resolve where the guest's counter is (given, or found at the mount point); the host's
    directory must be one the agent can make (a usage error otherwise, exit 2)."""
    given: Path | None = args.host_energy
    if given is not None and given.exists() and not given.is_dir():
        parser.error(f"--host-energy {given} is not a directory")
    args.host_energy_dir = given if given is not None else found_at_mount_point(args.sysfs)
    directory: Path | None = args.vm_energy_dir
    if directory is not None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--vm-energy-dir {directory}: {exc.strerror or exc}")
        if not directory.is_dir():
            parser.error(f"--vm-energy-dir {directory} is not a directory")


def open_host_energy(args: argparse.Namespace, fs: HostFS) -> HostEnergyReader | None:
    """The guest's reader of its host's counter, or None where there is none."""
    directory: Path | None = args.host_energy_dir
    if directory is None:
        return None
    log.info("node power from the host's counter", extra={"fields": {
        "host_energy": str(directory), "found": args.host_energy is None,
        "mount_point": str(mount_point(args.sysfs))}})
    return HostEnergyReader(fs, directory)


MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def filesystem_type(path: Path, mounts: Path = Path("/proc/self/mounts")) -> str | None:
    """The type of the filesystem `path` is on (the longest mount point above it), or None."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return None
    target = os.path.realpath(path)
    best, kind = "", None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def attach_vm_energy(args: argparse.Namespace, enrichers: list[Callable[[Snapshot, RawSample], Snapshot]],
                     stoppers: list[Callable[[], None]]) -> VmEnergyWriter | None:
    """On a VM host: publish each snapshot's VMs (after the snapshot is made, before it is served)."""
    directory: Path | None = args.vm_energy_dir
    if directory is None:
        return None
    writer = VmEnergyWriter(directory)
    kind = filesystem_type(directory)
    if kind is not None and kind not in MEMORY_FILESYSTEMS:
        log.warning("--vm-energy-dir is not on tmpfs: each counter's rename costs writeback there (about 0.1 ms "
                    "of CPU per VM and sample on ext4, ten times tmpfs'); /run is tmpfs",
                    extra={"fields": {"vm_energy_dir": str(directory), "filesystem": kind}})

    def publish(snapshot: Snapshot, _raw: RawSample) -> Snapshot:
        writer.update(snapshot)
        return snapshot

    enrichers.append(publish)
    stoppers.append(writer.close)
    log.info("publishing each VM's energy", extra={"fields": {"vm_energy_dir": str(directory)}})
    return writer
