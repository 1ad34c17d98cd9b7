"""The manifests on the real API server, and each component's permissions proven with its own
ServiceAccount's token.

Every kustomize target (the intel and amd overlays, and intel with every component) is applied
server-side: the real API server admits and validates each object (workloads with dryRun=All,
so that no agent or scheduler pod lands on the session's KWOK nodes; namespaces, accounts, RBAC,
services, ConfigMaps and PDBs for real). Then, for each component, a token is requested for its
ServiceAccount (TokenRequest) and the calls its code makes are made with it — allowed — and calls
outside its needs are made too — refused with 403, the message naming the verb and resource.
Writes are sent with dryRun=All: authorization and validating admission happen before the dry
run, nothing is stored. The ValidatingAdmissionPolicies that fence the remaining cluster-wide
patches and deletions (the scheduler's pod status, the rebalancer's and the cloud provider's
nodes) are evaluated by the real API server: the change each component makes is admitted, a
change beyond it denied with the policy's message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rl.cluster.api import Api, ApiError
from rl.cluster.controlplane import Cluster
from tests.helpers.deploy_kustomize import DAEMONSET, build, user_kustomization
from tests.helpers.deploy_manifests import COMPONENTS
from tests.helpers.e2e_apply import apply, discover
from tests.helpers.e2e_cluster import eventually
from tests.helpers.e2e_components import delete_quietly

NS = "kubejoule-system"
AGENT_NS = "kubejoule-node"  # the agents' own namespace, the only privileged one
STORED_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                "ConfigMap", "Service", "PodDisruptionBudget", "NetworkPolicy",
                "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
MERGE = "application/merge-patch+json"
DRY = "dryRun=All"


def _targets(tmp: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        "overlays/intel": build(DAEMONSET / "overlays/intel"),
        "overlays/amd": build(DAEMONSET / "overlays/amd"),
        "intel+all-components": build(user_kustomization(tmp, "overlays/intel", COMPONENTS)),
    }


@pytest.fixture(scope="module")
def applied(plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = plane.get()
    api = cluster.admin()
    resources = discover(api)
    targets = _targets(tmp_path_factory.mktemp("kustomize"))
    everything = targets["intel+all-components"]
    stored = sorted((o for o in everything if o["kind"] in STORED_KINDS), key=lambda o: o["kind"] != "Namespace")
    unserved = apply(api, resources, stored)
    assert unserved == []
    for name, objects in targets.items():
        workloads = [o for o in objects if o["kind"] not in STORED_KINDS]
        left = apply(api, resources, workloads, dry_run=True)
        # Only the Prometheus operator's ServiceMonitor needs a CRD this cluster does not have.
        assert {o["kind"] for o in left} <= {"ServiceMonitor"}, name
    yield cluster


def _token(cluster: Cluster, account: str, namespace: str = NS) -> Api:
    answer = cluster.admin().request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    return cluster.api_as(answer["status"]["token"])


def _allowed(api: Api, method: str, path: str, body: Any = None) -> None:
    """Authorized: any answer but 403 (404 for an object that is not there, 409, 422 are past RBAC)."""
    try:
        api.request(method, path, body)
    except ApiError as exc:
        assert exc.status != 403, str(exc)


def _refused(api: Api, method: str, path: str, body: Any = None, *, names: str) -> None:
    with pytest.raises(ApiError) as refused:
        api.request(method, path, body)
    assert refused.value.status == 403, str(refused.value)
    assert names in str(refused.value), str(refused.value)


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/none"}]}}


def _event(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name}, "reason": "Scheduled",
            "type": "Normal", "message": "e2e", "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}}


def _eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}}


def _binding(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "nowhere"}}


def test_the_agent_reads_its_nodes_pods_and_nothing_else(applied: Cluster) -> None:
    agent = _token(applied, "kubejoule-agent", AGENT_NS)
    _allowed(agent, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")
    _allowed(agent, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&watch=true&timeoutSeconds=1")
    _refused(agent, "POST", f"/api/v1/namespaces/default/pods?{DRY}", _pod("x"), names='cannot create resource "pods"')
    _refused(agent, "GET", "/api/v1/namespaces/kube-system/secrets", names='cannot list resource "secrets"')
    _refused(agent, "GET", "/api/v1/nodes", names='cannot list resource "nodes"')


def test_the_scheduler_binds_reads_and_reports_but_cannot_create_or_delete_pods(applied: Cluster) -> None:
    scheduler = _token(applied, "kubejoule-scheduler")
    _allowed(scheduler, "GET", "/api/v1/pods")
    _allowed(scheduler, "GET", "/api/v1/nodes")
    _allowed(scheduler, "POST", f"/api/v1/namespaces/default/pods/absent/binding?{DRY}", _binding("absent"))
    _allowed(scheduler, "POST", f"/api/v1/namespaces/default/events?{DRY}", _event("e2e.1"))
    _allowed(scheduler, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/kubejoule-scheduler")
    _refused(scheduler, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/someone-else",
             names='cannot get resource "leases"')
    _refused(scheduler, "DELETE", f"/api/v1/namespaces/default/pods/absent?{DRY}", names='cannot delete resource "pods"')
    # Shadow mode tells its pick in an Event: patching a pod (its image, say) is no right of it.
    _refused(scheduler, "PATCH", f"/api/v1/namespaces/default/pods/absent?{DRY}", {}, names='cannot patch resource "pods"')
    _refused(scheduler, "POST", f"/api/v1/namespaces/default/pods?{DRY}", _pod("x"), names='cannot create resource "pods"')
    _refused(scheduler, "GET", "/api/v1/namespaces/kube-system/secrets", names='cannot list resource "secrets"')
    _refused(scheduler, "DELETE", f"/api/v1/nodes/absent?{DRY}", names='cannot delete resource "nodes"')


def test_the_extender_only_reads(applied: Cluster) -> None:
    extender = _token(applied, "kubejoule-extender")
    _allowed(extender, "GET", "/api/v1/nodes")
    _allowed(extender, "GET", "/api/v1/pods")
    _allowed(extender, "GET", f"/apis/discovery.k8s.io/v1/namespaces/{AGENT_NS}/endpointslices")
    _refused(extender, "POST", f"/api/v1/namespaces/default/pods/absent/binding?{DRY}", _binding("absent"),
             names='cannot create resource "pods/binding"')
    _refused(extender, "PATCH", f"/api/v1/nodes/absent?{DRY}", {}, names='cannot patch resource "nodes"')


def test_the_rebalancer_evicts_but_never_deletes(applied: Cluster) -> None:
    rebalancer = _token(applied, "kubejoule-rebalancer")
    _allowed(rebalancer, "GET", "/api/v1/pods")
    _allowed(rebalancer, "GET", "/apis/policy/v1/poddisruptionbudgets")
    _allowed(rebalancer, "POST", f"/api/v1/namespaces/default/pods/absent/eviction?{DRY}", _eviction("absent"))
    _refused(rebalancer, "DELETE", f"/api/v1/namespaces/default/pods/absent?{DRY}", names='cannot delete resource "pods"')
    _refused(rebalancer, "POST", f"/api/v1/namespaces/default/pods/absent/binding?{DRY}", _binding("absent"),
             names='cannot create resource "pods/binding"')
    _refused(rebalancer, "GET", "/api/v1/namespaces/kube-system/secrets", names='cannot list resource "secrets"')


def test_the_expander_has_no_kubernetes_rights(applied: Cluster) -> None:
    expander = _token(applied, "kubejoule-autoscaler-expander")
    _refused(expander, "GET", "/api/v1/pods", names='cannot list resource "pods"')
    _refused(expander, "GET", "/api/v1/nodes", names='cannot list resource "nodes"')


def test_the_cloud_provider_reads_nodes_and_pods_deletes_nodes_and_creates_none(applied: Cluster) -> None:
    provider = _token(applied, "kubejoule-cloud-provider")
    _allowed(provider, "GET", "/api/v1/nodes/absent")
    _allowed(provider, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")
    _allowed(provider, "PATCH", f"/api/v1/nodes/absent?{DRY}", {})
    _allowed(provider, "DELETE", f"/api/v1/nodes/absent?{DRY}")
    _allowed(provider, "POST", f"/api/v1/namespaces/default/events?{DRY}",
             {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e2e.2"},
              "involvedObject": {"kind": "Node", "name": "absent"}, "reason": "PoweredOff", "type": "Normal"})
    _refused(provider, "POST", f"/api/v1/nodes?{DRY}", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}},
             names='cannot create resource "nodes"')
    _refused(provider, "DELETE", f"/api/v1/namespaces/default/pods/absent?{DRY}", names='cannot delete resource "pods"')
    _refused(provider, "GET", "/api/v1/namespaces/kube-system/secrets", names='cannot list resource "secrets"')


def _patch(api: Api, path: str, patch: dict[str, Any]) -> None:
    api.request("PATCH", f"{path}?{DRY}", json.dumps(patch).encode(), content_type=MERGE)


def _denied(api: Api, path: str, patch: dict[str, Any], *, policy: str) -> str:
    with pytest.raises(ApiError) as denied:
        _patch(api, path, patch)
    assert denied.value.status in (403, 422) and policy in str(denied.value), str(denied.value)
    return str(denied.value)


def _fence_node(cluster: Cluster, name: str, **spec: Any) -> str:
    path = f"/api/v1/nodes/{name}"
    delete_quietly(cluster.admin(), path, now=True)
    cluster.admin().request("POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"zone": "a"}, "annotations": {"other": "x"}},
        "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], **spec},
    })
    return path


def test_the_admission_policies_fence_node_patches_on_the_real_api(applied: Cluster) -> None:
    path = _fence_node(applied, "e2e-fenced")
    rebalancer = _token(applied, "kubejoule-rebalancer")
    # A policy is compiled and loaded by the API server a moment after it is stored.
    eventually(lambda: _try_denied(rebalancer, path, {"metadata": {"labels": {"zone": "b"}}}), 30,
               "the rebalancer's node policy in force")
    _patch(rebalancer, path, {"metadata": {"annotations": {"kubejoule.io/rebalance": "{}"}}})
    # Taints are replaced as a whole: the rebalancer sends the node's own with its own added, under
    # the node's resourceVersion (scheduler/rebalancer does); dropping another's taint is denied.
    ours = {"key": "kubejoule.io/rebalancing", "effect": "NoSchedule"}
    _patch_taints(applied, rebalancer, path, lambda others: [*others, ours])
    with pytest.raises(ApiError) as dropped:
        _patch_taints(applied, rebalancer, path, lambda others: [ours])
    assert "kubejoule-rebalancer-node-patch" in str(dropped.value)
    _denied(rebalancer, path, {"spec": {"unschedulable": True}}, policy="kubejoule-rebalancer-node-patch")
    _denied(rebalancer, path, {"metadata": {"annotations": {"other": "changed"}}}, policy="kubejoule-rebalancer-node-patch")
    provider = _token(applied, "kubejoule-cloud-provider")
    eventually(lambda: _try_denied(provider, path, {"metadata": {"labels": {"zone": "b"}}}), 30,
               "the cloud provider's node policy in force")
    _patch(provider, path, {"metadata": {"annotations": {"kubejoule.io/power-shadow": "{}"}}})
    _denied(provider, path, {"spec": {"providerID": "kubejoule://elsewhere"}}, policy="kubejoule-cloud-provider-node-patch")
    with pytest.raises(ApiError) as refused:
        provider.request("DELETE", f"{path}?{DRY}")  # schedulable: never
    assert "kubejoule-cloud-provider-node-delete" in str(refused.value)
    drained = _fence_node(applied, "e2e-drained", unschedulable=True)
    provider.request("DELETE", f"{drained}?{DRY}")
    applied.admin().request("DELETE", path)
    applied.admin().request("DELETE", drained)


def _patch_taints(cluster: Cluster, api: Api, path: str, taints: Any) -> None:
    """Patch the node's taints to `taints(current)` under its resourceVersion, again on a conflict
    (the controller manager taints and untaints new nodes on its own)."""
    for _ in range(20):
        node = cluster.admin().request("GET", path)
        patch = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                 "spec": {"taints": taints(node["spec"].get("taints", []))}}
        try:
            _patch(api, path, patch)
            return
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise AssertionError(f"{path}: 20 conflicts in a row")


def _try_denied(api: Api, path: str, patch: dict[str, Any]) -> bool:
    try:
        _patch(api, path, patch)
    except ApiError as exc:
        return "denied request" in str(exc)
    return False


def test_the_scheduler_may_set_the_pod_scheduled_condition_and_nothing_else(applied: Cluster) -> None:
    api = applied.admin()
    api.request("POST", "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-fenced-pod", "labels": {"app": "x"}},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "registry.invalid/none"}]},
    })
    try:
        scheduler = _token(applied, "kubejoule-scheduler")
        path = "/api/v1/namespaces/default/pods/e2e-fenced-pod/status"
        unschedulable = {"status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                                    "reason": "Unschedulable", "message": "0/3 nodes are available"}]}}
        eventually(lambda: _try_denied(scheduler, path, {"status": {"phase": "Running"}}), 30,
                   "the scheduler's pod status policy in force")
        _patch(scheduler, path, unschedulable)
        _denied(scheduler, path, {"metadata": {"labels": {"app": "y"}}}, policy="kubejoule-scheduler-pod-status")
        _denied(scheduler, path, {"status": {"phase": "Failed"}}, policy="kubejoule-scheduler-pod-status")
    finally:
        api.request("DELETE", "/api/v1/namespaces/default/pods/e2e-fenced-pod")


def test_the_cloud_provider_and_agent_accounts_have_only_their_own_rights(applied: Cluster) -> None:
    provider = _token(applied, "kubejoule-cloud-provider")
    _allowed(provider, "GET", "/api/v1/nodes/absent")
    _allowed(provider, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")
    _refused(provider, "POST", f"/api/v1/nodes?{DRY}", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}},
             names='cannot create resource "nodes"')
    _refused(provider, "GET", "/api/v1/namespaces/kube-system/secrets", names='cannot list resource "secrets"')
