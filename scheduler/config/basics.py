"""The leaf of config/: the error every configuration reader raises and the listen-address
parser. Imports nothing of the scheduler, so that a process that needs only these (the
cloud provider) does not pull in the telemetry sources behind the full configuration."""

from __future__ import annotations


class ConfigError(ValueError):
    """The configuration file is unreadable or has a wrong key or value."""


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `[::1]:PORT` → (host, port); an empty host means all addresses."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"listen: expected HOST:PORT, got {value!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)
