"""daemonset/components/cloud-provider: the Deployment's arguments are ones the command accepts
and point at what is mounted (configuration, BMC credentials, TLS with the client CA); one
replica, never two at once; on the control plane; no committed configuration, credentials or
key material. (Strict validation runs in test_deploy_manifests.py; the RBAC against the calls in
test_deploy_scheduler_config.py.)"""

from __future__ import annotations

import pytest

from scheduler.cmd.cli import build_parser
from scheduler.config.parse import parse_listen
from tests.helpers.deploy_kustomize import Obj, build, user_kustomization

NAME = "kubejoule-cloud-provider"


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    return build(user_kustomization(tmp_path_factory.mktemp("kustomize"), "overlays/intel", ["cloud-provider"]))


def one(objects: list[Obj], kind: str, name: str = NAME) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def volume_at(pod: Obj, container: Obj, path: str) -> Obj:
    mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"].rstrip("/") + "/"))
    return next(v for v in pod["volumes"] if v["name"] == mount["name"])


def test_arguments_are_accepted_and_point_at_mounted_files(objects: list[Obj]) -> None:
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    (container,) = pod["containers"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "cloud-provider"
    assert volume_at(pod, container, args.provider_config)["configMap"]["name"] == NAME
    for path in (args.tls_cert, args.tls_key, args.client_ca):
        assert volume_at(pod, container, path)["secret"]["secretName"] == "kubejoule-cloud-provider-tls"
    assert volume_at(pod, container, "/etc/kubejoule/bmc/default/username")["secret"]["secretName"] == "kubejoule-bmc-credentials"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert parse_listen(args.listen)[1] == ports["grpc"]
    assert parse_listen(args.metrics_listen)[1] == ports["metrics"]


def test_no_committed_configuration_credentials_or_keys(objects: list[Obj]) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ("ConfigMap", NAME) not in kinds
    assert not [o for o in objects if o["kind"] == "Secret"]
