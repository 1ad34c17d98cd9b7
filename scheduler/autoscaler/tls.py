"""The TLS pair both gRPC servers of cluster-autoscaler's (the expander and the cloud provider)
are given: read and checked once, at start. Imports only config/'s ConfigError."""

from __future__ import annotations

import ssl
from pathlib import Path

from scheduler.config.basics import ConfigError


def read_tls(cert_path: str, key_path: str) -> tuple[bytes, bytes]:
    """The certificate and key PEM bytes; ConfigError when unreadable or not a matching pair."""
    try:
        cert = Path(cert_path).read_bytes()
        key = Path(key_path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the TLS certificate or key: {exc}") from exc
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_path, key_path)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"--tls-cert {cert_path} / --tls-key {key_path}: not a usable pair: {exc}") from exc
    return cert, key
