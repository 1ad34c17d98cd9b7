"""qemu/KVM virtual machines: which processes are VMs, and their name and uuid.

A VM is a `qemu-system-*` or `qemu-kvm` process, started by libvirt on the host or by KubeVirt
inside a `virt-launcher` pod. Its name comes from `-name guest=NAME,...` (libvirt, KubeVirt) or
`-name NAME` (the short form), its uuid from `-uuid`. Only qemu-looking processes have their
command line read, and only the name and uuid leave this module: a command line can hold
secrets, so it is never a label, and snapshots keep a redacted copy (`redact_cmdline`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.device.hostfs import HostFS

# comm is at most 15 characters: "qemu-system-x86_64" shows as "qemu-system-x86".
QEMU_COMM_PREFIXES = (b"qemu-system-", b"qemu-kvm")
_NAME_OPTIONS = (b"-name", b"--name")
_UUID_OPTIONS = (b"-uuid", b"--uuid")


@dataclass(frozen=True)
class VMIdentity:
    name: str
    uuid: str | None


def is_qemu_comm(comm: bytes) -> bool:
    return comm.startswith(QEMU_COMM_PREFIXES)


def _qemu_option_values(value: str) -> list[str]:
    """Split a qemu option string on commas; ",," is an escaped comma."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(value):
        char = value[i]
        if char == ",":
            if value[i + 1 : i + 2] == ",":
                current.append(",")
                i += 2
                continue
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


def guest_name(option: str) -> str | None:
    """The guest name in a `-name` argument: `guest=NAME,...` or a bare first value."""
    values = _qemu_option_values(option)
    for item in values:
        if item.startswith("guest="):
            return item[len("guest=") :] or None
    first = values[0]
    if first and "=" not in first:
        return first
    return None


def parse_qemu_cmdline(raw: bytes) -> VMIdentity | None:
    """Name and uuid from a NUL-separated `/proc/<pid>/cmdline`; None if it names neither."""
    args = raw.rstrip(b"\0").split(b"\0")
    name: str | None = None
    uuid: str | None = None
    for index, arg in enumerate(args[:-1]):
        value = args[index + 1].decode("utf-8", errors="replace")
        if arg in _NAME_OPTIONS and name is None:
            name = guest_name(value)
        elif arg in _UUID_OPTIONS and uuid is None:
            uuid = value.strip().lower() or None
    if name is None and uuid is None:
        return None
    return VMIdentity(name or uuid or "", uuid)


def read_vm_identity(fs: HostFS, pid: int) -> VMIdentity | None:
    """Identity of a qemu process; None if it exited or names itself nowhere."""
    try:
        raw = fs.read_if_exists(f"{fs.procfs}/{pid}/cmdline")
    except OSError:
        return None
    return parse_qemu_cmdline(raw) if raw is not None else None


def redact_cmdline(raw: bytes) -> bytes:
    """Keep only what the agent uses (argv[0], -name and -uuid with their values), so a
    snapshot of a host can be shared without the rest of a VM's command line."""
    args = raw.rstrip(b"\0").split(b"\0")
    kept = args[:1]
    for index, arg in enumerate(args[:-1]):
        if index and (arg in _NAME_OPTIONS or arg in _UUID_OPTIONS):
            kept += [arg, args[index + 1]]
    return b"\0".join(kept) + b"\0" if kept and kept != [b""] else b""
