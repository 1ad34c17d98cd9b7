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

# Every Kubernetes call in scheduler/cluster/kube.py and agent/kube.py, and the permission it needs:
# (API group, resource, verb, scope) with scope "cluster" or "namespace" (kubejoule-system only).
SCHEDULER_CALLS: dict[str, list[tuple[str, str, str, str]]] = {
    "make_api_client": [],
    "list_endpoint_slices": [("discovery.k8s.io", "endpointslices", "list", "namespace")],
    "list_node_metrics": [("metrics.k8s.io", "nodes", "list", "cluster")],
    "list_nodes_json": [("", "nodes", "list", "cluster")],
    "list_pods": [("", "pods", "list", "cluster")],
    "list_nodes": [("", "nodes", "list", "cluster")],
    "watch_pods": [("", "pods", "watch", "cluster")],
    "watch_nodes": [("", "nodes", "watch", "cluster")],
    "get_pod": [("", "pods", "get", "cluster")],
    "bind_pod": [("", "pods/binding", "create", "cluster")],
    "patch_pod": [("", "pods", "patch", "cluster")],
    "patch_pod_status": [("", "pods/status", "patch", "cluster")],
    "create_event": [("", "events", "create", "cluster")],
    "patch_event": [("", "events", "patch", "cluster")],
    "get_lease": [("coordination.k8s.io", "leases", "get", "namespace")],
    "create_lease": [("coordination.k8s.io", "leases", "create", "namespace")],
    "replace_lease": [("coordination.k8s.io", "leases", "update", "namespace")],
    "evict_pod": [("", "pods/eviction", "create", "cluster")],
    "list_pod_disruption_budgets": [("policy", "poddisruptionbudgets", "list", "cluster")],
    "get_node": [("", "nodes", "get", "cluster")],
    "patch_node": [("", "nodes", "patch", "cluster")],
}
# Calls only the rebalancer makes (its own ServiceAccount), and every call it makes.
REBALANCER_ONLY = ("evict_pod", "list_pod_disruption_budgets", "get_node", "patch_node")
REBALANCER_CALLS = (
    *REBALANCER_ONLY, "list_pods", "list_nodes", "watch_pods", "watch_nodes", "create_event",
    "get_lease", "create_lease", "replace_lease", "list_endpoint_slices", "list_node_metrics",
    "list_nodes_json",
)
# What the extender process calls (the telemetry store's sources only).
EXTENDER_CALLS = ("list_endpoint_slices", "list_node_metrics", "list_nodes_json")
AGENT_CALLS: dict[str, list[tuple[str, str, str, str]]] = {
    "list_node_pods": [("", "pods", "list", "cluster")],
    "watch_node_pods": [("", "pods", "watch", "cluster")],
    "get_node_metrics": [("metrics.k8s.io", "nodes", "get", "cluster")],
    "get_pod_metrics": [("metrics.k8s.io", "pods", "get", "cluster")],
    "list_pod_metrics": [("metrics.k8s.io", "pods", "list", "cluster")],
}
AGENT_LOCAL_METHODS = {"connect", "node_selector", "stop_watches", "close"}


def composite(tmp_path: Path, *components: str) -> list[Obj]:
    return build(user_kustomization(tmp_path, "overlays/intel", components))


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def granted(objects: list[Obj], account: str) -> set[tuple[str, str, str, str]]:
    """Permissions of a ServiceAccount through its (Cluster)RoleBindings, with their scope."""
    result = set()
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["name"] == account for s in binding["subjects"]):
            continue
        role = find(objects, binding["roleRef"]["kind"], binding["roleRef"]["name"])
        scope = "cluster" if binding["kind"] == "ClusterRoleBinding" else "namespace"
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        result.add((group, resource, verb, scope))
                        if scope == "cluster":  # a cluster grant also covers the namespace
                            result.add((group, resource, verb, "namespace"))
    return result


def container(objects: list[Obj], kind: str, name: str) -> Obj:
    (only,) = find(objects, kind, name)["spec"]["template"]["spec"]["containers"]
    return only


# -- RBAC follows the code ----------------------------------------------------------------------


def test_every_scheduler_api_call_is_in_the_permission_table() -> None:
    from scheduler.cluster import kube

    public = {
        name
        for name, fn in inspect.getmembers(kube, inspect.isfunction)
        if fn.__module__ == kube.__name__ and not name.startswith("_")
    }
    assert public == set(SCHEDULER_CALLS), (
        "a new Kubernetes call: add it to SCHEDULER_CALLS and the RBAC"
    )


def test_scheduler_service_account_may_make_every_call(tmp_path: Path) -> None:
    have = granted(build(DAEMONSET / "base"), "kubejoule-scheduler")
    for call, needs in SCHEDULER_CALLS.items():
        if call in REBALANCER_ONLY:
            continue
        for need in needs:
            assert need in have, f"{call} needs {need}"
    # the scheduler never evicts nor changes nodes: that is the rebalancer's, on its own account
    assert not {n for call in REBALANCER_ONLY for n in SCHEDULER_CALLS[call]
                if n[2] != "get"} & have


def test_rebalancer_service_account_may_make_its_calls(tmp_path: Path) -> None:
    have = granted(composite(tmp_path, "rebalancer"), "kubejoule-rebalancer")
    for call in REBALANCER_CALLS:
        for need in SCHEDULER_CALLS[call]:
            assert need in have, f"{call} needs {need}"


def test_extender_service_account_may_make_its_calls_and_no_writes(tmp_path: Path) -> None:
    have = granted(composite(tmp_path, "extender"), "kubejoule-extender")
    for call in EXTENDER_CALLS:
        for need in SCHEDULER_CALLS[call]:
            assert need in have, f"{call} needs {need}"
    assert {verb for _group, _resource, verb, _scope in have} <= {"get", "list", "watch"}


def test_every_agent_api_call_is_in_the_permission_table() -> None:
    from agent import kube

    client_class = next(
        cls
        for _name, cls in inspect.getmembers(kube, inspect.isclass)
        if cls.__module__ == kube.__name__ and hasattr(cls, "list_node_pods")
    )
    methods = {
        name
        for name in vars(client_class)
        if not name.startswith("_") and callable(getattr(client_class, name))
    }
    assert methods == set(AGENT_CALLS) | AGENT_LOCAL_METHODS, (
        "a new call: add it to AGENT_CALLS and the RBAC"
    )
    have = granted(build(DAEMONSET / "base"), "kubejoule-agent")
    for call, needs in AGENT_CALLS.items():
        for need in needs:
            assert need in have, f"agent {call} needs {need}"


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
    from scheduler import cli

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
    from scheduler import cli

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
