"""The TLS of both gRPC servers cluster-autoscaler calls (the expander and the cloud provider):
the pair read and checked once, at start, and the server bound with it. Imports only config/'s
ConfigError."""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc

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


def serve_tls(server: grpc.Server, host: str, port: int, certificate_pem: bytes, private_key_pem: bytes,
              client_ca_pem: bytes | None = None) -> int:
    """Bind `server` to host:port over TLS (a client certificate required when `client_ca_pem` is
    given) and start it; the bound port (port 0: a free one). OSError when it cannot listen."""
    credentials = grpc.ssl_server_credentials(
        [(private_key_pem, certificate_pem)], root_certificates=client_ca_pem,
        require_client_auth=client_ca_pem is not None,
    )
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_secure_port(address, credentials)
    if bound == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return bound
