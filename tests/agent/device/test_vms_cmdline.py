"""qemu processes: which are VMs, their name and uuid, and what a snapshot keeps of the cmdline."""

from __future__ import annotations

import pytest

from agent.device.vms import (
    VMIdentity,
    guest_name,
    is_qemu_comm,
    parse_qemu_cmdline,
    redact_cmdline,
)


def cmdline(*args: str) -> bytes:
    return "\0".join(args).encode() + b"\0"


@pytest.mark.parametrize(
    ("comm", "is_vm"),
    [
        (b"qemu-system-x86", True),  # qemu-system-x86_64 cut to 15 characters
        (b"qemu-system-aar", True),
        (b"qemu-kvm", True),
        (b"qemu-img", False),
        (b"qemu-ga", False),
        (b"virt-launcher", False),
        (b"kvm", False),
    ],
)
def test_which_comms_are_vms(comm: bytes, is_vm: bool) -> None:
    assert is_qemu_comm(comm) is is_vm


@pytest.mark.parametrize(
    ("args", "identity"),
    [
        (("/usr/bin/qemu-system-x86_64", "-name", "guest=win10,debug-threads=on", "-uuid", "ABC-1"),
         VMIdentity("win10", "abc-1")),
        (("qemu-kvm", "-uuid", "u-2", "-name", "default_fedora"), VMIdentity("default_fedora", "u-2")),
        (("qemu-kvm", "--name", "process=p,guest=g1"), VMIdentity("g1", None)),
        (("qemu-kvm", "-name", "a,,b,debug-threads=on"), VMIdentity("a,b", None)),  # ",," is a comma
        (("qemu-kvm", "-uuid", "only-uuid"), VMIdentity("only-uuid", "only-uuid")),
        (("qemu-kvm", "-m", "2048"), None),
        (("qemu-kvm", "-name"), None),  # option without value
    ],
)
def test_name_and_uuid_from_the_command_line(args: tuple[str, ...], identity: VMIdentity | None) -> None:
    assert parse_qemu_cmdline(cmdline(*args)) == identity


def test_guest_name_forms() -> None:
    assert guest_name("guest=vm1") == "vm1"
    assert guest_name("vm2,process=x") == "vm2"
    assert guest_name("process=x") is None


def test_redaction_keeps_only_what_the_agent_reads() -> None:
    raw = cmdline(
        "/usr/libexec/qemu-kvm", "-name", "guest=ns_vm,debug-threads=on",
        "-object", '{"qom-type":"secret","id":"k","data":"c2VjcmV0"}', "-uuid", "u-1", "-m", "1024",
    )
    redacted = redact_cmdline(raw)
    assert b"c2VjcmV0" not in redacted and b"-m" not in redacted
    assert parse_qemu_cmdline(redacted) == parse_qemu_cmdline(raw) == VMIdentity("ns_vm", "u-1")
    assert redacted.split(b"\0")[0] == b"/usr/libexec/qemu-kvm"
    assert redact_cmdline(b"") == b""
