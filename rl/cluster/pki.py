"""Certificates for a control plane on loopback: one CA, the API server's serving certificate,
client certificates for each component (its user and groups are what RBAC sees), and the
service-account signing key. Made on the fly with `cryptography`; nothing here is a secret worth
keeping (the cluster lives in its directory and dies with it)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 30


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)


def _name(common: str, groups: tuple[str, ...] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    parts += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    return x509.Name(parts)


class Authority:
    """A throwaway certificate authority in `directory` (ca.crt, ca.key); `load` takes up the one
    a directory already holds (to issue more certificates for a running cluster)."""

    def __init__(self, directory: Path, common: str = "kubejoule-cluster-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = _name(common)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False, key_agreement=False,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert = directory / "ca.crt"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        _write_key(directory / "ca.key", self._key)

    @classmethod
    def load(cls, directory: Path) -> Authority:
        """The authority whose ca.crt and ca.key are in `directory`."""
        authority = cls.__new__(cls)
        authority.directory = directory
        authority.cert = directory / "ca.crt"
        authority._cert = x509.load_pem_x509_certificate(authority.cert.read_bytes())
        key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{directory / 'ca.key'}: not the EC key this harness makes")
        authority._key = key
        return authority

    def issue(
        self,
        stem: str,
        common: str,
        *,
        groups: tuple[str, ...] = (),
        server: bool = False,
        hosts: tuple[str, ...] = (),
        days: float = VALID_DAYS,
    ) -> KeyPair:
        """A certificate for `common` (client; also server for `hosts` when `server`)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common, groups))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = KeyPair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(pair.key, key)
        return pair


def service_account_keys(directory: Path) -> KeyPair:
    """The RSA key pair the API server signs service-account tokens with (sa.pub, sa.key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pair = KeyPair(directory / "sa.pub", directory / "sa.key")
    pair.cert.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    _write_key(pair.key, key)
    return pair
