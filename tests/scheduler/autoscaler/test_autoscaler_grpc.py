"""The gRPC expander server, called over TLS on loopback by a real grpcio client dialled the way
cluster-autoscaler dials (its certificate file as the trust root, the host checked against the
SAN), with requests in each of cluster-autoscaler's protocol forms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from benchmarks.harness.expander_grpc import (
    FORMS,
    TLSFiles,
    best_options_request,
    ca_client,
    fuller_node,
    length_delimited,
    pending_pod,
    raw_client,
    self_signed,
    template_node,
)
from common.curves import PowerCurve
from scheduler.autoscaler.messages import node_json, parse_request
from scheduler.autoscaler.protos import expander_pb2, k8s_core_v1_pb2
from scheduler.autoscaler.server import Expander, start_server

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# rl/scenarios/heterogeneous.yaml's SPECpower curves.
X3250 = PowerCurve.from_points([41.6, 46.7, 52.3, 57.9, 65.4, 73, 80.7, 89.5, 99.6, 105, 113])
X5675 = PowerCurve.from_points([58.4, 98, 109, 118, 128, 140, 153, 170, 189, 205, 222])

TEMPLATES = {
    # priced by its instance-type label (node_groups has the type, not the group id)
    "ng-small": template_node("ng-small", "8", "8Gi", {INSTANCE_TYPE: "x3250-m3"}),
    # priced by its group id
    "ng-big": template_node("ng-big", "24", "16Gi", {INSTANCE_TYPE: "x3550-m3"}),
    # no curve anywhere
    "ng-mystery": template_node("ng-mystery", "16", "64Gi", {INSTANCE_TYPE: "unknown.large"}),
}
PODS = [pending_pod(f"web-{i}", "1", "1Gi") for i in range(3)]
OPTIONS = [("ng-mystery", 1, PODS), ("ng-small", 1, PODS), ("ng-big", 1, PODS)]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def expander() -> Expander:
    return Expander(node_groups={"ng-big": X5675, "x3250-m3": X3250})


@pytest.fixture(scope="module")
def target(tls: TLSFiles, expander: Expander) -> Iterator[str]:
    server, port = start_server(expander, "127.0.0.1", 0, tls.cert_pem, tls.key_pem)
    try:
        yield f"localhost:{port}"
    finally:
        server.stop(grace=None)


def call(tls: TLSFiles, target: str, request: expander_pb2.BestOptionsRequest) -> list[tuple[str, int, str]]:
    with ca_client(tls.cert_pem, target) as best_options:
        response = best_options(request, timeout=30)
    return [(o.nodeGroupId, o.nodeCount, o.debug) for o in response.options]


@pytest.mark.parametrize("form", FORMS)
def test_the_energy_cheapest_group_is_answered_in_every_protocol_form(
    tls: TLSFiles, target: str, expander: Expander, form: str
) -> None:
    # Per core of load, X5675 at half load (140 W / 12 cores) beats X3250 (73 W / 4 cores);
    # ng-mystery has no curve and cannot win (test_expansion.py has the arithmetic).
    before = expander.metrics.value(
        "kubejoule_expander_requests_total", {"code": "OK", "form": form}
    ) or 0.0
    assert call(tls, target, best_options_request(OPTIONS, TEMPLATES, form)) == [
        ("ng-big", 1, "ng-big debug")
    ]
    assert expander.metrics.value(
        "kubejoule_expander_requests_total", {"code": "OK", "form": form}
    ) == before + 1
    assert (expander.metrics.value(
        "kubejoule_expander_choices_total", {"node_group": "ng-big", "curve_source": "config"}
    ) or 0) >= 1


def test_a_group_priced_by_its_instance_type_label(tls: TLSFiles, target: str, expander: Expander) -> None:
    options = [("ng-mystery", 1, PODS), ("ng-small", 2, PODS)]
    assert call(tls, target, best_options_request(options, TEMPLATES, "bytes")) == [
        ("ng-small", 2, "ng-small debug")
    ]
    assert (expander.metrics.value(
        "kubejoule_expander_choices_total", {"node_group": "ng-small", "curve_source": "label"}
    ) or 0) >= 1


def test_no_known_curve_answers_every_option_in_order(tls: TLSFiles, target: str) -> None:
    templates = {"ng-mystery": TEMPLATES["ng-mystery"], "ng-other": template_node("ng-other", "4", "4Gi")}
    options = [("ng-other", 3, PODS), ("ng-mystery", 1, PODS)]
    assert call(tls, target, best_options_request(options, templates, "messages")) == [
        ("ng-other", 3, "ng-other debug"),
        ("ng-mystery", 1, "ng-mystery debug"),
    ]


def test_a_fuller_node_encoding_decodes_to_the_same_node() -> None:
    node = TEMPLATES["ng-big"]
    full = fuller_node(node)
    decoded = k8s_core_v1_pb2.Node.FromString(full)
    assert len(full) > len(node.SerializeToString()) + 100
    assert node_json(decoded) == node_json(node)
    plain = parse_request(best_options_request(OPTIONS, TEMPLATES, "bytes"))
    fuller = parse_request(
        best_options_request(OPTIONS, TEMPLATES, "bytes", node_bytes={"ng-big": full})
    )
    assert fuller.options == plain.options


def test_the_fuller_node_gets_the_same_answer(tls: TLSFiles, target: str) -> None:
    request = best_options_request(
        OPTIONS, TEMPLATES, "bytes", node_bytes={g: fuller_node(n) for g, n in TEMPLATES.items()}
    )
    assert call(tls, target, request) == [("ng-big", 1, "ng-big debug")]


def test_message_and_bytes_forms_decode_identically() -> None:
    parsed = {form: parse_request(best_options_request(OPTIONS, TEMPLATES, form)) for form in FORMS}
    assert parsed["messages"].options == parsed["bytes"].options == parsed["both"].options
    assert [p.form for p in parsed.values()] == list(FORMS)
    big = parsed["bytes"].options[2]
    assert big.template.allocatable.cpu_millicores == 23_900
    assert big.template.label_map[INSTANCE_TYPE] == "x3550-m3"
    assert [p.requests.cpu_millicores for p in big.pods] == [1000, 1000, 1000]
    assert big.pods[0].requests.memory_bytes == 1024**3


# -- bad input: a status, never a crash ------------------------------------------------------------


def expect_status(tls: TLSFiles, target: str, request: object, code: grpc.StatusCode, text: str) -> None:
    credentials = grpc.ssl_channel_credentials(root_certificates=tls.cert_pem)
    with grpc.secure_channel(target, credentials) as channel:
        send = raw_client(channel)
        payload = request if isinstance(request, bytes) else request.SerializeToString()  # type: ignore[attr-defined]
        with pytest.raises(grpc.RpcError) as caught:
            send(payload, timeout=30)
    assert caught.value.code() == code
    assert text in (caught.value.details() or "")


def bad_request(**changes: object) -> expander_pb2.BestOptionsRequest:
    request = best_options_request(OPTIONS, TEMPLATES, "bytes")
    option = request.options[1]
    for key, value in changes.items():
        if key == "podBytes":
            option.podBytes[0] = value  # type: ignore[assignment]
        elif key == "node":
            request.nodeBytesMap["ng-small"] = value  # type: ignore[assignment]
        else:
            setattr(option, key, value)
    return request


@pytest.mark.parametrize(
    ("request_", "text"),
    [
        (b"\xff\xff\xff\xff garbage", "not a protobuf-encoded BestOptionsRequest"),
        (b"", "no options"),
        (expander_pb2.BestOptionsRequest(), "no options"),
        (bad_request(nodeCount=-2), "nodeCount must be between 1"),
        (bad_request(nodeCount=0), "nodeCount must be between 1"),
        (bad_request(nodeGroupId=""), "nodeGroupId is empty"),
        (bad_request(podBytes=b"\x0a\xff\x01"), "options[1] (ng-small).podBytes[0]: not a protobuf-encoded Pod"),
        (bad_request(node=b"\x12\x05\x22"), "nodeBytesMap[ng-small]"),
    ],
    ids=["garbage", "empty-bytes", "empty-message", "negative-count", "zero-count", "no-group",
         "garbage-pod", "garbage-node"],
)
def test_bad_requests_get_invalid_argument_and_the_server_stays_up(
    tls: TLSFiles, target: str, request_: object, text: str
) -> None:
    expect_status(tls, target, request_, grpc.StatusCode.INVALID_ARGUMENT, text)
    assert call(tls, target, best_options_request(OPTIONS, TEMPLATES, "both"))[0][0] == "ng-big"


def test_a_bad_quantity_names_the_pod_and_field(tls: TLSFiles, target: str) -> None:
    pod = pending_pod("weird", "12xyz", "1Gi")
    request = best_options_request([("ng-small", 1, [pod])], TEMPLATES, "bytes")
    expect_status(tls, target, request, grpc.StatusCode.INVALID_ARGUMENT, "podBytes[0]")


def test_missing_templates_are_unpriced_not_an_error(tls: TLSFiles, target: str, expander: Expander) -> None:
    # ng-big's template is missing from both maps: it cannot be priced, ng-small wins.
    templates = {g: n for g, n in TEMPLATES.items() if g != "ng-big"}
    before = expander.metrics.value("kubejoule_expander_unpriced_options_total", {"reason": "no_template"}) or 0
    assert call(tls, target, best_options_request(OPTIONS, templates, "both")) == [
        ("ng-small", 1, "ng-small debug")
    ]
    assert expander.metrics.value(
        "kubejoule_expander_unpriced_options_total", {"reason": "no_template"}
    ) == before + 1
    # No template at all: every option.
    assert len(call(tls, target, best_options_request(OPTIONS, {}, "bytes"))) == 3


def test_a_request_of_tens_of_mib_is_received_and_answered(tls: TLSFiles, target: str) -> None:
    # 1,000 options of 20 distinct pods of about 1 KiB each (a padding annotation), in the bytes
    # form: about 20 MiB, five times grpcio's default receive limit.
    # Group 617 is "ng-big" (X5675, priced by its group id); every other group is an X3250
    # (priced by its instance-type label): the X5675 is the cheapest per core and must win.
    options = []
    templates = {}
    for g in range(1000):
        group = "ng-big" if g == 617 else f"ng-{g}"
        pods = [pending_pod(f"p-{g}-{i}", "250m", "256Mi", annotation_bytes=900) for i in range(20)]
        options.append((group, 1 + g % 3, pods))
        cores = "24" if g == 617 else "8"
        templates[group] = template_node(group, cores, "16Gi", {INSTANCE_TYPE: "x3250-m3"})
    request = best_options_request(options, templates, "bytes")
    assert request.ByteSize() > 20 * 1024 * 1024
    assert call(tls, target, request) == [("ng-big", 1 + 617 % 3, "ng-big debug")]


def test_the_client_refuses_a_certificate_without_the_host_in_its_san(
    tmp_path: Path, expander: Expander
) -> None:
    # cluster-autoscaler checks the host of --grpc-expander-url against the certificate's SAN.
    wrong = self_signed(tmp_path, hosts=("expander.example.internal",))
    server, port = start_server(expander, "127.0.0.1", 0, wrong.cert_pem, wrong.key_pem)
    try:
        with ca_client(wrong.cert_pem, f"localhost:{port}") as best_options, pytest.raises(grpc.RpcError) as caught:
            best_options(best_options_request(OPTIONS, TEMPLATES, "bytes"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop(grace=None)


def test_wire_helper_encodes_a_length_delimited_field() -> None:
    # field 1, wire type 2, length 3: the bytes a protobuf encoder writes for a 3-byte string.
    assert length_delimited(1, b"abc") == b"\x0a\x03abc"


def documented_openssl_command() -> str:
    """The `openssl req` command of docs/autoscaler-expander.md's worked example."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "autoscaler-expander.md").read_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("openssl req -x509"))
    command = []
    for line in lines[start:]:
        command.append(line.strip().removesuffix("\\"))
        if not line.rstrip().endswith("\\"):
            break
    return " ".join(command)


def test_the_documented_certificate_is_accepted_for_the_service_name(
    tmp_path: Path, expander: Expander
) -> None:
    import subprocess

    from benchmarks.harness.components import require_binary

    require_binary("openssl", "openssl is not installed")
    subprocess.run(documented_openssl_command(), shell=True, cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    cert, key = (tmp_path / "expander.crt").read_bytes(), (tmp_path / "expander.key").read_bytes()
    server, port = start_server(expander, "127.0.0.1", 0, cert, key)
    try:
        # cluster-autoscaler dials the Service name; here that name is mapped to loopback by
        # overriding the name TLS checks, so the SAN is verified as it would be in the cluster.
        credentials = grpc.ssl_channel_credentials(root_certificates=cert)
        options = [("grpc.ssl_target_name_override", "kubejoule-autoscaler-expander.kubejoule-system.svc")]
        with grpc.secure_channel(f"127.0.0.1:{port}", credentials, options=options) as channel:
            answer = raw_client(channel)(
                best_options_request(OPTIONS, TEMPLATES, "bytes").SerializeToString(), timeout=30
            )
        assert [o.nodeGroupId for o in answer.options] == ["ng-big"]
    finally:
        server.stop(grace=None)


def test_pods_differing_only_in_undeclared_fields_count_the_same_requests() -> None:
    # Two pods of one workload: the same containers, but each its own generated volume (PodSpec
    # field 1, undeclared in the subset); a third with another CPU request.
    def encoded(name: str, cpu: str, volume: bytes) -> bytes:
        pod = pending_pod(name, cpu, "1Gi")
        spec_extra = length_delimited(1, length_delimited(1, volume))  # volumes[0].name
        return pod.SerializeToString() + length_delimited(2, spec_extra)

    request = expander_pb2.BestOptionsRequest()
    option = request.options.add(nodeGroupId="ng-big", nodeCount=1)
    option.podBytes.extend([
        encoded("web-a", "1", b"kube-api-access-x7k2q"),
        encoded("web-b", "1", b"kube-api-access-p9m4z"),
        encoded("web-c", "1500m", b"kube-api-access-a1b2c"),
    ])
    request.nodeBytesMap["ng-big"] = TEMPLATES["ng-big"].SerializeToString()
    pods = parse_request(request).options[0].pods
    assert [p.name for p in pods] == ["web-a", "web-b", "web-c"]
    assert [p.requests.cpu_millicores for p in pods] == [1000, 1000, 1500]
    assert pods[0].requests == pods[1].requests
    assert pods[0].requests.memory_bytes == 1024**3
