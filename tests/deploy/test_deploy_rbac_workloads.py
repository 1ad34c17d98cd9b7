"""daemonset/: RBAC stays least-privilege and matches what each workload does; the scheduler and
rebalancer Deployments are protected, restricted and accepted by their commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.deploy_kustomize import (
    Obj,
    build,
    object_key,
    user_kustomization,
)
from tests.helpers.deploy_manifests import (
    built,
    by_kind,
)

# -- RBAC ------------------------------------------------------------------------------------


def rules_of(objects: list[Obj], kind: str, name: str) -> set[tuple[str, str, str, str]]:
    """(group, resource, verb, resourceName or '') for every rule of a (Cluster)Role."""
    granted = set()
    for rule in by_kind(objects, kind)[name]["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for resource_name in rule.get("resourceNames") or [""]:
                        granted.add((group, resource, verb, resource_name))
    return granted


def test_no_role_uses_wildcards_or_reads_secrets(target: Path) -> None:
    for obj in build(target):
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in obj["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (object_key(obj), rule)
            assert "secrets" not in rule["resources"] and "configmaps" not in rule["resources"]
            forbidden = {"delete", "deletecollection", "escalate", "bind", "impersonate"}
            # The one exception: the bare-metal cloud provider deletes the Node object of a
            # machine it has switched off (as a cloud's node controller does for a deleted
            # instance), and nothing else.
            if obj["metadata"]["name"] == "kubejoule-cloud-provider" and rule["resources"] == ["nodes"]:
                forbidden.discard("delete")
            assert not forbidden & set(rule["verbs"]), (object_key(obj), rule)


def test_agent_cluster_role_is_exactly_pods_its_node_and_metrics(tmp_path: Path) -> None:
    granted = rules_of(built("base", tmp_path), "ClusterRole", "kubejoule-agent")
    assert granted == {
        ("", "pods", "list", ""),
        ("", "pods", "watch", ""),
        ("", "nodes", "get", ""),  # its own Node's instance type (--instance-type auto)
        ("metrics.k8s.io", "nodes", "get", ""),
        ("metrics.k8s.io", "pods", "get", ""),
        ("metrics.k8s.io", "pods", "list", ""),
    }


def test_bindings_point_at_existing_roles_and_service_accounts(target: Path) -> None:
    objects = build(target)
    accounts = by_kind(objects, "ServiceAccount")
    for obj in objects:
        if obj["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        role_kind = obj["roleRef"]["kind"]
        assert obj["roleRef"]["name"] in by_kind(objects, role_kind), object_key(obj)
        for subject in obj["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert subject["name"] in accounts
            assert subject["namespace"] == accounts[subject["name"]]["metadata"]["namespace"]
    for workload_kind in ("DaemonSet", "Deployment"):
        for workload in by_kind(objects, workload_kind).values():
            assert workload["spec"]["template"]["spec"]["serviceAccountName"] in accounts


def test_scheduler_rbac_covers_a_secondary_scheduler(tmp_path: Path) -> None:
    objects = built("base", tmp_path)
    cluster = rules_of(objects, "ClusterRole", "kubejoule-scheduler")
    namespaced = rules_of(objects, "Role", "kubejoule-scheduler")
    needed_cluster = {
        ("", "pods", "list", ""),
        ("", "pods", "watch", ""),
        ("", "pods", "get", ""),
        ("", "pods/binding", "create", ""),
        ("", "pods/status", "patch", ""),  # PodScheduled=False, Unschedulable
        ("", "nodes", "list", ""),
        ("", "nodes", "watch", ""),
        ("", "events", "create", ""),
        ("metrics.k8s.io", "nodes", "list", ""),
    }
    assert needed_cluster <= cluster
    # No pods patch: patching a pod can change its image (shadow mode writes Events instead).
    assert not {r for r in cluster if r[1] == "pods" and r[2] not in ("get", "list", "watch")}
    assert {
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", "kubejoule-scheduler"),
        ("coordination.k8s.io", "leases", "update", "kubejoule-scheduler"),
    } <= namespaced
    assert rules_of(objects, "Role", "kubejoule-scheduler-agents") == {
        ("discovery.k8s.io", "endpointslices", "list", ""),  # in the agents' namespace only
    }
    # Leases and EndpointSlices only in its own namespace, never cluster-wide.
    assert not {r for r in cluster if r[0] in ("coordination.k8s.io", "discovery.k8s.io")}


# -- the scheduler ---------------------------------------------------------------------------


def test_scheduler_runs_two_replicas_spread_and_protected(tmp_path: Path) -> None:
    objects = built("base", tmp_path)
    deployment = by_kind(objects, "Deployment")["kubejoule-scheduler"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    pdb = by_kind(objects, "PodDisruptionBudget")["kubejoule-scheduler"]
    assert pdb["spec"]["minAvailable"] == 1
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["containers"]
    assert container["args"][:1] == ["run"]
    env = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container["env"]
        if "valueFrom" in e
    }
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    config_path = container["args"][container["args"].index("--config") + 1]
    mount = next(
        m for m in container["volumeMounts"] if config_path.startswith(m["mountPath"] + "/")
    )
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    configmap = by_kind(objects, "ConfigMap")[volume["configMap"]["name"]]
    assert Path(config_path).name in configmap["data"]


def test_scheduler_keeps_its_learned_lifetimes_on_a_writable_volume(tmp_path: Path) -> None:
    # energy plugin v3 prices node-time with the lifetime predictor; without --lifetime-state a
    # restarted scheduler forgets every workload's history and prices from priors again.
    from scheduler.cmd import cli

    objects = built("base", tmp_path)
    pod = by_kind(objects, "Deployment")["kubejoule-scheduler"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    parsed = cli.build_parser().parse_args(container["args"])
    assert parsed.lifetime_state
    mount = next(
        m for m in container["volumeMounts"]
        if parsed.lifetime_state.startswith(m["mountPath"] + "/")
    )
    assert not mount.get("readOnly", False)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert "emptyDir" in volume or "persistentVolumeClaim" in volume


@pytest.mark.parametrize(
    "name",
    ["kubejoule-scheduler", "kubejoule-extender", "kubejoule-autoscaler-expander",
     "kubejoule-rebalancer"],
)
def test_scheduler_pods_meet_the_restricted_pod_security_level(name: str, tmp_path: Path) -> None:
    objects = built("intel+all-components", tmp_path)
    pod = by_kind(objects, "Deployment")[name]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert not any(pod.get(k) for k in ("hostPID", "hostNetwork", "hostIPC"))
    assert not any("hostPath" in v for v in pod["volumes"])
    for container in pod["containers"]:
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["readOnlyRootFilesystem"] is True
        assert "limits" in container["resources"] and "memory" in container["resources"]["limits"]


def test_rebalancer_rbac_is_exactly_what_it_does(tmp_path: Path) -> None:
    """Evictions through the Eviction API only (no pod delete), node patches for its taint and
    annotation (no node delete: cluster-autoscaler removes empty nodes), PDBs read, events,
    its own Lease."""
    objects = build(user_kustomization(tmp_path, "overlays/intel", ("rebalancer",)))
    cluster = rules_of(objects, "ClusterRole", "kubejoule-rebalancer")
    namespaced = rules_of(objects, "Role", "kubejoule-rebalancer")
    assert {
        ("", "pods", "list", ""), ("", "pods", "watch", ""),
        ("", "pods/eviction", "create", ""),
        ("", "nodes", "list", ""), ("", "nodes", "watch", ""), ("", "nodes", "get", ""),
        ("", "nodes", "patch", ""),
        ("policy", "poddisruptionbudgets", "list", ""),
        ("", "events", "create", ""),
    } <= cluster
    assert not {r for r in cluster if r[2] == "delete"}
    assert {r[2] for r in cluster if r[1] == "pods"} == {"list", "watch"}
    assert {
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", "kubejoule-rebalancer"),
        ("coordination.k8s.io", "leases", "update", "kubejoule-rebalancer"),
    } <= namespaced
    assert not {r for r in cluster if r[0] in ("coordination.k8s.io", "discovery.k8s.io")}


def test_rebalancer_args_are_accepted_by_its_command(tmp_path: Path) -> None:
    from scheduler.cmd.cli import build_parser

    objects = build(user_kustomization(tmp_path, "overlays/intel", ("rebalancer",)))
    deployment = by_kind(objects, "Deployment")["kubejoule-rebalancer"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "rebalancer" and args.leader_elect
    port = int(args.listen.rpartition(":")[2])
    assert {p["containerPort"] for p in container["ports"]} == {port}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(args.lifetime_state).parent) in mounts  # a writable place for its state
    assert str(Path(args.config).parent) in mounts
    pdb = by_kind(objects, "PodDisruptionBudget")["kubejoule-rebalancer"]
    assert pdb["spec"]["minAvailable"] == 1
