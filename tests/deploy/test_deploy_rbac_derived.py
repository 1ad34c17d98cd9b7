"""RBAC follows the code: each component's Kubernetes calls, derived from its code
(tests/helpers/rbac_calls.py), need exactly the rules its ServiceAccount is granted — a verb no
code uses fails as surely as a missing one. Cluster-wide writes are binding, Events, evictions
and what a ValidatingAdmissionPolicy fences; the policies' CEL is evaluated here (cel-python) on
the changes the code makes and on the ones it must never make."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import celpy
import pytest

from tests.helpers import rbac_calls
from tests.helpers.deploy_kustomize import Obj

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
# Cluster-wide writes that need no fence: placing a pod, telling about it, and the rebalancer's
# evictions (the Eviction API enforces PodDisruptionBudgets).
UNFENCED_WRITES = {("", "pods/binding"), ("", "events"), ("", "pods/eviction")}


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    return rbac_calls.built(tmp_path_factory.mktemp("rbac"))


@pytest.mark.parametrize("account", list(rbac_calls.ACCOUNTS))
def test_each_account_is_granted_exactly_what_its_code_calls(account: str, objects: list[Obj]) -> None:
    needed, granted = rbac_calls.needed(account), rbac_calls.granted(objects, account)
    assert not needed - granted, f"{account}: its code calls what its role does not grant"
    assert not granted - needed, f"{account}: its role grants what no code of it calls"


def test_every_adapter_call_has_its_rule() -> None:
    from agent.kube import client as agent_kube
    from scheduler.cluster import kube as scheduler_kube

    functions = {
        name for name, fn in inspect.getmembers(scheduler_kube, inspect.isfunction)
        if fn.__module__ == scheduler_kube.__name__ and not name.startswith("_")
    }
    assert functions == set(scheduler_kube.PERMISSIONS)
    client = agent_kube.KubeClient
    methods = {n for n in vars(client) if not n.startswith("_") and callable(getattr(client, n))}
    local = {"connect", "node_selector", "stop_watches", "close"}  # no API call
    assert methods - local == set(agent_kube.PERMISSIONS)


def test_the_shadow_recommendation_needs_no_pod_patch() -> None:
    # Patching a pod can change its image: no component's code may call such a thing.
    from scheduler.cluster import kube

    assert "patch_pod" not in kube.PERMISSIONS
    for account in rbac_calls.ACCOUNTS:
        assert ("", "pods", "patch", "cluster") not in rbac_calls.needed(account)


def test_the_expander_has_no_token_and_no_role(objects: list[Obj]) -> None:
    name = "kubejoule-autoscaler-expander"
    (account,) = [o for o in objects if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == name]
    assert account["automountServiceAccountToken"] is False
    assert rbac_calls.grants(objects, name) == []


def _policies(objects: list[Obj]) -> dict[str, Obj]:
    bound = {o["spec"]["policyName"] for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
             and o["spec"]["validationActions"] == ["Deny"]}
    return {o["metadata"]["name"]: o for o in objects
            if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] in bound}


# The verbs an admission policy's operation fences.
FENCED_VERBS = {"UPDATE": ("update", "patch"), "DELETE": ("delete",), "CREATE": ("create",)}


def _fenced(policies: dict[str, Obj], account: str) -> set[tuple[str, str, str]]:
    """(group, resource, verb) whose writes by ACCOUNT a bound policy checks."""
    username = f"system:serviceaccount:kubejoule-system:{account}"
    out = set()
    for policy in policies.values():
        spec = policy["spec"]
        if spec["failurePolicy"] != "Fail" or not any(username in c["expression"] for c in spec["matchConditions"]):
            continue
        for rule in spec["matchConstraints"]["resourceRules"]:
            out |= {(g, r, verb) for g in rule["apiGroups"] for r in rule["resources"]
                    for op in rule["operations"] for verb in FENCED_VERBS.get(op, ())}
    return out


@pytest.mark.parametrize("account", list(rbac_calls.ACCOUNTS))
def test_cluster_wide_writes_are_binding_events_evictions_or_fenced(account: str, objects: list[Obj]) -> None:
    fenced = _fenced(_policies(objects), account)
    for group, resource, verb, scope in rbac_calls.granted(objects, account):
        if scope == "cluster" and verb in WRITE_VERBS:
            assert (group, resource) in UNFENCED_WRITES or (group, resource, verb) in fenced, (account, group, resource, verb)


# -- the policies' expressions ---------------------------------------------------------------------


def _admits(policy: Obj, old: dict[str, Any], new: dict[str, Any]) -> bool:
    env = celpy.Environment()
    activation = {"object": celpy.json_to_cel(new), "oldObject": celpy.json_to_cel(old)}
    return all(
        bool(env.program(env.compile(v["expression"])).evaluate(activation)) for v in policy["spec"]["validations"]
    )


NODE: dict[str, Any] = {
    "metadata": {"name": "n1", "labels": {"zone": "a"}, "annotations": {"other": "x"}},
    "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"},
}


def _node(**changes: Any) -> dict[str, Any]:
    node = copy.deepcopy(NODE)
    for path, value in changes.items():
        section, _, key = path.partition("__")
        node[section][key] = value
    return node


def test_the_rebalancer_may_set_its_taint_and_annotation_and_nothing_else(objects: list[Obj]) -> None:
    from scheduler.rebalancer.cluster import REBALANCING_TAINT
    from scheduler.rebalancer.loop import ANNOTATION

    policy = _policies(objects)["kubejoule-rebalancer-node-patch"]
    ours = {"key": REBALANCING_TAINT, "value": "", "effect": "NoSchedule"}
    assert _admits(policy, NODE, _node(spec__taints=[*NODE["spec"]["taints"], ours]))
    assert _admits(policy, _node(spec__taints=[*NODE["spec"]["taints"], ours]), NODE)
    assert _admits(policy, NODE, _node(metadata__annotations={"other": "x", ANNOTATION: "{}"}))
    for forbidden in (
        _node(metadata__labels={"zone": "a", "node-role.kubernetes.io/control-plane": ""}),
        _node(metadata__annotations={"other": "changed"}),
        _node(metadata__annotations={}),
        _node(spec__taints=[]),
        _node(spec__unschedulable=True),
        _node(spec__podCIDR="10.9.9.0/24"),
    ):
        assert not _admits(policy, NODE, forbidden), forbidden


POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"app": "web"}, "annotations": {"a": "1"}},
    "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]},
}


def test_the_scheduler_may_set_pod_scheduled_and_nothing_else_through_pods_status(objects: list[Obj]) -> None:
    policy = _policies(objects)["kubejoule-scheduler-pod-status"]
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
    new = copy.deepcopy(POD)
    new["status"]["conditions"].append(scheduled)
    assert _admits(policy, POD, new)
    for section, key, value in (
        ("metadata", "labels", {"app": "evil"}),
        ("metadata", "annotations", {}),
        ("status", "phase", "Failed"),
        ("status", "conditions", [{"type": "Ready", "status": "True"}, scheduled]),
        ("status", "podIP", "10.0.0.9"),
    ):
        forbidden = copy.deepcopy(new)
        forbidden[section][key] = value
        assert not _admits(policy, POD, forbidden), (section, key)


def test_the_docs_rbac_table_is_generated_from_the_manifests(objects: list[Obj]) -> None:
    text = rbac_calls.DOC.read_text()
    assert rbac_calls.BEGIN in text and rbac_calls.END in text
    expected = rbac_calls.document_with_table(text, rbac_calls.table(objects))
    assert text == expected, "run `python -m tests.helpers.rbac_calls` to regenerate docs/deploy.md's table"


def test_the_cloud_provider_may_annotate_and_delete_only_drained_nodes(objects: list[Obj]) -> None:
    policies = _policies(objects)
    patch, delete = policies["kubejoule-cloud-provider-node-patch"], policies["kubejoule-cloud-provider-node-delete"]
    assert _admits(patch, NODE, _node(metadata__annotations={"other": "x", "kubejoule.io/power-shadow": "{}"}))
    for forbidden in (
        _node(metadata__labels={"zone": "b"}),
        _node(metadata__annotations={"other": "changed"}),
        _node(spec__taints=[]),
        _node(spec__unschedulable=True),
        _node(spec__providerID="kubejoule://elsewhere"),
    ):
        assert not _admits(patch, NODE, forbidden), forbidden
    assert _admits(delete, _node(spec__unschedulable=True), {})
    drained = _node(spec__taints=[{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}])
    assert _admits(delete, drained, {})
    assert not _admits(delete, NODE, {})  # a schedulable node: never
