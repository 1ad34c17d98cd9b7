"""For the gRPC expander's tests and benchmark: a throwaway self-signed certificate, requests
shaped like cluster-autoscaler's (template nodes with labels, capacity and allocatable; options;
pods with requests) in each protocol form, and a client that dials as cluster-autoscaler does
(TLS, the server's certificate file as the trust root, the host checked against its SAN)."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from scheduler.autoscaler.protos import expander_pb2, k8s_core_v1_pb2

METHOD_PATH = "/grpcplugin.Expander/BestOptions"
FORMS = ("messages", "bytes", "both")


@dataclass(frozen=True)
class TLSFiles:
    cert_pem: bytes
    key_pem: bytes
    cert_path: Path
    key_path: Path


def self_signed(directory: Path, hosts: Sequence[str] = ("localhost", "127.0.0.1")) -> TLSFiles:
    """A self-signed server certificate with these hosts as SANs (DNS names or IPs)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubejoule-expander-test")])
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    cert_path = directory / "tls.crt"
    key_path = directory / "tls.key"
    cert_path.write_bytes(cert_pem)
    key_path.write_bytes(key_pem)
    return TLSFiles(cert_pem, key_pem, cert_path, key_path)


@contextmanager
def ca_client(cert_pem: bytes, target: str) -> Iterator[grpc.UnaryUnaryMultiCallable]:
    """A BestOptions callable dialled like cluster-autoscaler's grpc expander: TLS with the
    certificate as the only trust root, no client certificate, a 128 MiB receive limit."""
    credentials = grpc.ssl_channel_credentials(root_certificates=cert_pem)
    channel = grpc.secure_channel(
        target, credentials, options=[("grpc.max_receive_message_length", 128 << 20)]
    )
    try:
        yield channel.unary_unary(
            METHOD_PATH,
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=expander_pb2.BestOptionsResponse.FromString,
        )
    finally:
        channel.close()


def raw_client(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable:
    """BestOptions with raw bytes as the request (for garbage)."""
    return channel.unary_unary(
        METHOD_PATH, response_deserializer=expander_pb2.BestOptionsResponse.FromString
    )


def template_node(
    group: str, cpu: str, memory: str, labels: Mapping[str, str] | None = None, pods: str = "110"
) -> k8s_core_v1_pb2.Node:
    """A template node as cluster-autoscaler builds it: labels, capacity and allocatable (a
    little below capacity, as kubelet reserves), a Ready condition."""
    node = k8s_core_v1_pb2.Node()
    node.metadata.name = f"template-node-for-{group}-1234"
    node.metadata.labels.update(
        {"kubernetes.io/os": "linux", "kubernetes.io/hostname": f"template-node-for-{group}", **(labels or {})}
    )
    for resources, reserved in ((node.status.capacity, False), (node.status.allocatable, True)):
        resources["cpu"].string = f"{int(cpu) * 1000 - 100}m" if reserved else cpu
        resources["memory"].string = memory
        resources["pods"].string = pods
    condition = node.status.conditions.add()
    condition.type, condition.status = "Ready", "True"
    return node


def pending_pod(name: str, cpu: str, memory: str, annotation_bytes: int = 0) -> k8s_core_v1_pb2.Pod:
    pod = k8s_core_v1_pb2.Pod()
    pod.metadata.name = name
    pod.metadata.namespace = "default"
    pod.metadata.uid = f"uid-{name}"
    pod.metadata.labels["app"] = "web"
    if annotation_bytes:
        pod.metadata.annotations["example.com/padding"] = "x" * annotation_bytes
    container = pod.spec.containers.add()
    container.name = "app"
    container.resources.requests["cpu"].string = cpu
    container.resources.requests["memory"].string = memory
    pod.spec.schedulerName = "default-scheduler"
    pod.status.phase = "Pending"
    return pod


def best_options_request(
    options: Sequence[tuple[str, int, Sequence[k8s_core_v1_pb2.Pod]]],
    templates: Mapping[str, k8s_core_v1_pb2.Node],
    form: str,
    node_bytes: Mapping[str, bytes] | None = None,
) -> expander_pb2.BestOptionsRequest:
    """A request in one protocol form: "messages" (nodeMap/pod, CA ≤ 1.34.1), "bytes"
    (nodeBytesMap/podBytes, CA ≥ 1.35), "both" (CA 1.34.2–1.34.5). `node_bytes` replaces the
    encoding of some templates (e.g. a fuller Node)."""
    request = expander_pb2.BestOptionsRequest()
    for group, count, pods in options:
        option = request.options.add(nodeGroupId=group, nodeCount=count, debug=f"{group} debug")
        if form in ("messages", "both"):
            for pod in pods:
                option.pod.add().CopyFrom(pod)
        if form in ("bytes", "both"):
            option.podBytes.extend(pod.SerializeToString() for pod in pods)
    for group, node in templates.items():
        if form in ("messages", "both"):
            request.nodeMap[group].CopyFrom(node)
        if form in ("bytes", "both"):
            encoded = (node_bytes or {}).get(group)
            request.nodeBytesMap[group] = encoded if encoded is not None else node.SerializeToString()
    return request


# -- protobuf wire format, for messages with fields the subset does not declare --------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def varint_field(field_number: int, value: int) -> bytes:
    return _varint(field_number << 3) + _varint(value)


def fuller_node(node: k8s_core_v1_pb2.Node) -> bytes:
    """`node` encoded with fields of the upstream v1.Node that the subset leaves out, at their
    upstream numbers (core/v1 and meta/v1 generated.proto): ObjectMeta resourceVersion (6),
    generation (7), creationTimestamp (8, a Time {seconds = 1}), finalizers (14); NodeSpec
    podCIDR (1), providerID (3), podCIDRs (7); NodeStatus phase (3), addresses (5, NodeAddress
    {type = 1, address = 2}), nodeInfo (7, NodeSystemInfo {machineID = 1, kernelVersion = 3}),
    images (8, ContainerImage {names = 1, sizeBytes = 2}). Protobuf concatenation merges
    messages, so the extra fields are appended as further occurrences of metadata/spec/status."""
    meta_extra = (
        length_delimited(6, b"123456")
        + varint_field(7, 3)
        + length_delimited(8, varint_field(1, 1_700_000_000))
        + length_delimited(14, b"kubernetes.io/finalizer")
    )
    spec_extra = (
        length_delimited(1, b"10.244.1.0/24")
        + length_delimited(3, b"aws:///eu-west-1a/i-0123456789abcdef0")
        + length_delimited(7, b"10.244.1.0/24")
    )
    status_extra = (
        length_delimited(3, b"Running")
        + length_delimited(5, length_delimited(1, b"InternalIP") + length_delimited(2, b"10.0.0.7"))
        + length_delimited(7, length_delimited(1, b"abc123") + length_delimited(3, b"6.1.0-18-amd64"))
        + length_delimited(8, length_delimited(1, b"registry.k8s.io/pause:3.9") + varint_field(2, 321_000))
    )
    return (
        node.SerializeToString()
        + length_delimited(1, meta_extra)
        + length_delimited(2, spec_extra)
        + length_delimited(3, status_extra)
    )
