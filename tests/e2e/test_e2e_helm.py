"""The Helm chart on the real control plane: `helm install`, `helm upgrade --set
scheduler.mode=active`, `helm uninstall`, the commands docs/deploy.md and Getting started give, taken
from them and run with the built helm (the release and namespace renamed, our values file and the
kubeconfig added).

The release is kubejoule-e2e in the namespace kubejoule-helm-e2e: test_e2e_rbac.py applies the
kustomize objects into kubejoule-system in the same cluster, and the chart prefixes every name
with the release's (kubejoule-e2e-agent, …), so neither install touches the other's
cluster-scoped RBAC or admission policies. Every part of the chart is switched on except the
ServiceMonitor (this cluster has no Prometheus Operator CRD), and every workload is pointed at a
nodeSelector no node has: the objects are what is tested, no pod lands on the KWOK nodes of the
other tests.

Checked: every object of the release's manifest is on the server; the upgrade changes
scheduler.yaml, the scheduler Deployment's checksum annotation, and the controller manager rolls
a new ReplicaSet for it; values the schema refuses fail `helm install` with the key named and
leave no release and no object; `helm uninstall` leaves nothing of ours — no object of the
manifest, no ReplicaSet or pod made from it, no cluster-scoped role or policy, no release record."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from rl.cluster.api import Api, ApiError
from rl.cluster.controlplane import Cluster
from tests.helpers.deploy_chart import CHART, documented, helm
from tests.helpers.e2e_apply import discover, object_path
from tests.helpers.e2e_cluster import eventually

RELEASE = "kubejoule-e2e"
NS = "kubejoule-helm-e2e"
# The agent's own namespace (Pod Security privileged), which the chart creates: not
# kubejoule-node, where test_e2e_rbac.py applies the kustomize objects.
AGENT_NS = "kubejoule-helm-e2e-node"
NOWHERE = {"kubejoule.io/e2e-no-such-node": "true"}
VALUES: dict[str, Any] = {
    "agent": {
        "namespace": AGENT_NS,
        "nodeSelector": NOWHERE,
        "calibration": {"enabled": True},
        "gpu": {"enabled": True},
        "bmc": {"enabled": True, "credentialsSecret": "kubejoule-e2e-bmc", "urls": {"node-a": "https://10.0.40.11"}},
    },
    "calibrationJob": {"enabled": True, "node": "kubejoule-e2e-no-such-node"},
    "scheduler": {
        "standalone": {"nodeSelector": NOWHERE},
        "extender": {"enabled": True, "nodeSelector": NOWHERE},
        "autoscalerExpander": {"enabled": True, "nodeSelector": NOWHERE, "tls": {"secretName": "kubejoule-e2e-expander-tls"}},
        "rebalancer": {"enabled": True, "nodeSelector": NOWHERE},
        "cloudProvider": {"enabled": True, "nodeSelector": NOWHERE},
    },
    "grafanaDashboards": {"enabled": True},
}
CLUSTER_SCOPED = [
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
]
NAMESPACED = [
    "/apis/apps/v1/namespaces/{ns}/deployments", "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "/apis/apps/v1/namespaces/{ns}/replicasets", "/apis/batch/v1/namespaces/{ns}/jobs",
    "/api/v1/namespaces/{ns}/pods", "/api/v1/namespaces/{ns}/services", "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/serviceaccounts", "/api/v1/namespaces/{ns}/secrets",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
]
# What Kubernetes itself puts in every namespace.
NOT_OURS = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}


def _as_documented(args: list[str]) -> list[str]:
    """A documented command for this test's release: the release `kubejoule` and the namespace
    `kubejoule-system` renamed, nothing else changed."""
    return [RELEASE if a == "kubejoule" else NS if a == "kubejoule-system" else a for a in args]


def _helm(cluster: Cluster, *args: str, check: bool = True) -> Any:
    return helm([*args, "--kubeconfig", str(cluster.kubeconfig)], check=check, timeout=60)


def _get(api: Api, path: str) -> Any:
    try:
        return api.request("GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def _ours(api: Api) -> list[str]:
    """Every object of the release left in the cluster: cluster-scoped ones named after it, and
    anything in its namespace but what Kubernetes puts in every namespace."""
    left = []
    for path in CLUSTER_SCOPED:
        for item in api.request("GET", path)["items"]:
            if item["metadata"]["name"].startswith(f"{RELEASE}-"):
                left.append(f"{path}/{item['metadata']['name']}")
    for ns in (NS, AGENT_NS):
        for path in NAMESPACED:
            listed = api.request("GET", path.format(ns=ns))
            kind = listed["kind"].removesuffix("List")
            for item in listed["items"]:
                if (kind, item["metadata"]["name"]) not in NOT_OURS:
                    left.append(f"{path.format(ns=ns)}/{item['metadata']['name']}")
    if _get(api, f"/api/v1/namespaces/{AGENT_NS}") is not None:
        left.append(f"/api/v1/namespaces/{AGENT_NS}")
    return left


def _scheduler_replicasets(api: Api) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io%2Fname%3D{RELEASE}-scheduler"
    items: list[dict[str, Any]] = api.request("GET", f"/apis/apps/v1/namespaces/{NS}/replicasets?labelSelector={selector}")["items"]
    return items


@pytest.fixture
def values_file(tmp_path: Path) -> Path:
    path = tmp_path / "e2e-values.yaml"
    path.write_text(yaml.safe_dump(VALUES))
    return path


@pytest.fixture
def release(cluster: Cluster) -> Any:
    """Whatever happens in the test, the release and its namespace go at the end."""
    yield cluster
    _helm(cluster, "uninstall", RELEASE, "--namespace", NS, "--ignore-not-found", check=False)
    for ns in (NS, AGENT_NS):
        try:
            cluster.admin().request("DELETE", f"/api/v1/namespaces/{ns}")
        except ApiError as exc:
            if exc.status != 404:
                raise


def test_bad_values_fail_helm_install_naming_the_key_and_install_nothing(release: Cluster) -> None:
    refused = _helm(release, "install", RELEASE, str(CHART), "--namespace", NS, "--create-namespace",
                    "--set", "scheduler.mode=aggressive", check=False)
    assert refused.returncode != 0
    assert "/scheduler/mode" in refused.stderr and "'shadow', 'active'" in refused.stderr, refused.stderr
    api = release.admin()
    assert _get(api, f"/api/v1/namespaces/{NS}") is None, "a refused install created the namespace"
    assert _get(api, f"/api/v1/namespaces/{AGENT_NS}") is None, "a refused install created the agent's namespace"
    listed = _helm(release, "list", "--all-namespaces", "--output", "json")
    assert RELEASE not in {r["name"] for r in json.loads(listed.stdout)}
    assert not [p for p in _ours(api) if "/namespaces/" not in p]


def test_install_upgrade_to_active_and_uninstall_leave_nothing(release: Cluster, values_file: Path) -> None:
    started = time.monotonic()
    api = release.admin()
    resources = discover(api)

    install = _as_documented(documented("install", "daemonset/chart/kubejoule", "--create-namespace"))
    _helm(release, *install, "--values", str(values_file))
    manifest = [o for o in yaml.safe_load_all(_helm(release, "get", "manifest", RELEASE, "--namespace", NS).stdout) if o]
    kinds = {o["kind"] for o in manifest}
    assert {"DaemonSet", "Deployment", "Job", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding", "ConfigMap", "PodDisruptionBudget"} <= kinds
    paths = []
    for obj in manifest:
        path = object_path(resources, obj)
        assert path is not None, f"the server does not serve {obj['apiVersion']} {obj['kind']}"
        assert _get(api, path) is not None, f"{path} not created"
        paths.append(path)
    scheduler_path = f"/apis/apps/v1/namespaces/{NS}/deployments/{RELEASE}-scheduler"
    before = api.request("GET", scheduler_path)
    config_path = f"/api/v1/namespaces/{NS}/configmaps/{RELEASE}-scheduler"
    assert yaml.safe_load(api.request("GET", config_path)["data"]["scheduler.yaml"])["mode"] == "shadow"
    first = eventually(lambda: _scheduler_replicasets(api), 20, "the scheduler's first ReplicaSet")
    assert len(first) == 1
    ds = api.request("GET", f"/apis/apps/v1/namespaces/{AGENT_NS}/daemonsets/{RELEASE}-agent")
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == NOWHERE
    agent_ns = api.request("GET", f"/api/v1/namespaces/{AGENT_NS}")
    assert agent_ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    release_ns = api.request("GET", f"/api/v1/namespaces/{NS}")
    assert "pod-security.kubernetes.io/enforce" not in release_ns["metadata"].get("labels", {}), "--create-namespace's"

    _helm(release, *_as_documented(documented("upgrade", "--reuse-values", "scheduler.mode=active")))
    assert yaml.safe_load(api.request("GET", config_path)["data"]["scheduler.yaml"])["mode"] == "active"
    after = api.request("GET", scheduler_path)
    annotation = "checksum/config"
    assert after["spec"]["template"]["metadata"]["annotations"][annotation] != \
        before["spec"]["template"]["metadata"]["annotations"][annotation]
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    extender = api.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{RELEASE}-extender")
    args = extender["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--mode") + 1] == "active"
    def two_replicasets() -> list[dict[str, Any]] | None:
        found = _scheduler_replicasets(api)
        return found if len(found) == 2 else None

    rolled = eventually(two_replicasets, 20, "a second ReplicaSet of the scheduler (its pods rolled)")
    hashes = {rs["metadata"]["labels"]["pod-template-hash"] for rs in rolled}
    assert len(hashes) == 2
    pods = api.request("GET", f"/api/v1/namespaces/{NS}/pods")["items"]
    assert pods, "the Deployments made their pods"
    assert not [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")], "a pod of ours landed on a node"
    status = json.loads(_helm(release, "status", RELEASE, "--namespace", NS, "--output", "json").stdout)
    assert status["version"] == 2 and status["info"]["status"] == "deployed"

    _helm(release, *_as_documented(documented("uninstall", "kubejoule")))
    for path in paths:
        eventually(lambda: _get(api, path) is None, 20, f"{path} deleted")  # noqa: B023 (called at once)
    deadline = time.monotonic() + 30
    left = _ours(api)
    while left and time.monotonic() < deadline:  # ReplicaSets and pods go by garbage collection
        time.sleep(0.5)
        left = _ours(api)
    assert left == [], f"left behind by helm uninstall: {left}"
    assert _get(api, f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{RELEASE}-agent") is None
    listed = _helm(release, "list", "--namespace", NS, "--deployed", "--failed", "--pending", "--superseded",
                   "--uninstalled", "--uninstalling", "--output", "json")
    assert json.loads(listed.stdout) == []
    assert time.monotonic() - started < 45
