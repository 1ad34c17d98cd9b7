"""daemonset/: the NetworkPolicies in front of the agents' /metrics, the extender and the
expander: each selects its workload's pods, names ports its container has, and lets in only the
peers it names (never everyone), among them the components that must reach it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.deploy_kustomize import Obj, build, user_kustomization

NAMESPACE = "kubejoule-system"
GUARDED = {  # workload → (its kind, the NetworkPolicy in front of it)
    "kubejoule-agent": ("DaemonSet", "kubejoule-agent-metrics"),
    "kubejoule-extender": ("Deployment", "kubejoule-extender"),
    "kubejoule-autoscaler-expander": ("Deployment", "kubejoule-autoscaler-expander"),
}


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    work = tmp_path_factory.mktemp("netpol")
    return build(user_kustomization(work, "overlays/intel", ("extender", "autoscaler-expander", "rebalancer")))


def _get(objects: list[Obj], kind: str, name: str) -> Obj:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return selector.get("matchLabels", {}).items() <= labels.items()


def _admits(policy: Obj, pod_labels: dict[str, str], namespace_labels: dict[str, str], port: str) -> bool:
    """Whether a pod (in a namespace with these labels) may reach PORT under the policy."""
    same_namespace = namespace_labels.get("kubernetes.io/metadata.name") == policy["metadata"]["namespace"]
    for rule in policy["spec"]["ingress"]:
        if port not in {p["port"] for p in rule["ports"]}:
            continue
        for peer in rule["from"]:
            ns_ok = _selects(peer["namespaceSelector"], namespace_labels) if "namespaceSelector" in peer else same_namespace
            pod_ok = _selects(peer["podSelector"], pod_labels) if "podSelector" in peer else True
            if ns_ok and pod_ok:
                return True
    return False


@pytest.mark.parametrize("workload", list(GUARDED))
def test_each_surface_has_a_policy_that_names_its_peers(workload: str, objects: list[Obj]) -> None:
    kind, name = GUARDED[workload]
    policy = _get(objects, "NetworkPolicy", name)
    pod = _get(objects, kind, workload)["spec"]["template"]
    assert policy["metadata"]["namespace"] == _get(objects, kind, workload)["metadata"]["namespace"]
    assert _selects(policy["spec"]["podSelector"], pod["metadata"]["labels"])
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    for rule in policy["spec"]["ingress"]:
        assert rule.get("from"), f"{name}: a rule without `from` admits everyone"
        assert all(peer for peer in rule["from"]), f"{name}: an empty peer admits everyone"
        assert {p["port"] for p in rule["ports"]} <= ports
    # A pod in some other namespace, with no label we name, gets nowhere.
    stranger_ns = {"kubernetes.io/metadata.name": "default"}
    assert not any(_admits(policy, {"app": "x"}, stranger_ns, port) for port in ports)


def test_kubejoule_reads_the_agents_and_scrapers_read_everyone(objects: list[Obj]) -> None:
    agent = _get(objects, "NetworkPolicy", "kubejoule-agent-metrics")
    home = {"kubernetes.io/metadata.name": NAMESPACE}
    for reader in ("kubejoule-scheduler", "kubejoule-rebalancer", "kubejoule-extender"):
        labels = _get(objects, "Deployment", reader)["spec"]["template"]["metadata"]["labels"]
        assert _admits(agent, labels, home, "metrics"), reader
    scrapers = {"kubernetes.io/metadata.name": "monitoring", "kubejoule.io/scrape": "true"}
    assert _admits(agent, {}, scrapers, "metrics")
    assert _admits(_get(objects, "NetworkPolicy", "kubejoule-extender"), {}, scrapers, "http")
    assert _admits(_get(objects, "NetworkPolicy", "kubejoule-autoscaler-expander"), {}, scrapers, "metrics")
    assert not _admits(_get(objects, "NetworkPolicy", "kubejoule-autoscaler-expander"), {}, scrapers, "grpc")


def test_the_callers_reach_the_extender_and_the_expander(objects: list[Obj]) -> None:
    kube_system = {"kubernetes.io/metadata.name": "kube-system"}
    extender = _get(objects, "NetworkPolicy", "kubejoule-extender")
    assert _admits(extender, {"component": "kube-scheduler", "tier": "control-plane"}, kube_system, "http")
    expander = _get(objects, "NetworkPolicy", "kubejoule-autoscaler-expander")
    assert _admits(expander, {"app.kubernetes.io/name": "cluster-autoscaler"}, kube_system, "grpc")


def test_no_workload_listens_on_the_host_network(objects: list[Obj]) -> None:
    # NetworkPolicy does not apply to hostNetwork pods: none of ours may be one.
    for obj in objects:
        if obj["kind"] in ("DaemonSet", "Deployment"):
            assert not obj["spec"]["template"]["spec"].get("hostNetwork", False), obj["metadata"]["name"]
