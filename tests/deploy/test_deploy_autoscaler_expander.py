"""daemonset/components/autoscaler-expander: the Deployment's arguments are ones the command
accepts and point at what is mounted; no API access, no committed key material; the Service and
probes reach the ports the server listens on. (Strict validation of every object runs in
test_deploy_manifests.py with this component included.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cmd.cli import build_parser
from scheduler.config.parse import parse_listen
from tests.helpers.deploy_kustomize import Obj, build, user_kustomization

NAME = "kubejoule-autoscaler-expander"
SECRET = "kubejoule-autoscaler-expander-tls"


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    directory = tmp_path_factory.mktemp("kustomize")
    return build(user_kustomization(directory, "overlays/intel", ["autoscaler-expander"]))


def one(objects: list[Obj], kind: str, name: str = NAME) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def mounted_volume(pod: Obj, container: Obj, path: str) -> Obj:
    mount = next(
        m for m in container["volumeMounts"]
        if path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")
    )
    return next(v for v in pod["volumes"] if v["name"] == mount["name"])


def test_arguments_are_accepted_and_point_at_mounted_files(objects: list[Obj]) -> None:
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "autoscaler-expander"
    assert mounted_volume(pod, container, args.tls_cert)["secret"]["secretName"] == SECRET
    assert mounted_volume(pod, container, args.tls_key)["secret"]["secretName"] == SECRET
    assert Path(args.tls_cert).name == "tls.crt" and Path(args.tls_key).name == "tls.key"
    config = mounted_volume(pod, container, args.config)["configMap"]["name"]
    assert "scheduler.yaml" in one(objects, "ConfigMap", config)["data"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert parse_listen(args.listen)[1] == ports["grpc"]
    assert parse_listen(args.metrics_listen)[1] == ports["metrics"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] == "metrics"


def test_no_api_access_and_no_committed_key_material(objects: list[Obj]) -> None:
    account = one(objects, "ServiceAccount")
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert account["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == NAME
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert all(s.get("name") != NAME for s in binding.get("subjects", []))
    assert not [o for o in objects if o["kind"] == "Secret"]
    for path in Path(__file__).resolve().parents[2].joinpath("daemonset").rglob("*"):
        if path.is_file():
            assert "PRIVATE KEY" not in path.read_text(errors="replace"), path


def test_the_service_reaches_the_grpc_port_cluster_autoscaler_dials(objects: list[Obj]) -> None:
    service = one(objects, "Service")
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert ports["grpc"]["port"] == 8443 and ports["grpc"]["targetPort"] == "grpc"
    assert service["metadata"]["namespace"] == "kubejoule-system"


def test_the_request_limit_is_sized_to_real_requests_and_the_memory_limit(objects: list[Obj]) -> None:
    # The largest requests bench_expander.py builds are about 20 MiB; decoding one costs several
    # times its size. 256 MiB once let one request approach the 1 Gi limit.
    from common.quantity import quantity_units
    from scheduler.autoscaler import DEFAULT_MAX_REQUEST_BYTES

    (container,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    limit = int(args[args.index("--max-request-bytes") + 1]) if "--max-request-bytes" in args else DEFAULT_MAX_REQUEST_BYTES
    assert 20 * 2**20 <= limit <= 64 * 2**20
    assert limit * 8 <= quantity_units(container["resources"]["limits"]["memory"])
