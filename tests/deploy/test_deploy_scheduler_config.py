"""The scheduler's side of daemonset/: its configuration, command lines, the RBAC each Kubernetes
call needs, and the example KubeSchedulerConfiguration.

KubeSchedulerConfiguration is kube-scheduler's file format, not an API object, so
kubernetes-validate has no schema for it. It is checked against the fields of
kubescheduler.config.k8s.io/v1 that it uses (transcribed below; unknown fields are errors), and
its extender block against the extender Service and the extender's actual HTTP routes.
"""

from __future__ import annotations

import inspect
import re
import urllib.parse
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.helpers.deploy_kustomize import DAEMONSET, Obj, build, user_kustomization

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "kubejoule-system"

# RBAC against the code: tests/deploy/test_deploy_rbac_derived.py.


def composite(tmp_path: Path, *components: str) -> list[Obj]:
    return build(user_kustomization(tmp_path, "overlays/intel", components))


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def container(objects: list[Obj], kind: str, name: str) -> Obj:
    (only,) = find(objects, kind, name)["spec"]["template"]["spec"]["containers"]
    return only


# -- configuration and command lines ------------------------------------------------------------


def scheduler_config(objects: list[Obj]) -> dict[str, Any]:
    text = find(objects, "ConfigMap", "kubejoule-scheduler")["data"]["scheduler.yaml"]
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_configmap_is_a_valid_scheduler_config_that_finds_the_agents() -> None:
    from scheduler.config.parse import config_from_dict

    objects = build(DAEMONSET / "base")
    config = config_from_dict(scheduler_config(objects))
    assert config.mode == "shadow"
    slices = config.telemetry.agents.endpoint_slices
    assert slices is not None
    agent_service = find(objects, "Service", "kubejoule-agent")
    assert (slices.namespace, slices.service) == (
        agent_service["metadata"]["namespace"],
        "kubejoule-agent",
    )
    assert slices.port in {p["name"] for p in agent_service["spec"]["ports"]}


@pytest.mark.parametrize(
    ("kind", "name", "subcommand"),
    [
        ("Deployment", "kubejoule-scheduler", "run"),
        ("Deployment", "kubejoule-extender", "extender"),
    ],
)
def test_scheduler_args_parse_and_the_port_serves_probes(
    kind: str, name: str, subcommand: str, tmp_path: Path
) -> None:
    from scheduler.cmd import cli

    parser = cli.build_parser()
    objects = composite(tmp_path, "extender")
    spec = container(objects, kind, name)
    args = parser.parse_args(spec["args"])
    assert args.command == subcommand
    config_path = spec["args"][spec["args"].index("--config") + 1]
    mount = next(m for m in spec["volumeMounts"] if config_path.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    port = int(args.listen.rsplit(":", 1)[1])
    (declared,) = spec["ports"]
    assert declared["containerPort"] == port
    for probe in ("readinessProbe", "livenessProbe"):
        assert spec[probe]["httpGet"]["port"] == declared["name"]


def test_leader_election_uses_the_lease_the_role_allows() -> None:
    from scheduler.cmd import cli

    parser = cli.build_parser()
    objects = build(DAEMONSET / "base")
    spec = container(objects, "Deployment", "kubejoule-scheduler")
    args = parser.parse_args(spec["args"])
    assert args.leader_elect is True
    # No --lease-namespace: the CLI takes $POD_NAMESPACE, which the Deployment sets from the pod.
    env = {
        e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in spec["env"]
    }
    assert args.lease_namespace is None and env["POD_NAMESPACE"] == "metadata.namespace"
    assert env["POD_NAME"] == "metadata.name"  # the replica's identity in the Lease
    role = find(objects, "Role", "kubejoule-scheduler")
    assert role["metadata"]["namespace"] == NAMESPACE
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named and all(r["resourceNames"] == [args.lease_name] for r in named)
    decision_log = args.decision_log
    mount = next(m for m in spec["volumeMounts"] if decision_log.startswith(m["mountPath"] + "/"))
    assert not mount.get("readOnly")


# -- the example KubeSchedulerConfiguration ---------------------------------------------------

DURATION = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
KUBE_SCHEDULER_CONFIGURATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind"],
    "properties": {
        "apiVersion": {"const": "kubescheduler.config.k8s.io/v1"},
        "kind": {"const": "KubeSchedulerConfiguration"},
        "clientConnection": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kubeconfig": {"type": "string"},
                "qps": {"type": "number"},
                "burst": {"type": "integer"},
            },
        },
        "leaderElection": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "leaderElect": {"type": "boolean"},
                "resourceNamespace": {"type": "string"},
                "resourceName": {"type": "string"},
            },
        },
        "profiles": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "schedulerName": {"type": "string"},
                    "plugins": {"type": "object"},
                    "pluginConfig": {"type": "array"},
                },
            },
        },
        "extenders": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["urlPrefix"],
                "properties": {
                    "urlPrefix": {"type": "string"},
                    "filterVerb": {"type": "string"},
                    "preemptVerb": {"type": "string"},
                    "prioritizeVerb": {"type": "string"},
                    "bindVerb": {"type": "string"},
                    "weight": {"type": "integer", "minimum": 1},
                    "enableHTTPS": {"type": "boolean"},
                    "tlsConfig": {"type": "object"},
                    "httpTimeout": {"type": "string", "pattern": DURATION},
                    "nodeCacheCapable": {"type": "boolean"},
                    "managedResources": {"type": "array"},
                    "ignorable": {"type": "boolean"},
                },
            },
        },
    },
}
EXAMPLES = [
    DAEMONSET / "components" / "extender" / "kube-scheduler-config.yaml",
    ROOT / "scheduler" / "examples" / "kube-scheduler-config.yaml",
]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_kube_scheduler_configuration_calls_the_extender_service(
    path: Path, tmp_path: Path
) -> None:
    if not path.exists():
        pytest.skip(f"{path} is not there")
    config = yaml.safe_load(path.read_text())
    jsonschema.validate(config, KUBE_SCHEDULER_CONFIGURATION_SCHEMA)
    (extender,) = config["extenders"]
    url = urllib.parse.urlsplit(extender["urlPrefix"])
    assert url.hostname is not None
    service_name, namespace, *_ = url.hostname.split(".")
    service = find(composite(tmp_path, "extender"), "Service", service_name)
    assert service["metadata"]["namespace"] == namespace
    assert url.port in {p["port"] for p in service["spec"]["ports"]}
    assert url.scheme == ("https" if extender.get("enableHTTPS") else "http")
    # Small requests at scale, and pods still scheduled if the extender is down.
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is True
    assert re.fullmatch(DURATION, extender["httpTimeout"])


def test_extender_verbs_are_routes_of_the_extender_app() -> None:
    from scheduler.extender import app as extender_module

    source = inspect.getsource(extender_module.create_app)
    routes = set(re.findall(r'@app\.post\("/(\w+)"\)', source))
    config = yaml.safe_load(EXAMPLES[0].read_text())
    (extender,) = config["extenders"]
    verbs = {
        extender[k]
        for k in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb")
        if k in extender
    }
    assert verbs and verbs <= routes


def test_the_extender_speaks_https_only(tmp_path: Path) -> None:
    objects = composite(tmp_path, "extender")
    pod = find(objects, "Deployment", "kubejoule-extender")["spec"]["template"]["spec"]
    (only,) = pod["containers"]
    args = only["args"]
    mounts = {m["name"]: m["mountPath"] for m in only["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert args[args.index("--tls-cert") + 1] == mounts["tls"] + "/tls.crt"
    assert args[args.index("--tls-key") + 1] == mounts["tls"] + "/tls.key"
    assert volumes["tls"]["secret"]["secretName"] == "kubejoule-extender-tls"
    assert {only[p]["httpGet"]["scheme"] for p in ("livenessProbe", "readinessProbe")} == {"HTTPS"}
    (extender,) = yaml.safe_load((DAEMONSET / "components/extender/kube-scheduler-config.yaml").read_text())["extenders"]
    assert extender["enableHTTPS"] is True and extender["urlPrefix"].startswith("https://")
    assert extender["tlsConfig"].get("insecure", False) is False and extender["tlsConfig"]["caFile"]
